// testing/simulation.cpp — the schedules (random, PCT), exploration and
// replay over a simulated runtime (sched/simulation.h has the engine's side).
//
// PCT follows Burckhardt, Kothari, Musuvathi and Nagarakatte, "A Randomized
// Scheduler with Probabilistic Guarantees of Finding Bugs" (ASPLOS 2010):
// random initial priorities of at least d, d - 1 change points drawn
// uniformly from the first k steps, and at the i-th change point the running
// fiber's priority drops to d - i, below every initial one. Fibers appear as
// the run goes (the paper knows n up front): each gets its random priority
// when first seen. k is not known before a run either: the first run guesses
// 1,024 steps; from then on k is the longest run seen, rounded up to a power
// of two (a k far above the run's length puts the change points past its
// end, and PCT degenerates into one fixed order). The estimate is part of the
// seed, so a replay draws the same change points. Spins and yields drop the fiber below every other
// (a fiber that waits by spinning would otherwise keep the fiber it waits
// for from ever running under a strict priority order).
#include "tessera/testing/simulation.h"

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <vector>

#include "network.h"
#include "scheduler.h"
#include "splitmix64.h"
#include "tessera/clock.h"
#include "tessera/runtime.h"

namespace tessera::testing {
namespace {

using detail::splitmix64;
using sched::fiber_record;
using sched::switch_point;

constexpr unsigned kStrategyShift = 60;
constexpr unsigned kDepthShift = 56;
constexpr unsigned kStepsShift = 50;
constexpr std::uint64_t kStreamMask = (std::uint64_t{1} << kStepsShift) - 1;
constexpr unsigned kFirstStepsLog2 = 10;

struct decoded_seed {
  strategy how;
  unsigned depth;
  unsigned steps_log2;
  std::uint64_t stream;
};

decoded_seed decode(std::uint64_t seed) {
  const unsigned how = static_cast<unsigned>(seed >> kStrategyShift);
  if (how > 1) {
    throw std::invalid_argument("tessera::testing: seed " + seed_string(seed) +
                                " names no strategy (bits 63-60 must be 0 or 1)");
  }
  decoded_seed d{how == 0 ? strategy::random : strategy::pct,
                 static_cast<unsigned>((seed >> kDepthShift) & 0xf),
                 static_cast<unsigned>((seed >> kStepsShift) & 0x3f), seed & kStreamMask};
  if (d.how == strategy::pct && d.depth == 0) {
    throw std::invalid_argument("tessera::testing: seed " + seed_string(seed) +
                                " is a pct seed of depth 0 (bits 59-56 must be 1 to 15)");
  }
  return d;
}

std::uint64_t encode(strategy how, unsigned depth, unsigned steps_log2, std::uint64_t stream) {
  return (std::uint64_t{how == strategy::pct ? 1u : 0u} << kStrategyShift) |
         (std::uint64_t{depth} << kDepthShift) | (std::uint64_t{steps_log2} << kStepsShift) |
         (stream & kStreamMask);
}

void check_options(const explore_options& o, const char* who) {
  if (o.depth < 1 || o.depth > 15) {
    throw std::invalid_argument(std::string(who) + ": depth = " + std::to_string(o.depth) +
                                " is outside 1 to 15");
  }
  if (o.max_steps == 0) throw std::invalid_argument(std::string(who) + ": max_steps is 0");
  if (o.max_virtual_time.count() <= 0) {
    throw std::invalid_argument(std::string(who) + ": max_virtual_time must be positive");
  }
  if (tessera::detail::current_fiber_id() != 0) {
    throw std::logic_error(std::string(who) +
                           ": called on a fiber (a simulation runs from a plain thread)");
  }
}

/// One step of a run, for the printed trace.
struct step_event {
  std::uint64_t step;
  std::chrono::nanoseconds at;
  std::uint32_t fiber;
  switch_point why;
  const char* on;
};

/// The schedule of one run: the engine asks it at every switch point.
class schedule final : public sched::simulation_control {
 public:
  schedule(std::uint64_t seed, bool record) : seed_(decode(seed)), record_(record) {
    rng_ = seed_.stream ^ 0x5eed5eed5eed5eedULL;
    if (seed_.how == strategy::pct) {
      const std::uint64_t k = std::uint64_t{1} << seed_.steps_log2;
      for (unsigned i = 1; i < seed_.depth; ++i) change_points_.push_back(1 + next() % k);
      // The i-th change point (in step order) drops the running fiber to d - i.
      std::sort(change_points_.begin(), change_points_.end());
    }
  }

