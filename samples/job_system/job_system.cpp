// job_system — a game frame on Tessera's jobs (or, for comparison, oneTBB):
// N entities, ~20 systems in a dependency graph run once per frame, a main
// thread that pipelines frame N+1's simulation with frame N's rendering, and
// a checksum that is the same for every worker count (frame.h says why).
//
//   job_system --workers 2 --frames 300 --entities 100000 [--backend tbb]
//
// Prints frame-time percentiles (the time between consecutive frames handed
// to rendering, in ms) and, last, `checksum: <hex>`.
#include <tessera/jobs.h>
#include <tessera/runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <string>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/flow_graph.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include "../stats_table.h"
#include "frame.h"

namespace {

using frame::world;
using frame::snapshot;

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

struct tbb_backend {
  explicit tbb_backend(unsigned workers)
      : limit(tbb::global_control::max_allowed_parallelism, workers) {}
  tbb::global_control limit;

  struct graph {
    tbb::flow::graph g;
    std::deque<tbb::flow::continue_node<tbb::flow::continue_msg>> nodes;
    std::vector<bool> has_pred;
  };
  struct node {
    graph* g;
    std::size_t i;
  };
  template <class F>
  node add(graph& g, F f, bool background = false) {
    g.nodes.emplace_back(g.g, [f = std::move(f)](const tbb::flow::continue_msg&) { f(); },
                         background ? tbb::flow::no_priority : tbb::flow::node_priority_t(1));
    g.has_pred.push_back(false);
    return {&g, g.nodes.size() - 1};
  }
  static void edge(node a, node b) {
    tbb::flow::make_edge(a.g->nodes[a.i], b.g->nodes[b.i]);
    b.g->has_pred[b.i] = true;
  }
  static void run_async(graph& g) {
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      if (!g.has_pred[i]) g.nodes[i].try_put(tbb::flow::continue_msg());
    }
  }
  void run(graph& g) {
    run_async(g);
    g.g.wait_for_all();
  }
  static void wait(graph& g) { g.g.wait_for_all(); }
  template <class F>
  static void pieces(std::size_t n, const F& f) {
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n), [&f](const tbb::blocked_range<std::size_t>& r) {
      for (std::size_t p = r.begin(); p != r.end(); ++p) f(p);
    });
  }
  /// oneTBB tasks cannot park mid-way: two loops, perceive then decide.
  static void ai(world& w) {
    const std::size_t per = (w.n + frame::kAiBatches - 1) / frame::kAiBatches;
    auto range = [&](int k) {
      const std::size_t b = std::min(w.n, per * k);
      return std::pair{b, std::min(w.n, b + per)};
    };
    pieces(frame::kAiBatches, [&](std::size_t k) {
      auto [b, e] = range(static_cast<int>(k));
      frame::perceive(w, b, e);
    });
    pieces(frame::kAiBatches, [&](std::size_t k) {
      auto [b, e] = range(static_cast<int>(k));
      frame::decide(w, b, e);
    });
  }
};

struct result {
  std::vector<double> frame_ms;
  std::uint64_t checksum = 0;
};

