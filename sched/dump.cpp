// sched/dump.cpp — runtime_impl::dump: every fiber of a runtime, what it
// waits for and for how long, in the style of Go's goroutine dump. It reads
// the records other threads own as a snapshot (atomics, relaxed), so it may
// run at any time, from any thread, and costs the scheduler nothing.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <iterator>
#include <map>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "internal.h"
#include "stack_trace.h"

namespace tessera::sched {
namespace {

constexpr std::int32_t kParkedState = -1;       // waiter::state of a fiber in park()
constexpr std::int32_t kParkedTimedState = -2;  // ... in park_until()

std::string describe(const seen_fiber& f) {
  char text[160];
  if (f.running_on >= 0) {
    std::snprintf(text, sizeof text, "running on worker %d", f.running_on);
    return text;
  }
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

// A join names the fiber it waits for (its detail): that one is the holder.
bool is_join(const seen_fiber& f) noexcept {
  return f.kind != nullptr && std::string_view(f.kind) == "join of fiber";
}

// The stacks of the runtime's fibers, sorted by address, to tell whose stack
// a holder_mark (an address its holder noted) is in.
struct fiber_stack {
  std::uintptr_t bottom, top;
  std::uint64_t id;
};

// The fiber (or thread) that holds what `f` waits for, where that is known:
// the fiber a join names, or whoever's stack the primitive's holder_mark is
// in (a fiber's, else an OS thread's).
void find_holder(const fiber_record* f, const std::vector<fiber_stack>& stacks, seen_fiber& out) {
  if (out.kind == nullptr) return;
  if (is_join(out) && out.detail > 0) {
    out.holder = static_cast<std::uint64_t>(out.detail);
    return;
  }
  const tessera::detail::holder_mark* mark = f->w.wait.holder.load(std::memory_order_relaxed);
  if (mark == nullptr) return;
  const std::uintptr_t where = mark->load();
  if (where == 0) return;
  // The last stack that starts at or below `where` (stacks do not overlap).
  const auto above =
      std::upper_bound(stacks.begin(), stacks.end(), where,
                       [](std::uintptr_t a, const fiber_stack& s) { return a < s.bottom; });
  if (above != stacks.begin() && where < std::prev(above)->top) {
    // A shared_mutex writer waiting for readers to leave holds it itself:
    // then the holders are readers, which the lock does not name.
    if (std::prev(above)->id != out.id) out.holder = std::prev(above)->id;
    return;
  }
  out.held_by_thread = true;
}

}  // namespace

std::vector<seen_fiber> runtime_impl::snapshot(bool backtraces) const {
  const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  std::vector<seen_fiber> fibers;
  const std::vector<fiber_record*> records = all_records();
  std::vector<fiber_stack> fiber_stacks;
  for (fiber_record* f : records) {
    if (f->listed_in.load(std::memory_order_acquire) != this) continue;
    const stack_mem stack = f->stack_snapshot();
    if (stack.map == nullptr) continue;
    fiber_stacks.push_back({reinterpret_cast<std::uintptr_t>(stack.bottom()),
                            reinterpret_cast<std::uintptr_t>(stack.top()),
                            f->listed_id.load(std::memory_order_relaxed)});
  }
  std::sort(fiber_stacks.begin(), fiber_stacks.end(),
            [](const fiber_stack& a, const fiber_stack& b) { return a.bottom < b.bottom; });
  for (fiber_record* f : records) {
    if (f->listed_in.load(std::memory_order_acquire) != this) continue;
    const std::int32_t state = f->w.state.load(std::memory_order_relaxed);
    const char* kind = f->w.wait.kind.load(std::memory_order_relaxed);
    // The first look at a wait stamps it (wait_info::since).
    const std::int64_t since =
        kind != nullptr ? f->w.wait.seen_since() : f->w.wait.since.load(std::memory_order_relaxed);
    // The stamp loaded once: converted, it is the wait the record showed.
    const std::int64_t since_ns = since != 0 ? tessera::detail::tick_clock::stamp_to_ns(since) : 0;
    fibers.push_back({f,
                      f->listed_id.load(std::memory_order_relaxed),
                      f->listed_runner.load(std::memory_order_relaxed),
                      state == kParkedState || state == kParkedTimedState,
                      kind,
                      f->w.wait.object.load(std::memory_order_relaxed),
                      f->w.wait.detail.load(std::memory_order_relaxed),
                      since,
                      f->parks.load(std::memory_order_relaxed),
                      kind != nullptr && since_ns > 0
                          ? static_cast<double>(std::max<std::int64_t>(now_ns - since_ns, 0)) * 1e-9
                          : 0.0,
                      f->get_name(),
                      f->created_at.load(std::memory_order_relaxed),
                      0,
                      false,
                      {}});
    seen_fiber& seen = fibers.back();
    find_holder(f, fiber_stacks, seen);
    if (backtraces && seen.parked) {
      const stack_mem stack = f->stack_snapshot();
      seen.stack = backtrace_of(f->context_snapshot(), stack.bottom(), stack.top());
    }
  }
  return fibers;
}

void runtime_impl::stamp_waits() const {
  for (fiber_record* f : all_records()) {
    if (f->listed_in.load(std::memory_order_acquire) != this) continue;
    if (f->w.wait.kind.load(std::memory_order_relaxed) != nullptr) (void)f->w.wait.seen_since();
  }
}

void write_fibers(std::ostream& os, const std::vector<seen_fiber>& fibers) {
  // Identical waits (the same state, primitive and object) print once with
  // their count, as Go's dump groups identical stacks: ten thousand fibers on
  // one latch make one line.
  using key_t = std::tuple<bool, std::string, std::uintptr_t, std::vector<std::uintptr_t>>;
  std::map<key_t, std::vector<const seen_fiber*>> groups;
  std::vector<key_t> order;
  for (const auto& f : fibers) {
    auto key = std::make_tuple(f.runner, describe(f), f.created_at, f.stack);
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
    const seen_fiber& first = *g.front();
    if (first.holder != 0 && !is_join(first)) {
      how += ", held by fiber " + std::to_string(first.holder);
    } else if (first.held_by_thread) {
      how += ", held by a thread";
    }
    if (g.size() == 1) {
      os << what << ' ' << first.id;
      if (!first.name.empty()) os << " \"" << first.name << '"';
      os << " [" << how << "]";
    } else {
      os << g.size() << ' ' << what << "s [" << how << "]";
    }
    if (first.created_at != 0) os << " created at " << describe_call_site(first.created_at);
    if (g.size() > 1) {
      os << ':';
      std::size_t shown = 0;
      for (const seen_fiber* f : g) {
        if (shown++ == 16) {
          os << " ...";
          break;
        }
        os << ' ' << f->id;
      }
    }
    os << '\n';
    write_backtrace(os, first.stack);
  }
}

std::size_t write_wait_cycles(std::ostream& os, const std::vector<seen_fiber>& fibers) {
  std::map<std::uint64_t, const seen_fiber*> by_id;
  for (const auto& f : fibers) by_id[f.id] = &f;
  auto next = [&](const seen_fiber* f) -> const seen_fiber* {
    if (!f->parked || f->holder == 0) return nullptr;
    const auto it = by_id.find(f->holder);
    return it == by_id.end() ? nullptr : it->second;
  };
  std::map<std::uint64_t, int> state;  // 1: on the walk in progress, 2: done
  std::size_t cycles = 0;
  for (const auto& start : fibers) {
    std::vector<const seen_fiber*> path;
    const seen_fiber* f = &start;
    while (f != nullptr && state[f->id] == 0) {
      state[f->id] = 1;
      path.push_back(f);
      f = next(f);
    }
    if (f != nullptr && state[f->id] == 1) {
      // f closes a cycle: print it from f round to f.
      ++cycles;
      os << "tessera: the waits form a cycle:\n";
      auto it = std::find(path.begin(), path.end(), f);
      for (; it != path.end(); ++it) {
        const seen_fiber& w = **it;
        os << "  fiber " << w.id;
        if (!w.name.empty()) os << " \"" << w.name << '"';
        os << " waits for " << describe(w);
        if (!is_join(w)) os << " held by fiber " << w.holder;
        os << '\n';
      }
    }
    for (const seen_fiber* p : path) state[p->id] = 2;
  }
  return cycles;
}

void runtime_impl::dump(std::ostream& os) const {
  std::vector<seen_fiber> fibers = snapshot(true);
  std::size_t runners = 0;
  for (const auto& f : fibers) runners += f.runner ? 1 : 0;
  std::lock_guard lock(workers_mu);
  for (auto& f : fibers) {
    for (const auto& w : workers) {
      if (w->running() == f.rec) f.running_on = static_cast<int>(w->index);
    }
  }
  os << "tessera: runtime dump: " << workers.size()
     << (workers.size() == 1 ? " worker, " : " workers, ") << fibers.size() - runners
     << (fibers.size() - runners == 1 ? " fiber" : " fibers");
  if (runners != 0) os << " and " << runners << " job runner" << (runners == 1 ? "" : "s");
  os << "\n";
  constexpr auto r = std::memory_order_relaxed;
  for (const auto& w : workers) {
    os << "worker " << w->index << " [";
    if (w->asleep()) {
      os << (w->polling_.load(r) ? "sleeping in the poller" : "sleeping");
    } else if (const fiber_record* f = w->running(); f != nullptr) {
      os << "running " << (f->listed_runner.load(r) ? "job runner " : "fiber ")
         << f->listed_id.load(r);
    } else {
      os << "looking for work";
    }
    std::size_t jobs = 0;
    for (const auto& q : w->jobs_) jobs += q.size_hint();
    const worker_counters& c = w->counters;
    os << "] queued: " << w->deque_.size_hint() << " fibers"
       << (w->runnext_.load(r) != nullptr ? " + runnext" : "") << ", " << jobs
       << " jobs; since start: " << c.runs() << " runs, " << c.parks.load(r) << " parks, "
       << c.steals.load(r) << " steals, " << c.sleeps.load(r) << " sleeps, " << c.io_events.load(r)
       << " I/O events\n";
  }
  std::size_t global_jobs_queued = 0;
  for (const auto& q : global_jobs) global_jobs_queued += q.size_hint();
  os << "global queue: " << global.size_hint() << " fibers, " << global_jobs_queued << " jobs\n";
  write_fibers(os, fibers);
}

}  // namespace tessera::sched