  std::size_t pick(const std::vector<fiber_record*>& ready) override {
    if (seed_.how == strategy::random) return static_cast<std::size_t>(next() % ready.size());
    // A change point at this step: the fiber that ran last drops to d - i.
    while (next_change_ < change_points_.size() && change_points_[next_change_] <= steps) {
      ++next_change_;
      if (last_ != 0) priority(last_) = static_cast<std::int64_t>(seed_.depth - next_change_);
    }
    std::size_t best = 0;
    std::int64_t best_priority = INT64_MIN;
    for (std::size_t i = 0; i < ready.size(); ++i) {
      const std::int64_t p = priority(ready[i]->sim_ordinal);
      if (p > best_priority) {
        best = i;
        best_priority = p;
      }
    }
    return best;
  }

  bool preempt(const fiber_record& running, switch_point why) override {
    if (why == switch_point::spin && seed_.how == strategy::pct) demote(running.sim_ordinal);
    return true;
  }

  void note(std::uint32_t fiber, switch_point why, const char* waits_on) override {
    hash_ = (hash_ ^ ((std::uint64_t{fiber} << 8) | static_cast<std::uint64_t>(why))) *
            0x100000001b3ULL;
    if (why == switch_point::start) {
      last_ = fiber;
      return;
    }
    if (why == switch_point::yield && seed_.how == strategy::pct) demote(fiber);
    if (record_) events_.push_back({steps, now - start, fiber, why, waits_on});
  }

  std::uint32_t random() override { return static_cast<std::uint32_t>(next() >> 32); }

  std::uint64_t trace_hash() const noexcept { return hash_; }
  std::vector<step_event> take_events() noexcept { return std::move(events_); }
  std::chrono::steady_clock::time_point start{};

 private:
  std::uint64_t next() noexcept { return splitmix64(rng_); }
  std::int64_t& priority(std::uint32_t fiber) {
    if (fiber >= priorities_.size()) priorities_.resize(fiber + 1, 0);
    std::int64_t& p = priorities_[fiber];
    // First sight: a random priority of at least d (above every changed one).
    if (p == 0)
      p = static_cast<std::int64_t>(seed_.depth) + 1 + static_cast<std::int64_t>(next() >> 33);
    return p;
  }
  void demote(std::uint32_t fiber) { priority(fiber) = --bottom_; }

  decoded_seed seed_;
  bool record_;
  std::uint64_t rng_ = 0;
  std::uint64_t hash_ = 0xcbf29ce484222325ULL;
  std::vector<std::uint64_t> change_points_;
  std::size_t next_change_ = 0;
  std::vector<std::int64_t> priorities_;
  std::int64_t bottom_ = 0;  // demoted fibers go below every other, newest lowest
  std::uint32_t last_ = 0;
  std::vector<step_event> events_;
};

/// A runtime that runs simulations, one after another.
class simulator {
 public:
  explicit simulator(const explore_options& o, bool tracing)
      : options_(o), runtime_(runtime_options_for(o, tracing)) {}

  run_report run(const std::function<void()>& body, std::uint64_t seed, bool record) {
    schedule s(seed, record);
    s.start = std::chrono::steady_clock::now();  // outside the run: the real clock
    s.now = s.start;
    s.max_steps = options_.max_steps;
    s.time_limit = s.start + options_.max_virtual_time;
    detail::network net(options_.network, seed);
    s.network = &net;
    tessera::detail::runtime_impl* impl = tessera::detail::impl_of(runtime_);
    impl->sim = &s;
    run_report r;
    r.seed = seed;
    try {
      runtime_.run(body);
    } catch (...) {
      r.failure = std::current_exception();
    }
    impl->sim = nullptr;
    r.trace_hash = s.trace_hash();
    r.steps = s.steps;
    r.fibers = s.fibers;
    r.virtual_time = s.now - s.start;
    if (record) events_ = s.take_events();
    return r;
  }

  const std::vector<step_event>& events() const noexcept { return events_; }
  runtime& rt() noexcept { return runtime_; }

 private:
  static runtime_options runtime_options_for(const explore_options& o, bool tracing) {
    runtime_options r;
    r.workers = 1;
    r.pin_workers = false;
    r.stack_size = o.stack_size;
    r.on_deadlock = deadlock_policy::raise;
    r.io = io_backend::epoll;  // readiness reported at once, in order (the network's pairs)
    r.stall_threshold = std::chrono::milliseconds(0);
    if (tracing) r.trace_events = std::size_t{1} << 16;
    return r;
  }

