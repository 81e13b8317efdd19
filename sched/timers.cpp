// sched/timers.cpp — timers: one heap per runtime under a mutex, the earliest
// deadline in an atomic; any worker fires due entries; stale entries (waits
// that ended early) are dropped in bulk.
#include "internal.h"

#include <algorithm>
#include <mutex>

namespace tessera::sched {

void worker::push_fired(std::vector<fiber_record*>& fired) {
  // The deque is LIFO: push the latest deadline first so the earliest runs first.
  for (auto it = fired.rbegin(); it != fired.rend(); ++it) push_local(*it);
  fired.clear();
}

void runtime_impl::add_timer(steady::time_point deadline, fiber_record* f) {
  const auto ticks = deadline.time_since_epoch().count();
  bool earliest = false;
  {
    std::lock_guard lock(timer_mu);
    drop_stale_timers();
    timers.push_back({deadline, f, f->timer_seq.load(std::memory_order_relaxed)});
    std::push_heap(timers.begin(), timers.end(), worker::later);
    if (ticks < next_deadline.load(std::memory_order_relaxed)) {
      next_deadline.store(ticks, std::memory_order_seq_cst);
      earliest = true;
    }
    timer_entries.store(timers.size(), std::memory_order_relaxed);
  }
  // A sleeping worker set its futex timeout from the old earliest deadline:
  // wake one so that it re-arms (the worker adding the timer may stay busy).
  if (earliest && fenced_load(sleepers) != 0) wake_one_sleeper();
}

void runtime_impl::fire_timers(worker& w) {
  const auto now = steady::now();
  if (now.time_since_epoch().count() < next_deadline.load(std::memory_order_relaxed)) return;
  std::unique_lock lock(timer_mu, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another worker is firing them
  auto& fired = w.fired_;
  while (!timers.empty() && timers.front().deadline <= now) {
    std::pop_heap(timers.begin(), timers.end(), worker::later);
    const timer_entry e = timers.back();
    timers.pop_back();
    if (e.fiber->timer_seq.load(std::memory_order_acquire) != e.seq) continue;  // stale
    // kParkedTimed: wake it. kEmpty with a current sequence: the fiber added
    // this timer and is still switching out (another worker fires timers too):
    // mark it, and its post-switch CAS to kParkedTimed fails and re-queues it.
    // (A current entry means the fiber is inside park_until(), so never kParked.)
    std::int32_t s = e.fiber->w.state.load(std::memory_order_acquire);
    while (s == kParkedTimed || s == kEmpty) {
      if (e.fiber->w.state.compare_exchange_weak(s, kTimerFired, std::memory_order_acq_rel,
                                                 std::memory_order_acquire)) {
        if (s == kParkedTimed) fired.push_back(e.fiber);
        break;
      }
    }
  }
  drop_stale_timers();
  publish_timers();
  lock.unlock();
  w.push_fired(fired);
}

void runtime_impl::drop_stale_timers() {
  // Entries of waits that ended early linger until their deadline. Sweeping
  // only when firing let a far deadline (a server's idle timeout of minutes,
  // re-armed at every read) grow the heap by every read until it came due.
  const std::size_t stale = stale_timers.load(std::memory_order_relaxed);
  if (stale <= 64 || stale * 2 <= timers.size()) return;
  std::erase_if(timers, [](const timer_entry& e) {
    return e.fiber->timer_seq.load(std::memory_order_relaxed) != e.seq;
  });
  std::make_heap(timers.begin(), timers.end(), worker::later);
  stale_timers.fetch_sub(stale, std::memory_order_relaxed);  // keep counts added meanwhile
  publish_timers();
}

void runtime_impl::publish_timers() noexcept {
  timer_entries.store(timers.size(), std::memory_order_relaxed);
  next_deadline.store(
      timers.empty() ? kNoDeadline : timers.front().deadline.time_since_epoch().count(),
      std::memory_order_seq_cst);
}

}  // namespace tessera::sched
