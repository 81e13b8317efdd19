// tessera/event.h — auto_reset_event and manual_reset_event (Preshing, "Semaphores are Surprisingly
// Versatile": box office / bouncer).
//
// auto_reset_event — box office: `status_` (int); bouncer: a TWA semaphore.
//
//   status   meaning                      signal()                wait()
//   1        signalled, nobody waiting    stays 1 (collapses)     -> 0, returns at once
//   0        not signalled, no waiters    -> 1                    -> -1, waits on the semaphore
//   -n       n callers waiting            -> -n+1, releases one   -> -n-1, waits
//
// One signal lets exactly one wait() through; redundant signals while signalled
// collapse into one. Admission among waiters is FIFO (the semaphore's tickets).
//
// manual_reset_event — box office: `state_` (0 reset, 1 set); bouncer: the wait
// chains (atomic_wait / atomic_notify_all). set() lets every waiter through and
// stays set until reset().
//
// Contract for both: any fiber or OS thread may call anything, mixed. signal()/
// set() synchronize-with the wait that they release (release/acquire).
// wait_for takes any std::chrono duration and never times out early; a timed-out
// auto_reset_event waiter withdraws without losing a signal (if a signal chose it
// as it timed out, it takes that signal and returns true, a little late, unless
// a caller arriving meanwhile took it: then it returns false). Spurious
// wake-ups: none.
#pragma once

#include <atomic>
#include <chrono>

#include "tessera/atomic_wait.h"
#include "tessera/detail/deadline.h"
#include "tessera/semaphore.h"

namespace tessera {

class auto_reset_event {
 public:
  /// `signalled`: start in the signalled state.
  constexpr explicit auto_reset_event(bool signalled = false) noexcept
      : status_(signalled ? 1 : 0) {}
  auto_reset_event(const auto_reset_event&) = delete;
  auto_reset_event& operator=(const auto_reset_event&) = delete;

  /// Lets one waiter (present or future) through.
  void signal() {
    detail::simulation_point();
    int s = status_.load(std::memory_order_relaxed);
    for (;;) {
      const int next = s < 1 ? s + 1 : 1;
      if (status_.compare_exchange_weak(s, next, std::memory_order_release,
                                        std::memory_order_relaxed)) {
        break;
      }
    }
    if (s < 0) gate_.release();  // a waiter was queued: admit it
  }
  void wait() {
    detail::simulation_point();
    if (status_.fetch_sub(1, std::memory_order_acquire) < 1) {
      const wait_scope scope("auto_reset_event", this);
      gate_.acquire();
    }
  }
  /// Takes the signal if it is set; never waits.
  bool try_wait() noexcept {
    int s = status_.load(std::memory_order_relaxed);
    while (s == 1) {
      if (status_.compare_exchange_weak(s, 0, std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }
  template <class Rep, class Period>
  bool wait_for(const std::chrono::duration<Rep, Period>& d) {
    detail::simulation_point();
    if (status_.fetch_sub(1, std::memory_order_acquire) >= 1) return true;
    const wait_scope scope("auto_reset_event", this);
    if (gate_.try_acquire_for(d)) return true;
    return withdraw_or_take();
  }

 private:
  // After a timed-out gate wait: withdraw our -1 while it is still counted.
  // If a signal counted us in instead, its permit is in the gate or on its
  // way, but a caller arriving meanwhile may take it; that caller's -1 then
  // stands for us in `status_`, and the next look withdraws it. So never an
  // untimed wait here: it could outlive every signal. The 100 µs gate waits
  // return at once when the permit comes (tests/model/auto_reset_event.pml).
  bool withdraw_or_take() {
    for (;;) {
      int s = status_.load(std::memory_order_relaxed);
      while (s < 0) {
        if (status_.compare_exchange_weak(s, s + 1, std::memory_order_relaxed)) return false;
      }
      if (gate_.try_acquire_for(std::chrono::microseconds(100))) return true;
    }
  }

  std::atomic<int> status_;
  counting_semaphore<> gate_{0};
};

class manual_reset_event {
 public:
  constexpr explicit manual_reset_event(bool set = false) noexcept : state_(set ? 1u : 0u) {}
  manual_reset_event(const manual_reset_event&) = delete;
  manual_reset_event& operator=(const manual_reset_event&) = delete;

  /// Lets every waiter through, now and until reset().
  void set() noexcept {
    detail::simulation_point();
    state_.store(1, std::memory_order_release);
    atomic_notify_all(&state_);
  }
  void reset() noexcept { state_.store(0, std::memory_order_relaxed); }
  bool is_set() const noexcept { return state_.load(std::memory_order_acquire) == 1; }
  void wait() const {
    if (state_.load(std::memory_order_acquire) != 0) return;
    const wait_scope scope("manual_reset_event", this);
    while (state_.load(std::memory_order_acquire) == 0) atomic_wait(&state_, 0u);
  }
  template <class Rep, class Period>
  bool wait_for(const std::chrono::duration<Rep, Period>& d) const {
    if (state_.load(std::memory_order_acquire) != 0) return true;
    const auto deadline = *detail::deadline::after(d);
    const wait_scope scope("manual_reset_event", this);
    while (state_.load(std::memory_order_acquire) == 0) {
      if (!atomic_wait_until(&state_, 0u, deadline)) return is_set();
    }
    return true;
  }

 private:
  std::atomic<std::uint32_t> state_;
};

}  // namespace tessera