  explore_options options_;
  runtime runtime_;
  std::vector<step_event> events_;
};

void print_trace(const std::vector<step_event>& events, std::uint64_t seed) {
  std::fprintf(stderr,
               "tessera::testing: trace of seed %s (step, virtual time, fiber, why it stopped)\n",
               seed_string(seed).c_str());
  for (const step_event& e : events) {
    std::fprintf(stderr, "  %6" PRIu64 "  +%.9f s  fiber %u %s%s%s%s\n", e.step,
                 std::chrono::duration<double>(e.at).count(), e.fiber, sched::to_string(e.why),
                 e.on != nullptr ? " (" : "", e.on != nullptr ? e.on : "",
                 e.on != nullptr ? ")" : "");
  }
}

}  // namespace

std::string failure_text(const std::exception_ptr& failure) {
  if (failure == nullptr) return "";
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception not derived from std::exception";
  }
}

std::string seed_string(std::uint64_t seed) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%016" PRIx64, seed);
  return text;
}

std::uint64_t parse_seed(const std::string& text) {
  std::size_t used = 0;
  std::uint64_t v = 0;
  try {
    v = std::stoull(text, &used, 0);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) {
    throw std::invalid_argument("tessera::testing: \"" + text +
                                "\" is not a seed (hex with 0x, or decimal)");
  }
  return v;
}

std::uint64_t seed_for(const explore_options& options, std::uint64_t index) {
  std::uint64_t x = options.seed + index;
  return encode(options.strategy, options.strategy == strategy::pct ? options.depth : 0,
                kFirstStepsLog2, splitmix64(x));
}

run_report run_once(const std::function<void()>& body, std::uint64_t seed,
                    const explore_options& options) {
  check_options(options, "tessera::testing::run_once");
  decode(seed);
  simulator sim(options, false);
  return sim.run(body, seed, false);
}

void switch_point() noexcept {
  sched::marked_switch_point();
}

std::optional<std::uint64_t> explore(const std::function<void()>& body,
                                     const explore_options& options) {
  return explore_report(body, options).failing_seed;
}

exploration explore_report(const std::function<void()>& body, const explore_options& options) {
  check_options(options, "tessera::testing::explore");
  simulator sim(options, false);
  const auto began = std::chrono::steady_clock::now();
  exploration result;
  unsigned steps_log2 = kFirstStepsLog2;
  for (std::uint64_t i = 0; i < options.runs; ++i) {
    const std::uint64_t seed = (seed_for(options, i) & ~(std::uint64_t{0x3f} << kStepsShift)) |
                               (std::uint64_t{steps_log2} << kStepsShift);
    const run_report r = sim.run(body, seed, false);
    ++result.runs;
    result.steps += r.steps;
    if (i == 0 && options.check_determinism) {
      const run_report again = sim.run(body, seed, false);
      if (again.trace_hash != r.trace_hash ||
          (again.failure == nullptr) != (r.failure == nullptr)) {
        throw std::logic_error(
            "tessera::testing::explore: seed " + seed_string(seed) +
            " gave two different schedules (the body depends on something the simulation does "
            "not control: the real clock, an OS thread, a real socket, addresses)");
      }
    }
    if (r.failure != nullptr) {
      if (options.verbose) {
        std::string hint =
            options.replay_hint.empty() ? "replay(body, {seed})" : options.replay_hint;
        if (const auto at = hint.find("{seed}"); at != std::string::npos) {
          hint.replace(at, 6, seed_string(seed));
        }
        std::fprintf(stderr,
                     "tessera::testing: run %" PRIu64 " of %" PRIu64 " failed, seed %s (%" PRIu64
                     " steps, %u fibers):\n%s\n  replay: %s\n",
                     i + 1, options.runs, seed_string(seed).c_str(), r.steps, r.fibers,
                     failure_text(r.failure).c_str(), hint.c_str());
      }
      result.failing_seed = seed;
      result.failure = r.failure;
      break;
    }
    // k: the longest run so far, rounded up to a power of two (the first
    // run replaces the starting guess).
    const auto needed = static_cast<unsigned>(std::bit_width(r.steps));
    steps_log2 = std::min(63u, i == 0 ? needed : std::max(steps_log2, needed));
    if (options.time_budget.count() > 0 &&
        std::chrono::steady_clock::now() - began >= options.time_budget) {
      break;
    }
  }
  result.elapsed = std::chrono::steady_clock::now() - began;
  return result;
}

void replay(const std::function<void()>& body, std::uint64_t seed, const explore_options& options) {
  check_options(options, "tessera::testing::replay");
  decode(seed);
  simulator sim(options, !options.trace_file.empty());
  const run_report r = sim.run(body, seed, options.verbose);
  if (options.verbose) print_trace(sim.events(), seed);
  if (!options.trace_file.empty()) {
    std::ofstream out(options.trace_file);
    if (!out) {
      throw std::runtime_error("tessera::testing::replay: cannot write the trace to " +
                               options.trace_file);
    }
    sim.rt().write_trace(out);
  }
  if (r.failure != nullptr) std::rethrow_exception(r.failure);
}

}  // namespace tessera::testing
