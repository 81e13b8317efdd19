// The game frame's loop, written once against the backend interface that
// job_system (Tessera's jobs) and bench/jobbench's frame_tbb (oneTBB) each
// implement: `graph`, `node`, add(graph, f, background), edge(a, b),
// run(graph), run_async(graph), wait(graph), pieces(n, f) and ai(world).
// The systems themselves are frame.h's.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "frame.h"

namespace frame {

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
  auto input = be.add(
      sim, [&] { input_state = frame::mix(input_state, static_cast<std::uint64_t>(frame_no)); });
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
  auto stream = be.add(
      sim,
      [&] {  // background streaming: low priority, off the critical path
        std::uint64_t h = streamed;
        for (int i = 0; i < 20000; ++i) h = frame::mix(h, static_cast<std::uint64_t>(i));
        streamed = h;
      },
      true);
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

/// The options every backend's program takes.
struct options {
  unsigned workers = 2;
  int frames = 300;
  std::size_t entities = 100'000;
  int warmup = 10;
};

/// Adds --workers, --frames, --entities and --warmup to `app`.
inline void add_options(CLI::App& app, options& o) {
  app.add_option("--workers", o.workers, "worker threads")->check(CLI::Range(1, 256));
  app.add_option("--frames", o.frames, "frames to run")->check(CLI::Range(1, 1'000'000));
  app.add_option("--entities", o.entities, "entities in the world")
      ->check(CLI::Range(1, 10'000'000));
  app.add_option("--warmup", o.warmup, "frames left out of the percentiles")
      ->check(CLI::NonNegativeNumber);
}

/// The lines every backend's program prints: its frame-time percentiles
/// (the first `warmup` frames left out) and, last, the checksum.
inline void print_result(const char* backend, const options& o, const result& r) {
  const auto [workers, frames, entities, warmup] = o;
  std::vector<double> steady(
      r.frame_ms.begin() +
          std::min<std::size_t>(static_cast<std::size_t>(warmup), r.frame_ms.size() / 2),
      r.frame_ms.end());
  std::printf("backend %s, %u workers, %zu entities, %d frames\n", backend, workers, entities,
              frames);
  std::printf("frame time ms: p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n", percentile(steady, 50),
              percentile(steady, 90), percentile(steady, 99), percentile(steady, 100));
  std::printf("checksum: %016llx\n", static_cast<unsigned long long>(r.checksum));
}

}  // namespace frame
