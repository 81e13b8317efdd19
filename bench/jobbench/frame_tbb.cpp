// frame_tbb — job_system's game frame (samples/job_system/game.h, the same
// systems and the same checksum) on oneTBB: a flow graph per frame stage and
// parallel_for over pieces, for bench/jobbench.sh's comparison.
//
//   frame_tbb --workers 2 --frames 300 --entities 100000
//
// Prints what job_system prints: frame-time percentiles and `checksum: <hex>`.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <deque>
#include <utility>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/flow_graph.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include "game.h"

namespace {

using frame::world;

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
    g.nodes.emplace_back(
        g.g, [f = std::move(f)](const tbb::flow::continue_msg&) { f(); },
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
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n),
                      [&f](const tbb::blocked_range<std::size_t>& r) {
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"frame_tbb: job_system's game frame on oneTBB"};
  frame::options o;
  frame::add_options(app, o);
  CLI11_PARSE(app, argc, argv);
  tbb_backend be(o.workers);
  frame::print_result("tbb", o, frame::simulate(be, o.entities, o.frames));
  return 0;
}
