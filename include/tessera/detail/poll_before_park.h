// tessera/detail/poll_before_park.h — an OS thread's short poll before it
// parks, for waits whose counterpart usually comes within microseconds
// (channels, select, the hand-off semaphore).
#pragma once

#include "tessera/detail/cpu.h"  // cpu_relax, relax_steps_for
#include "tessera/park.h"        // should_spin

namespace tessera::detail {

/// How long an OS thread polls before it parks in a channel operation, a
/// select or a hand-off semaphore's acquire: about the cost of the futex
/// wake-up and sleep it saves (docs/benchmarks.md, "Constants").
inline constexpr unsigned kThreadPollNanos = 5000;

/// Polls `done()` for about `ns` nanoseconds (calibrated cpu_relax() steps);
/// returns whether it came true. For a caller already known to be an OS
/// thread; others call poll_before_park().
template <class Done>
bool poll_for(Done&& done, unsigned ns) {
  const unsigned steps = relax_steps_for(ns);
  for (unsigned i = 0; i < steps; ++i) {
    if (done()) return true;
    cpu_relax();
  }
  return done();
}

/// For a caller about to park until `done()`: an OS thread first polls it for
/// about `ns` (kThreadPollNanos unless told), so that a counterpart coming
/// meanwhile costs no futex wake-up and sleep; a fiber does not poll (its park
/// is a user-space switch). Returns whether `done()` came true. A counterpart
/// that then unparks the caller leaves a permit for a later park(), which is
/// harmless: every wait loop re-checks its condition.
template <class Done>
bool poll_before_park(Done&& done, unsigned ns = kThreadPollNanos) {
  return should_spin() && poll_for(done, ns);
}

}  // namespace tessera::detail
