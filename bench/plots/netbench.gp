# netbench's plot: requests (HTTP) and round trips (echo) per second of each
# server on one core, as clustered bars.
#   gnuplot -e "dat='work/plot.dat'; png='out/netbench.png'" bench/plots/netbench.gp
# The .dat is bench_tables.py netbench's: a quoted label, then Tessera, Go, nginx,
# thread per connection, ceiling (NaN where a system has no figure).
set terminal pngcairo size 1200,520 noenhanced font 'sans,10'
set output png
set title "Requests (HTTP) and round trips (echo) per second, one server core, same run (higher is better)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set key outside bottom center horizontal
set yrange [0:*]
set format y "%.0s%c"
plot dat using 2:xtic(1) title 'Tessera' lc rgb "#d62728", \
     '' using 3 title 'Go net' lc rgb "#1f77b4", \
     '' using 4 title 'nginx' lc rgb "#2ca02c", \
     '' using 5 title 'std::thread per connection' lc rgb "#7f7f7f", \
     '' using 6 title 'ceiling: one spinning epoll thread, no runtime' lc rgb "#bcbd22"
