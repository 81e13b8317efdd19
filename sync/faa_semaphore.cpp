// Koval & Elizarov's fetch-and-add semaphore (tessera/detail/faa_semaphore.h).
#include "tessera/detail/faa_semaphore.h"

#include <tessera/detail/barging_semaphore.h>
#include <tessera/detail/cpu.h>

#include <algorithm>

#include "semaphore_errors.h"

namespace tessera::detail {

faa_semaphore::faa_semaphore(std::ptrdiff_t desired, std::ptrdiff_t max)
    : permits_(static_cast<std::int64_t>(checked_initial(desired, max, max, ""))) {}

faa_semaphore::~faa_semaphore() {
#if TESSERA_CHECKS
  if (q_.parked() != 0) destroyed_with_waiters();
#endif
}

void faa_semaphore::release(std::ptrdiff_t update, std::ptrdiff_t max) {
  if (update < 0 || update > max) [[unlikely]]
    throw_bad_update(update, max);
  if (update == 0) return;
  // The check against max() is best effort under racing releases, as the
  // other cores' (contract: "a racing overshoot" is misuse).
  const std::int64_t before = permits_.load(std::memory_order_relaxed);
  if (before > 0 && before > max - update) [[unlikely]]
    throw_past_max(static_cast<std::uint64_t>(update), before, max, "");
  const std::int64_t p = permits_.fetch_add(update, std::memory_order_release);
  // Acquirers owed a permit: those the count shows below zero, up to `update`.
  std::int64_t owed = p < 0 ? std::min<std::int64_t>(update, -p) : 0;
  while (owed > 0) {
    if (q_.resume()) {
      --owed;
      continue;
    }
    // A cancelled cell: the permit went to paying back its acquirer's
    // decrement. Add one more; if nobody is owed now, it is a free permit.
    if (permits_.fetch_add(1, std::memory_order_release) >= 0) --owed;
  }
}

}  // namespace tessera::detail
