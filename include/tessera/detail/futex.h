// tessera/detail/futex.h — the one futex wrapper (Linux), for the park façade's
// thread path and the scheduler's idle workers. Base layer: includes only
// base/. Private futexes only: a word is never shared across processes.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <type_traits>

#include "tessera/detail/deadline.h"

namespace tessera::detail {

/// How a futex_wait returned.
enum class futex_status : std::uint8_t {
  woken,      ///< a wake, a signal (EINTR) or a spurious return: re-check the word
  mismatch,   ///< the word did not hold `expected` when the kernel looked
  timed_out,  ///< the deadline passed
};

/// Sleeps while `word` holds `expected`, until futex_wake on it, a signal, or
/// `deadline` (absolute std::chrono::steady_clock time, which is CLOCK_MONOTONIC
/// on Linux; none: no limit). Every caller re-checks its own condition afterwards.
template <class T>
futex_status futex_wait(std::atomic<T>* word, T expected, deadline deadline) noexcept {
  static_assert(sizeof(std::atomic<T>) == 4 && std::is_integral_v<T>, "futex words are 32 bits");
  timespec ts{};
  if (deadline.has_value()) {
    const auto since = (*deadline).time_since_epoch();
    if (since.count() > 0) {
      const auto secs = std::chrono::duration_cast<std::chrono::seconds>(since);
      ts.tv_sec = static_cast<time_t>(secs.count());
      ts.tv_nsec = static_cast<long>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(since - secs).count());
    }
  }
  const long r =
      ::syscall(SYS_futex, reinterpret_cast<T*>(word), FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG,
                static_cast<std::uint32_t>(expected), deadline.has_value() ? &ts : nullptr, nullptr,
                FUTEX_BITSET_MATCH_ANY);
  if (r == 0) return futex_status::woken;
  if (errno == ETIMEDOUT) return futex_status::timed_out;
  if (errno == EAGAIN) return futex_status::mismatch;
  return futex_status::woken;
}

/// Wakes up to `count` callers sleeping in futex_wait on `word`.
template <class T>
void futex_wake(std::atomic<T>* word, int count) noexcept {
  static_assert(sizeof(std::atomic<T>) == 4 && std::is_integral_v<T>, "futex words are 32 bits");
  ::syscall(SYS_futex, reinterpret_cast<T*>(word), FUTEX_WAKE | FUTEX_PRIVATE_FLAG, count, nullptr,
            nullptr, 0);
}

}  // namespace tessera::detail
