# semabench's plot: aggregate throughput against threads, one panel per family
# (semaphores, mutexes, reader-writer locks), Tessera's series thick and solid,
# the peers thin and dashed.
#   gnuplot -e "csv='out/semabench.csv'; png='out/semabench.png'" bench/plots/semabench.gp
# The CSV is semabench's --csv: impl,family,tessera,threads,median_ops_per_s,...
set terminal pngcairo size 1500,640 noenhanced font 'sans,10'
set output png
set datafile separator ','
set logscale y
set logscale x 2
set grid
set xlabel 'threads'
set ylabel 'iterations / s (log scale)'
set format y '%.0s%c'
set mytics 10
set key below left Left reverse maxcols 2 maxrows 4 font 'sans,9'
set bmargin 9
colours = "#1f77b4 #d62728 #2ca02c #ff7f0e #9467bd #8c564b #e377c2 #17becf"
markers = "7 5 9 11 13 1 2 3"
# The implementations of one family, in CSV order, and whether each is Tessera's.
impls(f) = system("awk -F, 'NR > 1 && $2 == \"" . f . "\" && !seen[$1]++ { print $1 }' " . csv)
ours(f) = system("awk -F, 'NR > 1 && $2 == \"" . f . "\" && !seen[$1]++ { print $3 }' " . csv)
families = "semaphore mutex rwlock"
titles = "'semaphores' 'mutexes (lock as a binary semaphore)' 'reader-writer locks (read-mostly loop)'"
set multiplot layout 1,3 title 'semabench: aggregate throughput vs threads (median of runs; thick = Tessera)'
do for [p = 1:3] {
  f = word(families, p)
  set title word(titles, p)
  names = impls(f)
  tess = ours(f)
  plot for [k = 1:words(names)] csv \
    using (strcol(1) eq word(names, k) ? $4 : NaN):5 with linespoints \
    lc rgb word(colours, (k - 1) % 8 + 1) pt int(word(markers, (k - 1) % 8 + 1)) ps 1.2 \
    lw (word(tess, k) eq "1" ? 3.5 : 1.5) dt int(word(tess, k) eq "1" ? 1 : 2) \
    title word(names, k)
}
unset multiplot
