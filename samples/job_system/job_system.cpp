// job_system — a game frame on Tessera's jobs: N entities, ~20 systems in a
// dependency graph run once per frame, a main thread that pipelines frame
// N+1's simulation with frame N's rendering, and a checksum that is the same
// for every worker count (frame.h says why). bench/jobbench runs the same
// frame on oneTBB (frame_tbb) for comparison.
//
//   job_system --workers 2 --frames 300 --entities 100000
//
// Prints frame-time percentiles (the time between consecutive frames handed
// to rendering, in ms) and, last, `checksum: <hex>`.
#include <tessera/jobs.h>
#include <tessera/runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "../stats_table.h"
#include "game.h"

namespace {

using frame::world;

// ---- backends: a graph, a loop over pieces, and the AI tick ----------------------------
struct tessera_backend {
  explicit tessera_backend(unsigned workers, std::size_t trace_events = 0)
      : rt({.workers = workers, .trace_events = trace_events}) {
    rt.start();
  }
  ~tessera_backend() {
    if (rt.running()) rt.stop();
  }
  tessera::runtime rt;

  using graph = tessera::task_graph;
  using node = tessera::task_graph::node;
  template <class F>
  node add(graph& g, F f, bool background = false) {
    return g.emplace(std::move(f), background ? tessera::priority::low : tessera::priority::normal);
  }
  static void edge(node a, node b) { a.precede(b); }
  void run(graph& g) { g.run(rt); }
  void run_async(graph& g) { g.run_async(rt); }
  static void wait(graph& g) { g.wait(); }
  /// f(piece) for every piece in [0, pieces).
  template <class F>
  static void pieces(std::size_t n, const F& f) {
    tessera::parallel_for(std::size_t{0}, n, [&f](std::size_t p) { f(p); });
  }
  /// Perceive, wait on a counter until every batch has perceived, decide: the
  /// jobs park mid-way, their workers go on with other jobs.
  static void ai(world& w) {
    tessera::wait_group perceived;
    perceived.add(frame::kAiBatches);
    tessera::task_group g;
    const std::size_t per = (w.n + frame::kAiBatches - 1) / frame::kAiBatches;
    for (int k = 0; k < frame::kAiBatches; ++k) {
      g.run([&w, &perceived, per, k] {
        const std::size_t b = std::min(w.n, per * k), e = std::min(w.n, b + per);
        frame::perceive(w, b, e);
        perceived.done();
        perceived.wait();
        frame::decide(w, b, e);
      });
    }
    g.wait();
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"job_system: a game frame on Tessera's jobs"};
  frame::options o;
  frame::add_options(app, o);
  bool stats = false;
  app.add_flag("--stats", stats, "print each worker's counters (runtime::stats)");
  std::string trace;
  app.add_option("--trace", trace,
                 "write a Chrome trace (Perfetto) of the run to this file; runs one frame "
                 "unless --frames says otherwise");
  CLI11_PARSE(app, argc, argv);
  if (!trace.empty() && app.count("--frames") == 0) {
    o.frames = 1;
    o.warmup = 0;
  }

  tessera_backend be(o.workers, trace.empty() ? 0 : std::size_t{1} << 18);
  const frame::result r = frame::simulate(be, o.entities, o.frames);
  be.rt.stop();
  if (!trace.empty()) {
    std::ofstream out(trace);
    be.rt.write_trace(out);
    if (!out) {
      std::fprintf(stderr, "job_system: cannot write the trace to %s\n", trace.c_str());
      return 1;
    }
    std::printf("trace: %s\n", trace.c_str());
  }
  frame::print_result("tessera", o, r);
  if (stats) tessera::samples::print_stats(be.rt.stats());
  return 0;
}
