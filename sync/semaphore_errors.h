// sync/semaphore_errors.h — the errors both counting_semaphore cores report,
// word for word (private to sync/: defined in semaphore.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tessera/detail/barging_semaphore.h"
#include "tessera/detail/cpu.h"

namespace tessera::detail {

// throw_bad_initial: tessera/detail/barging_semaphore.h (the constructors use it).
#if TESSERA_CHECKS
/// Aborts: the semaphore was destroyed while threads or fibers waited on it.
[[noreturn]] void destroyed_with_waiters() noexcept;
#endif
/// Throws std::invalid_argument: release(update) with update outside [0, max()].
[[noreturn]] void throw_bad_update(std::ptrdiff_t update, std::ptrdiff_t max);
/// Throws std::invalid_argument: releasing `n` with `count` would exceed max().
[[noreturn]] void throw_past_max(std::uint64_t n, std::int64_t count, std::ptrdiff_t max,
                                 const char* why);

}  // namespace tessera::detail
