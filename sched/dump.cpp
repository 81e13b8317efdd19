// sched/dump.cpp — runtime_impl::dump: every fiber of a runtime, what it
// waits for and for how long, in the style of Go's goroutine dump. It reads
// the records other threads own as a snapshot (atomics, relaxed), so it may
// run at any time, from any thread, and costs the scheduler nothing.
#include <cinttypes>
#include <cstdio>
#include <map>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "internal.h"

namespace tessera::sched {
namespace {

constexpr std::int32_t kParkedState = -1;       // waiter::state of a fiber in park()
constexpr std::int32_t kParkedTimedState = -2;  // ... in park_until()

std::string describe(const seen_fiber& f) {
  char text[160];
  if (f.kind == nullptr) {
    return f.parked ? "parked" : "runnable";
  }
  const char* verb = f.parked ? "" : "waking from ";
  if (f.detail >= 0 && std::string_view(f.kind).rfind("socket", 0) == 0) {
    std::snprintf(text, sizeof text, "%s%s fd %" PRId64, verb, f.kind, f.detail);
  } else if (f.detail >= 0) {
    std::snprintf(text, sizeof text, "%s%s %" PRId64, verb, f.kind, f.detail);
  } else if (f.object != nullptr) {
    std::snprintf(text, sizeof text, "%s%s %p", verb, f.kind, f.object);
  } else {
    std::snprintf(text, sizeof text, "%s%s", verb, f.kind);
  }
  return text;
}

std::string duration(double s) {
  char text[32];
  if (s < 1e-3) {
    std::snprintf(text, sizeof text, "%.0f us", s * 1e6);
  } else if (s < 1) {
    std::snprintf(text, sizeof text, "%.0f ms", s * 1e3);
  } else {
    std::snprintf(text, sizeof text, "%.1f s", s);
  }
  return text;
}

}  // namespace

std::vector<seen_fiber> runtime_impl::snapshot() const {
  const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  std::vector<seen_fiber> fibers;
  for (fiber_record* f : all_records()) {
    if (f->listed_in.load(std::memory_order_acquire) != this) continue;
    const std::int32_t state = f->w.state.load(std::memory_order_relaxed);
    const char* kind = f->w.wait.kind.load(std::memory_order_relaxed);
    const std::int64_t since = f->w.wait.since_ns.load(std::memory_order_relaxed);
    fibers.push_back(
        {f->listed_id.load(std::memory_order_relaxed),
         f->listed_runner.load(std::memory_order_relaxed),
         state == kParkedState || state == kParkedTimedState, kind,
         f->w.wait.object.load(std::memory_order_relaxed),
         f->w.wait.detail.load(std::memory_order_relaxed), since,
         f->parks.load(std::memory_order_relaxed),
         kind != nullptr && since > 0 ? static_cast<double>(now_ns - since) * 1e-9 : 0.0});
  }
  return fibers;
}

void write_fibers(std::ostream& os, const std::vector<seen_fiber>& fibers) {
  // Identical waits (the same state, primitive and object) print once with
  // their count, as Go's dump groups identical stacks: ten thousand fibers on
  // one latch make one line.
  std::map<std::tuple<bool, std::string>, std::vector<const seen_fiber*>> groups;
  std::vector<std::tuple<bool, std::string>> order;
  for (const auto& f : fibers) {
    auto key = std::make_tuple(f.runner, describe(f));
    auto& g = groups[key];
    if (g.empty()) order.push_back(key);
    g.push_back(&f);
  }
  for (const auto& key : order) {
    const auto& g = groups[key];
    double shortest = g.front()->seconds, longest = shortest;
    for (const seen_fiber* f : g) {
      shortest = std::min(shortest, f->seconds);
      longest = std::max(longest, f->seconds);
    }
    const char* what = std::get<0>(key) ? "job runner" : "fiber";
    std::string how = std::get<1>(key);
    if (g.front()->kind != nullptr) {
      const std::string lo = duration(shortest), hi = duration(longest);
      how += ", " + (lo == hi ? hi : lo + " to " + hi);
    }
    if (g.size() == 1) {
      os << what << ' ' << g.front()->id << " [" << how << "]\n";
      continue;
    }
    os << g.size() << ' ' << what << "s [" << how << "]:";
    std::size_t shown = 0;
    for (const seen_fiber* f : g) {
      if (shown++ == 16) {
        os << " ...";
        break;
      }
      os << ' ' << f->id;
    }
    os << '\n';
  }
}

void runtime_impl::dump(std::ostream& os) const {
  const std::vector<seen_fiber> fibers = snapshot();
  std::size_t runners = 0;
  for (const auto& f : fibers) runners += f.runner ? 1 : 0;
  std::lock_guard lock(workers_mu);
  os << "tessera: runtime dump: " << workers.size()
     << (workers.size() == 1 ? " worker, " : " workers, ") << fibers.size() - runners
     << (fibers.size() - runners == 1 ? " fiber" : " fibers");
  if (runners != 0) os << " and " << runners << " job runner" << (runners == 1 ? "" : "s");
  os << "\n";
  for (const auto& w : workers) {
    os << "worker " << w->index << " [" << (w->asleep() ? "sleeping" : "busy") << "]\n";
  }
  write_fibers(os, fibers);
}

}  // namespace tessera::sched
