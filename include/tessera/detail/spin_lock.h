// tessera/detail/spin_lock.h — the primitives' spin lock: basic_spin_lock that
// yields through the park façade (the OS thread, or the fiber to its worker's
// next fiber), so a fiber spinning on a lock held by a fiber of the same worker
// lets the holder run, and that backs off longer between polls on a fiber.
#pragma once

#include "tessera/detail/basic_spin_lock.h"
#include "tessera/park.h"

namespace tessera::detail {

/// A contended primitive's lock waits as its caller is: an OS thread polls
/// tightly, a fiber backs off (batching_backoff: its worker's other fibers
/// then run their operations on the lock's line while it is hot).
inline spin_backoff caller_backoff() noexcept {
  return should_spin() ? tight_backoff() : batching_backoff();
}

/// The primitives' lock: yields with yield_now() (the OS thread, or the fiber).
using spin_lock = basic_spin_lock<&yield_now, &caller_backoff>;

}  // namespace tessera::detail
