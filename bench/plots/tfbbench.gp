# bench/tfbbench.sh's plot: requests/s per TechEmpower test type at 256
# connections, one bar per server. Inputs: dat (bench_tables.py tfbbench), png.
set terminal pngcairo size 900,500 font ",10"
set output png
set title "TechEmpower test types, 256 connections (20 queries), server on 1 core (requests/s, median of 3, log scale)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set ylabel "requests/s"
set key outside bottom center horizontal
plot dat using 2:xtic(1) title "Tessera", "" using 3 title "Go net/http", "" using 4 title "fasthttp (pgx)", \
     "" using 5 title "Boost.Beast"
