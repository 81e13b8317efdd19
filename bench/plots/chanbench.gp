# chanbench's plot: ns per item against producer/consumer pairs, one panel per
# setting (threads or fibers, rendezvous or buffered), Tessera's two channels
# thick and solid, Boost.Fiber's and Go's thin and dashed. Log scales.
#   gnuplot -e "csv='out/chanbench.csv'; png='out/chanbench.png'" bench/plots/chanbench.gp
# The CSV is chanbench's --csv: group,capacity,pairs,lockfree_ns,spin_ns,boost_ns,go_ns
set terminal pngcairo size 1400,900 noenhanced font 'sans,10'
set output png
set datafile separator ','
set logscale y
set logscale x 2
set grid
set xlabel 'producer/consumer pairs P'
set ylabel 'ns per item (log scale; lower is better)'
set key top left font 'sans,9'
groups = "threads threads fibers fibers"
caps = "0 64 0 64"
titles = "'OS threads, rendezvous' 'OS threads, capacity 64' 'fibers on 2 workers, rendezvous' 'fibers on 2 workers, capacity 64'"
series = "lockfree_channel channel(spin) Boost.Fiber Go"
colours = "#1f77b4 #d62728 #2ca02c #ff7f0e"
set multiplot layout 2,2 title 'chanbench: P producers and P consumers through one channel (median of runs)'
do for [p = 1:4] {
  g = word(groups, p)
  c = word(caps, p) + 0
  set title word(titles, p)
  plot for [k = 1:4] csv \
    using ((strcol(1) eq g && $2 == c && column(3 + k) > 0) ? $3 : NaN):(column(3 + k)) \
    with linespoints lc rgb word(colours, k) pt 7 ps 1.2 lw (k <= 2 ? 3 : 1.5) \
    dt int(k <= 2 ? 1 : 2) title word(series, k)
}
unset multiplot
