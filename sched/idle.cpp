// sched/idle.cpp — the idle protocol: spin, announce, re-check, sleep on the
// futex (or poll the runnext slots), and the producers' side that wakes a sleeper.
#include "internal.h"

#include "tessera/detail/futex.h"

namespace tessera::sched {

fiber_record* worker::idle() {
  // Other workers' runnext slots are looked at every 32nd spin (every few µs:
  // the owner writes that line at every pick, so each look costs it a miss)
  // and at every wake-up from sleep.
  rt.busy.fetch_sub(1, std::memory_order_seq_cst);
  const auto idle_since = steady::now();
  fiber_record* f = nullptr;
  bool spin = true;
  while (f == nullptr && !rt.stopping.load(std::memory_order_acquire)) {
    // Once the runtime does I/O, the spin phase polls the poller instead
    // (non-blocking epoll_wait, no PAUSE loop): a PAUSE spin held a
    // one-connection echo at a seventh of the rate, and p99 at a fixed
    // request rate five times higher, on this VM; going straight to sleep
    // cost a fifth of the saturated request rate (a sleep and wake-up
    // between requests). A poll that is a system call backs off between
    // empty polls (kSpinPollFirstGap doubling to kSpinPollMaxGap): back-to-
    // back polls each found the one request that had just come, where one
    // later poll finds several (docs/benchmarks.md, "System calls per
    // request"). The completion backend's poll is free while the kernel has
    // nothing for it, so it polls at every turn.
    if (spin && rt.io.active()) {
      rt.spinners.fetch_add(1, std::memory_order_seq_cst);
      auto now = steady::now();
      const auto spin_until = now + rt.opts.io_idle_spin;
      const bool backoff = !rt.io.cheap_poll();
      auto next_poll = now;
      auto gap = kSpinPollFirstGap;
      for (unsigned i = 1;; ++i) {
        if (now >= next_poll && !rt.io.poll_sleeper.load(std::memory_order_relaxed) &&
            !rt.io.polling.exchange(true, std::memory_order_acquire)) {
          note_io(rt.io.poll(std::chrono::nanoseconds(0)));
          rt.io.polling.store(false, std::memory_order_release);
          if (backoff) {
            next_poll = now + gap;
            gap = std::min(gap * 2, kSpinPollMaxGap);
          }
        } else if (rt.io.has_queued()) {
          rt.io.flush();  // another worker polls: submit what our fibers queued
        }
        f = find_work((i & 31) == 0);
        if (f != nullptr || rt.stopping.load(std::memory_order_relaxed)) break;
        now = steady::now();
        if (now >= spin_until) break;
        if (backoff) cpu_relax();
      }
      rt.spinners.fetch_sub(1, std::memory_order_seq_cst);
      if (f != nullptr) break;
    } else if (spin) {
      // Spin phase: keep looking for `idle_spin`.
      rt.spinners.fetch_add(1, std::memory_order_seq_cst);
      const auto spin_until = steady::now() + rt.opts.idle_spin;
      for (unsigned i = 1;; ++i) {
        cpu_relax();
        f = find_work((i & 31) == 0);
        if (f != nullptr || rt.stopping.load(std::memory_order_relaxed)) break;
        if ((i & 15) == 0 && steady::now() >= spin_until) break;
      }
      rt.spinners.fetch_sub(1, std::memory_order_seq_cst);
      if (f != nullptr) break;
    }

    // Sleep phase: announce, re-check everything, then wait on the futex.
    // Once descriptors are registered, one sleeper at a time waits in the
    // poller instead of on its futex (set before sleep_word_: a waker that
    // sees our sleep_word_ sees how to wake us).
    const bool in_poller =
        rt.io.active() && !rt.io.poll_sleeper.exchange(true, std::memory_order_acquire);
    polling_.store(in_poller, std::memory_order_relaxed);
    sleep_word_.store(1, std::memory_order_seq_cst);
    rt.sleepers.fetch_add(1, std::memory_order_seq_cst);
    f = find_work(true);
    bool woken = true;
    if (f == nullptr && !rt.stopping.load(std::memory_order_seq_cst)) {
      // Deep (no poll) only while no worker is busy; see the idle protocol.
      deep_.store(true, std::memory_order_relaxed);
      rt.deep_sleepers.fetch_add(1, std::memory_order_seq_cst);
      const bool poll = rt.busy.load(std::memory_order_seq_cst) != 0;
      if (poll) {
        rt.deep_sleepers.fetch_sub(1, std::memory_order_relaxed);
        deep_.store(false, std::memory_order_relaxed);
      }
      worker_counters::add(counters.sleeps);
      if (trace != nullptr) trace->add(trace_kind::sleep_begin);
      const auto next = rt.next_deadline.load(std::memory_order_seq_cst);
      steady::time_point deadline{steady::duration(next)};
      bool timed = next != runtime_impl::kNoDeadline;
      if (poll) {
        const auto poll_at = steady::now() + (watching_ ? kRunnextStale : kRunnextPoll);
        if (!timed || poll_at < deadline) deadline = poll_at;
        timed = true;
      }
      if (in_poller) {
        std::chrono::nanoseconds wait{-1};  // for ever
        if (timed) wait = std::max(deadline - steady::now(), std::chrono::nanoseconds(0));
        // Hold the polling token from the check to the end of the wait: a
        // non-blocking poll of a spinner that started before we became the
        // poll sleeper could otherwise deliver (and so swallow) the wake-up
        // meant for us after our check, and we would sleep through it.
        while (rt.io.polling.exchange(true, std::memory_order_acquire)) cpu_relax();
        if (sleep_word_.load(std::memory_order_seq_cst) == 1) note_io(rt.io.poll(wait));
        rt.io.polling.store(false, std::memory_order_release);
      } else {
        rt.io.flush();  // queued SQEs must not wait for this worker's next poll
        futex_wait(&sleep_word_, std::uint32_t{1},
                   timed ? detail::deadline(deadline) : detail::deadline());
      }
      if (trace != nullptr) trace->add(trace_kind::sleep_end);
      if (!poll) {
        rt.deep_sleepers.fetch_sub(1, std::memory_order_relaxed);
        deep_.store(false, std::memory_order_relaxed);
      }
      // A waker cleared sleep_word_; after a timeout (or a spurious return)
      // look once more without spinning.
      woken = sleep_word_.load(std::memory_order_relaxed) == 0;
    }
    rt.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    sleep_word_.store(0, std::memory_order_relaxed);
    if (in_poller) {
      polling_.store(false, std::memory_order_relaxed);
      rt.io.poll_sleeper.store(false, std::memory_order_release);
    }
    spin = woken;
  }
  worker_counters::add(
      counters.idle_ns,
      static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now() - idle_since)
              .count()));
  if (f == nullptr) return nullptr;
  rt.busy.fetch_add(1, std::memory_order_seq_cst);
  // A deep sleeper is needed only to watch our runnext slot, so the wake-up
  // waits for the slot's first fill (make_runnext): woken to run one job or
  // fiber, we run it now instead of first paying a futex wake of the other.
  wake_deep_at_runnext_ = rt.deep_sleepers.load(std::memory_order_seq_cst) != 0;
  return f;
}

bool worker::wake_if_sleeping() noexcept {
  if (sleep_word_.load(std::memory_order_seq_cst) == 1 &&
      sleep_word_.exchange(0, std::memory_order_seq_cst) == 1) {
    if (polling_.load(std::memory_order_relaxed)) {
      rt.io.wake();  // it sleeps in the poller
    } else {
      futex_wake(&sleep_word_, 1);
    }
    return true;
  }
  return false;
}

void runtime_impl::notify_work() noexcept {
  if (workers.size() < 2) return;
  if (fenced_load(sleepers) == 0) return;
  if (spinners.load(std::memory_order_relaxed) != 0) return;  // a spinner will find it
  wake_one_sleeper();
}

void runtime_impl::wake_one_sleeper() noexcept {
  for (auto& w : workers) {
    if (w->wake_if_sleeping()) return;
  }
}

void runtime_impl::wake_deep_sleeper() noexcept {
  for (auto& w : workers) {
    if (w->deep_.load(std::memory_order_acquire) && w->wake_if_sleeping()) return;
  }
}

}  // namespace tessera::sched
