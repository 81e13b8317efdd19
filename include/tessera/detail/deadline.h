// tessera/detail/deadline.h — when a wait gives up: a point on
// std::chrono::steady_clock, or none (wait for ever). Base layer: includes
// nothing of Tessera's.
//
// Every timed wait in Tessera, down to the futex and the poller, takes one of
// these. The public `*_for` / `*_until` functions convert once, at the call:
// `deadline::after(d)` rounds a duration up to the clock's tick (a wait never
// ends early), `deadline::at(t)` carries a time point of another clock over
// to steady_clock by the distance between their two `now()`s. "Now" is
// steady_now(): the virtual clock on a simulation's worker.
#pragma once

#include <chrono>
#include <type_traits>

#include "tessera/detail/simulation_hooks.h"

namespace tessera::detail {

class deadline {
 public:
  using clock = std::chrono::steady_clock;

  /// No deadline: wait for ever.
  constexpr deadline() noexcept = default;
  /// Give up at `t`.
  constexpr deadline(clock::time_point t) noexcept : when_(t), set_(true) {}  // NOLINT: implicit

  /// `t` on any clock (steady_clock's time points are taken as they are).
  template <class Clock, class Duration>
  static deadline at(const std::chrono::time_point<Clock, Duration>& t) {
    if constexpr (std::is_same_v<Clock, clock>) {
      return deadline(std::chrono::ceil<clock::duration>(t));
    } else {
      return deadline(steady_now() + std::chrono::ceil<clock::duration>(t - Clock::now()));
    }
  }
  /// `d` from now, rounded up to the clock's tick.
  template <class Rep, class Period>
  static deadline after(const std::chrono::duration<Rep, Period>& d) {
    return deadline(steady_now() + std::chrono::ceil<clock::duration>(d));
  }

  /// Whether there is a deadline at all.
  constexpr bool has_value() const noexcept { return set_; }
  constexpr explicit operator bool() const noexcept { return set_; }
  /// The time point. Precondition: has_value().
  constexpr clock::time_point operator*() const noexcept { return when_; }
  /// The time point, or clock::time_point::max() when there is none.
  constexpr clock::time_point value_or_max() const noexcept {
    return set_ ? when_ : clock::time_point::max();
  }
  /// Whether the deadline has passed at `now` (never, without one).
  constexpr bool passed(clock::time_point now) const noexcept { return set_ && now >= when_; }
  bool passed() const { return set_ && steady_now() >= when_; }
  /// The earlier of this deadline and `t`.
  constexpr deadline earlier(clock::time_point t) const noexcept {
    return set_ && when_ < t ? *this : deadline(t);
  }

 private:
  clock::time_point when_{};
  bool set_ = false;
};

}  // namespace tessera::detail
