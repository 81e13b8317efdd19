// sched/pick.h — the inline fast paths of the pick order and of a local
// wake-up: what a park/unpark hand-off between two fibers of one worker runs.
// The rest of each (older work, the deques, the inbox, stealing, remote
// wake-ups, timers and I/O polls) stays out of line in worker.cpp.
#pragma once

#include "internal.h"

namespace tessera::sched {

/// The worker running on this thread, read directly: valid until the caller
/// switches away (current_worker() is the call that survives a migration).
extern constinit thread_local worker* tls_worker;

inline fiber_record* worker::take_runnext() noexcept {
  // A plain load first: an empty slot (only we fill it) costs no RMW; so does
  // a full one on a lone worker, which has no thieves.
  fiber_record* f = runnext_.load(std::memory_order_relaxed);
  if (f == nullptr) return nullptr;
  if (steal_order_.empty()) {
    runnext_.store(nullptr, std::memory_order_relaxed);
    return f;
  }
  return runnext_.exchange(nullptr, std::memory_order_acquire);  // a thief may beat us to it
}

inline fiber_record* worker::pick_local() {
  const std::uint32_t tick = tick_.load(std::memory_order_relaxed) + 1;
  tick_.store(tick, std::memory_order_relaxed);  // thieves read it: see steal_stale_runnext()
  if (rt.next_deadline.load(std::memory_order_relaxed) != runtime_impl::kNoDeadline ||
      rt.io.active()) {
    tend_timers_and_io();
  }
  if (tick % kOlderWorkPickInterval != 0 && runnext_streak_ < kRunnextLimit) {
    if (fiber_record* f = take_runnext()) {
      ++runnext_streak_;
      return f;
    }
  }
  return pick_beyond_runnext(tick);
}

inline fiber_record* worker::next_after(switch_point why) {
  if (rt.sim != nullptr) [[unlikely]] {
    sim_why_ = why;
    return nullptr;
  }
  return pick_local();
}

inline void worker::make_runnext(fiber_record* f) {
  // Only this worker fills the slot, so an empty slot stays empty until we
  // store: no RMW.
  if (runnext_.load(std::memory_order_relaxed) == nullptr && !wake_deep_at_runnext_) {
    runnext_.store(f, std::memory_order_release);
    return;
  }
  make_runnext_contended(f);
}

inline void runtime_impl::schedule_woken(fiber_record* f) noexcept {
  worker* cur = tls_worker;  // no switch in here: a direct read is fresh
  // A fiber locked to another worker goes there (schedule_woken_elsewhere).
  const worker* bound = f->bound.load(std::memory_order_relaxed);
  if (cur != nullptr && &cur->rt == this && cur->on_fiber() && (bound == nullptr || bound == cur)) {
    if (cur->trace != nullptr) [[unlikely]] {
      cur->trace->add(trace_kind::unpark, f->id, cur->current()->id);
    }
    cur->make_runnext(f);  // LIFO slot: runs when the waker parks
    if (sim != nullptr) [[unlikely]]
      cur->sim_switch_point(switch_point::unpark);
    return;
  }
  schedule_woken_elsewhere(f, cur);
}

}  // namespace tessera::sched
