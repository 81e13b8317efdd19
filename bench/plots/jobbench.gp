# jobbench's plot: each benchmark's time over oneTBB's in the same run, for
# Tessera, OpenMP and a std::thread pool (log scale; below 1 is faster).
#   gnuplot -e "dat='out/jobbench-ratios.dat'; png='out/jobbench.png'" bench/plots/jobbench.gp
# The .dat is bench/bench_tables.py jobbench's: a quoted label, then the three ratios.
set terminal pngcairo size 1400,560 noenhanced font 'sans,10'
set output png
set title "Time relative to oneTBB, same run (below 1 = faster than oneTBB; log scale)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y
set yrange [0.1:1000]
set ytics (0.1, 0.25, 0.5, 1, 2, 4, 10, 100, 1000)
set grid ytics
set xtics rotate by 35 right scale 0
set key outside bottom center horizontal
set arrow from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb "black"
plot dat using 2:xtic(1) title 'Tessera' lc rgb "#d62728", \
     '' using 3 title 'OpenMP' lc rgb "#1f77b4", \
     '' using 4 title 'std::thread pool' lc rgb "#7f7f7f"
