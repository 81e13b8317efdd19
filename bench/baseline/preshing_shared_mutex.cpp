// preshing_shared_mutex (see baseline/preshing_shared_mutex.h for the box office and the
// policy).
#include "baseline/preshing_shared_mutex.h"

#include <system_error>

namespace tessera {
namespace {
[[noreturn]] void too_many(const char* what) {
  throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                          std::string("tessera::preshing_shared_mutex::") + what +
                              ": more than 2^21-1 holders or waiters");
}
}  // namespace

preshing_shared_mutex::~preshing_shared_mutex() {
#if TESSERA_CHECKS
  if (status_.load() != 0)
    detail::misuse_abort("tessera::preshing_shared_mutex destroyed while locked");
#endif
}

void preshing_shared_mutex::lock_shared() {
  std::uint64_t s = status_.load(std::memory_order_relaxed);
  std::uint64_t next;
  do {
    const bool writer = get(s, kWriters) > 0;
    if (get(s, writer ? kWaitToRead : kReaders) == kMask) too_many("lock_shared");
    next = s + one(writer ? kWaitToRead : kReaders);
  } while (!status_.compare_exchange_weak(s, next, std::memory_order_acquire,
                                          std::memory_order_relaxed));
  if (get(s, kWriters) > 0) read_gate_.acquire();  // a writer will admit us
}

bool preshing_shared_mutex::try_lock_shared() noexcept {
  std::uint64_t s = status_.load(std::memory_order_relaxed);
  while (get(s, kWriters) == 0 && get(s, kReaders) < kMask) {
    if (status_.compare_exchange_weak(s, s + one(kReaders), std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

void preshing_shared_mutex::unlock_shared() {
  const std::uint64_t s = status_.fetch_sub(one(kReaders), std::memory_order_release);
#if TESSERA_CHECKS
  if (get(s, kReaders) == 0) {
    detail::misuse_abort(
        "tessera::preshing_shared_mutex::unlock_shared: the lock is not held shared");
  }
#endif
  // The last reader out hands the lock to the first waiting writer.
  if (get(s, kReaders) == 1 && get(s, kWriters) > 0) write_gate_.release();
}

void preshing_shared_mutex::lock() {
  std::uint64_t s = status_.load(std::memory_order_relaxed);
  do {
    if (get(s, kWriters) == kMask) too_many("lock");
  } while (!status_.compare_exchange_weak(s, s + one(kWriters), std::memory_order_acquire,
                                          std::memory_order_relaxed));
  if (get(s, kReaders) > 0 || get(s, kWriters) > 0) write_gate_.acquire();
}

bool preshing_shared_mutex::try_lock() noexcept {
  std::uint64_t expected = 0;
  return status_.compare_exchange_strong(expected, one(kWriters), std::memory_order_acquire,
                                         std::memory_order_relaxed);
}

void preshing_shared_mutex::unlock() {
  std::uint64_t s = status_.load(std::memory_order_relaxed);
  std::uint64_t next;
  std::uint64_t batch;
  do {
#if TESSERA_CHECKS
    if (get(s, kWriters) == 0)
      detail::misuse_abort("tessera::preshing_shared_mutex::unlock: the lock is not held");
#endif
    batch = get(s, kWaitToRead);
    next = s - one(kWriters);
    if (batch > 0) {  // admit every reader that queued behind us, as one batch
      next = (next & ~(kMask << kWaitToRead) & ~(kMask << kReaders)) | (batch << kReaders);
    }
  } while (!status_.compare_exchange_weak(s, next, std::memory_order_release,
                                          std::memory_order_relaxed));
  if (batch > 0) {
    read_gate_.release(static_cast<std::ptrdiff_t>(batch));
  } else if (get(s, kWriters) > 1) {
    write_gate_.release();  // the next writer
  }
}

}  // namespace tessera
