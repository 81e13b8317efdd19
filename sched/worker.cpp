// sched/worker.cpp — the worker loop and stealing: pick order, runnext, the
// inbox, the deques, stale-runnext steals, and where a woken fiber goes.
#include "pick.h"

#include <optional>
#include <thread>

#include "tessera/detail/tls_access.h"

namespace tessera::sched {

constinit thread_local worker* tls_worker = nullptr;

void set_current_worker(worker* w) noexcept {
  tls_worker = w;
}

// A fiber may migrate between workers across any park: the TLS read must
// happen afresh at every call (tessera/detail/tls_access.h).
TESSERA_TLS_ACCESSOR worker* current_worker() noexcept {
  return tls_worker;
}

// ---- worker --------------------------------------------------------------------
worker::worker(runtime_impl& r, unsigned i)
    : rt(r),
      index(i),
      counters(r.counters[i]),
      trace(r.traces.empty() ? nullptr : r.traces[i].get()),
      sightings_(r.opts.workers),
      steal_order_(r.topo.steal_order(i)) {
  fired_.reserve(16);
}

worker::~worker() {
  release_runners();
  rt.stacks.give_batch(stack_cache_);
  pool_records(record_cache_);
}

void worker::start() {
  thread_ = std::thread([this] { thread_main(); });
}

void worker::join() {
  if (thread_.joinable()) thread_.join();
}

void worker::thread_main() {
  native_.store(pthread_self(), std::memory_order_release);
  set_current_worker(this);
  thread_waiter_ = detail::thread_waiter();
  waiter_slot_ = &detail::current_waiter_slot();
  *waiter_slot_ = thread_waiter_;
  overflow_slot_ = &current_overflow_info();
  lang_ = thread_language_state::current();
  if (rt.opts.pin_workers) rt.topo.pin_current_thread(index);
  alt_signal_stack alt;
#if TESSERA_TSAN
  sched_rec_.san.tsan_fiber = __tsan_get_current_fiber();
#endif
  if (rt.sim != nullptr) {
    simulate();
    set_current_worker(nullptr);
    return;
  }
  for (;;) {
    fiber_record* f = find_work(false);
    if (f == nullptr) {
      if (rt.stopping.load(std::memory_order_acquire)) break;
      f = idle();
      if (f == nullptr) break;  // the runtime stops
    }
    switch_to(f, post_action::none);
  }
  set_current_worker(nullptr);
}

fiber_record* worker::find_work(bool look_at_runnext) {
  fiber_record* f = pick_local();
  if (f == nullptr) f = steal();
  if (f == nullptr && look_at_runnext) f = steal_stale_runnext();
  return f;
}

fiber_record* worker::drain_inbox() {
  fiber_record* list = inbox_.take_all();
  if (list == nullptr) return nullptr;
  fiber_record* first = list;
  for (fiber_record* f = first->link; f != nullptr;) {
    fiber_record* next = f->link;
    push_local(f);
    f = next;
  }
  return first;
}

void worker::tend_timers_and_io() {
  if (rt.next_deadline.load(std::memory_order_relaxed) != runtime_impl::kNoDeadline) {
    const std::uint64_t t = cpu_ticks();
    if (t - timers_checked_at_ >= kTimerCheckTicks) {
      timers_checked_at_ = t;
      rt.fire_timers(*this);
    }
  }
  if (rt.io.active()) {
    const std::uint64_t t = cpu_ticks();
    // Sends queued in the ring (completion backend) go out after at most
    // kIoSubmitTicks, with whatever else was queued meanwhile.
    const std::uint64_t every = rt.io.has_queued() ? kIoSubmitTicks : kIoPollTicks;
    if (t - io_polled_at_ >= every) {
      io_polled_at_ = t;
      if (!rt.io.poll_sleeper.load(std::memory_order_relaxed) &&
          !rt.io.polling.exchange(true, std::memory_order_acquire)) {
        note_io(rt.io.poll(std::chrono::nanoseconds(0)));
        rt.io.polling.store(false, std::memory_order_release);
      } else {
        rt.io.flush();  // another worker polls (maybe blocked): submit what we queued
      }
    }
  }
}

fiber_record* worker::pick_beyond_runnext(std::uint32_t tick) {
  if (tick % kOlderWorkPickInterval == 0) {
    if (fiber_record* f = rt.global.pop()) return f;
    if (fiber_record* f = drain_inbox()) return f;
    if (fiber_record* f = deque_.steal()) return f;  // our own oldest
    if (fiber_record* f = take_bound()) return f;
    if (rt.jobs_used() && has_job_work(false)) {
      if (fiber_record* r = acquire_runner()) return r;  // queued jobs (job_queue.cpp)
    }
  }
  if (runnext_streak_ < kRunnextLimit) {
    if (fiber_record* f = take_runnext()) {
      ++runnext_streak_;
      return f;
    }
  }
  runnext_streak_ = 0;
  if (fiber_record* f = deque_.take()) return f;
  if (fiber_record* f = take_bound()) return f;
  if (fiber_record* f = drain_inbox()) return f;
  if (fiber_record* f = rt.global.pop()) return f;
  if (fiber_record* f = take_runnext()) return f;
  if (rt.jobs_used() && has_job_work(false)) {
    return acquire_runner();  // no fiber waits: run queued jobs (job_queue.cpp)
  }
  return nullptr;
}

fiber_record* worker::steal() {
  for (unsigned v : steal_order_) {
    if (fiber_record* f = rt.workers[v]->deque_.steal()) {
      note_steal(f, v);
      return f;
    }
  }
  if (rt.jobs_used() && has_job_work(true)) {
    return acquire_runner();  // other workers' queued jobs: a runner steals them
  }
  return nullptr;
}

// A slot is stale when two looks at least kRunnextStale apart saw the same
// fiber in it and the same owner tick_: the owner has picked nothing since, so
// its current fiber woke this one and ran on instead of parking. (If the fiber
// left the slot and came back meanwhile, taking it is still just a steal.)
fiber_record* worker::steal_stale_runnext() {
  std::optional<steady::time_point> now;
  watching_ = false;
  for (unsigned v : steal_order_) {
    worker& victim = *rt.workers[v];
    runnext_sighting& seen = sightings_[v];
    fiber_record* f = victim.runnext_.load(std::memory_order_acquire);
    if (f == nullptr) {
      seen.fiber = nullptr;
      continue;
    }
    if (!now) now = steady::now();
    const std::uint32_t tick = victim.tick_.load(std::memory_order_relaxed);
    if (f != seen.fiber || tick != seen.tick) {
      seen = {f, tick, *now};
      watching_ = true;
      continue;
    }
    if (*now - seen.since < kRunnextStale) {
      watching_ = true;
      continue;
    }
    if (f->bound.load(std::memory_order_relaxed) == &victim) continue;  // its owner's alone
    seen.fiber = nullptr;
    if (victim.runnext_.compare_exchange_strong(f, nullptr, std::memory_order_acq_rel,
                                                std::memory_order_relaxed)) {
      note_steal(f, v);
      rt.runnext_steals.fetch_add(1, std::memory_order_relaxed);
      return f;
    }
  }
  return nullptr;
}

void worker::push_local(fiber_record* f) {
  if (worker* to = f->bound.load(std::memory_order_relaxed)) [[unlikely]] {
    push_bound(f, to);
    return;
  }
  if (!deque_.push(f)) rt.global.push(f);
  rt.notify_work();
}

void worker::push_bound(fiber_record* f, worker* to) {
  if (to != this) {
    to->push_inbox(f);  // drained by `to` into its bound queue (wakes it if asleep)
    return;
  }
  f->link = nullptr;
  if (bound_tail_ != nullptr) {
    bound_tail_->link = f;
  } else {
    bound_head_ = f;
  }
  bound_tail_ = f;
}

fiber_record* worker::take_bound() noexcept {
  fiber_record* f = bound_head_;
  if (f == nullptr) return nullptr;
  bound_head_ = f->link;
  if (bound_head_ == nullptr) bound_tail_ = nullptr;
  f->link = nullptr;
  return f;
}

void worker::make_runnext_contended(fiber_record* f) {
  // A full slot may be emptied by a thief at any moment.
  if (runnext_.load(std::memory_order_relaxed) == nullptr) {
    runnext_.store(f, std::memory_order_release);
  } else if (fiber_record* old = runnext_.exchange(f, std::memory_order_acq_rel)) {
    push_local(old);
  }
  if (wake_deep_at_runnext_) {  // idle() saw a deep sleeper as we turned busy
    wake_deep_at_runnext_ = false;
    rt.wake_deep_sleeper();
  }
}

void worker::push_inbox(fiber_record* f) {
  inbox_.push(f);
  rt.remote_wakeups.fetch_add(1, std::memory_order_relaxed);
  if (!wake_if_sleeping()) rt.notify_work();
}

void runtime_impl::schedule_woken_elsewhere(fiber_record* f, worker* cur) noexcept {
  if (cur != nullptr && &cur->rt == this) {  // our scheduler context, not a fiber
    if (cur->trace != nullptr) cur->trace->add(trace_kind::unpark, f->id, 0);
    cur->push_local(f);
    return;
  }
  // A remote waker is not a fiber of this runtime, so nothing stops the woken
  // fiber from finishing the run — and run_root() from destroying the workers —
  // while we are still inside push_inbox(). run_root() waits for this count to
  // drop to zero before it tears the workers down.
  remote_inflight.fetch_add(1, std::memory_order_seq_cst);
  worker* home = f->bound.load(std::memory_order_relaxed);
  if (home == nullptr) home = f->last_worker.load(std::memory_order_relaxed);
  if (home == nullptr) home = workers.front().get();
  home->push_inbox(f);
  remote_inflight.fetch_sub(1, std::memory_order_release);
}

}  // namespace tessera::sched
