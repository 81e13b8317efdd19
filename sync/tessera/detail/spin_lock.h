// tessera/detail/spin_lock.h — the primitives' spin lock: basic_spin_lock that
// yields through the park façade (the OS thread, or the fiber to its worker's
// next fiber), so a fiber spinning on a lock held by a fiber of the same worker
// lets the holder run.
#pragma once

#include "tessera/detail/basic_spin_lock.h"
#include "tessera/park.h"

namespace tessera::detail {

/// The primitives' lock: yields with yield_now() (the OS thread, or the fiber).
using spin_lock = basic_spin_lock<&yield_now>;

}  // namespace tessera::detail