template <class Backend>
result simulate(Backend& be, std::size_t entities, int frames) {
  world w(entities);
  std::array<snapshot, 2> snaps;
  snapshot* target = &snaps[0];
  int frame_no = 0;
  const std::size_t np = w.pieces();
  auto each = [&](auto fn) {  // a loop system over every piece of the world
    return [&w, np, fn] {
      Backend::pieces(np, [&w, fn](std::size_t p) {
        fn(w, p * frame::kPiece, std::min(w.n, (p + 1) * frame::kPiece));
      });
    };
  };

  // The simulation graph: 14 systems.
  typename Backend::graph sim;
  std::uint64_t input_state = 0, streamed = 0;
  auto input = be.add(sim, [&] { input_state = frame::mix(input_state, static_cast<std::uint64_t>(frame_no)); });
  auto integ = be.add(sim, each(frame::integrate));
  auto cells = be.add(sim, each(frame::assign_cells));
  auto grid = be.add(sim, [&] { frame::build_grid(w); });
  auto coll = be.add(sim, each(frame::collide));
  auto anim = be.add(sim, each(frame::animate));
  auto ai = be.add(sim, [&] { Backend::ai(w); });
  auto parts = be.add(sim, each(frame::particles));
  auto lod = be.add(sim, each(frame::choose_lod));
  auto audio = be.add(sim, [&] { frame::audio(w); });
  auto stats = be.add(sim, [&] { frame::statistics(w); });
  auto ui = be.add(sim, [&] { w.stats = frame::mix(w.stats, input_state); });
  auto stream = be.add(sim, [&] {  // background streaming: low priority, off the critical path
    std::uint64_t h = streamed;
    for (int i = 0; i < 20000; ++i) h = frame::mix(h, static_cast<std::uint64_t>(i));
    streamed = h;
  }, true);
  auto snap = be.add(sim, [&] {
    frame::take_snapshot(w, *target, frame_no);
    target->checksum = frame::mix(target->checksum, streamed);
  });
  Backend::edge(input, integ);
  Backend::edge(integ, cells);
  Backend::edge(cells, grid);
  Backend::edge(grid, coll);
  Backend::edge(integ, anim);
  Backend::edge(coll, ai);
  Backend::edge(anim, ai);
  Backend::edge(coll, parts);
  Backend::edge(integ, lod);
  Backend::edge(parts, audio);
  Backend::edge(ai, stats);
  Backend::edge(stats, ui);
  for (auto n : {lod, audio, ui, stream}) Backend::edge(n, snap);

  // The rendering graphs, one per snapshot: camera, cull, command lists, merge.
  std::array<typename Backend::graph, 2> render;
  for (int s = 0; s < 2; ++s) {
    snapshot& sn = snaps[s];
    auto camera = be.add(render[s], [&sn] { sn.checksum = frame::mix(sn.checksum, 0xca11ab1e); });
    auto cull = be.add(render[s], [&sn, np] {
      Backend::pieces(np, [&sn](std::size_t p) {
        frame::cull(sn, p * frame::kPiece, std::min(sn.x.size(), (p + 1) * frame::kPiece));
      });
    });
    auto record = be.add(render[s], [&sn, np] {
      Backend::pieces(np, [&sn](std::size_t p) { frame::record_commands(sn, p); });
    });
    auto merge = be.add(render[s], [&sn] { frame::merge_commands(sn); });
    Backend::edge(camera, cull);
    Backend::edge(cull, record);
    Backend::edge(record, merge);
  }

  result out;
  std::array<bool, 2> in_flight{false, false};
  auto finish = [&](int slot) {
    if (!in_flight[slot]) return;
    Backend::wait(render[slot]);
    in_flight[slot] = false;
    out.checksum = frame::mix(out.checksum, snaps[slot].checksum);
  };
  auto last = std::chrono::steady_clock::now();
  for (int f = 0; f < frames; ++f) {
    const int slot = f % 2;
    finish(slot);  // frame f-2's rendering used this snapshot
    target = &snaps[slot];
    frame_no = f;
    be.run(sim);
    be.run_async(render[slot]);  // overlaps the next frame's simulation
    in_flight[slot] = true;
    const auto now = std::chrono::steady_clock::now();
    out.frame_ms.push_back(std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
  }
  finish(frames % 2);  // the older of the two in flight first
  finish((frames + 1) % 2);
  return out;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"job_system: a game frame on Tessera's jobs (or oneTBB, for comparison)"};
  unsigned workers = 2;
  int frames = 300;
  std::size_t entities = 100'000;
  std::string backend = "tessera";
  int warmup = 10;
  app.add_option("--workers", workers, "worker threads")->check(CLI::Range(1, 256));
  app.add_option("--frames", frames, "frames to run")->check(CLI::Range(1, 1'000'000));
  app.add_option("--entities", entities, "entities in the world")->check(CLI::Range(1, 10'000'000));
  app.add_option("--backend", backend, "tessera or tbb")->check(CLI::IsMember({"tessera", "tbb"}));
  app.add_option("--warmup", warmup, "frames left out of the percentiles")->check(CLI::NonNegativeNumber);
  bool stats = false;
  app.add_flag("--stats", stats, "print each worker's counters (runtime::stats; tessera backend)");
  std::string trace;
  app.add_option("--trace", trace,
                 "write a Chrome trace (Perfetto) of the run to this file; runs one frame "
                 "unless --frames says otherwise (tessera backend)");
  CLI11_PARSE(app, argc, argv);
  if (!trace.empty() && app.count("--frames") == 0) {
    frames = 1;
    warmup = 0;
  }

  result r;
  tessera::runtime::statistics counters;
  if (backend == "tessera") {
    tessera_backend be(workers, trace.empty() ? 0 : std::size_t{1} << 18);
    r = simulate(be, entities, frames);
    be.rt.stop();
    counters = be.rt.stats();
    if (!trace.empty()) {
      std::ofstream out(trace);
      be.rt.write_trace(out);
      if (!out) {
        std::fprintf(stderr, "job_system: cannot write the trace to %s\n", trace.c_str());
        return 1;
      }
      std::printf("trace: %s\n", trace.c_str());
    }
  } else {
    tbb_backend be(workers);
    r = simulate(be, entities, frames);
  }
  std::vector<double> steady(r.frame_ms.begin() + std::min<std::size_t>(warmup, r.frame_ms.size() / 2),
                             r.frame_ms.end());
  std::printf("backend %s, %u workers, %zu entities, %d frames\n", backend.c_str(), workers, entities,
              frames);
  std::printf("frame time ms: p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n", percentile(steady, 50),
              percentile(steady, 90), percentile(steady, 99), percentile(steady, 100));
  std::printf("checksum: %016llx\n", static_cast<unsigned long long>(r.checksum));
  if (stats && backend == "tessera") tessera::samples::print_stats(counters);
  return 0;
}
