// Helpers shared by the tests: bounded polling and a watchdog for stress tests.
#pragma once

#include <gtest/gtest.h>
#include <tessera/park.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace tessera::test {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

/// How many times slower the sanitizers make a switch-heavy test, for the few
/// tests that bound wall time (measured: a 512-fiber mutex test, 0.1 s in
/// Release, 0.6-1 s under ThreadSanitizer).
#if defined(__SANITIZE_THREAD__)
inline constexpr int kSanitizerSlowdown = 15;
inline constexpr bool kThreadSanitizer = true;
#elif defined(__SANITIZE_ADDRESS__)
inline constexpr int kSanitizerSlowdown = 4;
inline constexpr bool kThreadSanitizer = false;
#else
inline constexpr int kSanitizerSlowdown = 1;
inline constexpr bool kThreadSanitizer = false;
#endif

/// A stress loop's bounds, rounds and wall time, whichever it reaches first:
/// as given in an optimised build, a third of them under a sanitizer. An
/// instrumented round is many times slower, and a race shows in the first
/// rounds as readily as in the last, so the cut keeps the sanitizer suites
/// within CI's time without hiding what they look for.
inline constexpr int kSanitizerStressShare = kSanitizerSlowdown > 1 ? 3 : 1;
constexpr int stress_rounds(int rounds) {
  return (rounds + kSanitizerStressShare - 1) / kSanitizerStressShare;
}
constexpr std::chrono::milliseconds stress_time(std::chrono::milliseconds limit) {
  return limit / kSanitizerStressShare;
}

/// A stress loop's condition for going on to round `round`: always below
/// `least` (a minimum that a slow, loaded machine still runs, so the test
/// never checks too little), then while below `most` and before `until`.
inline bool another_round(int round, int least, int most, clock::time_point until) {
  return round < most && (round < least || clock::now() < until);
}

/// How many fibers a test that makes thousands makes: as given, a quarter
/// under ThreadSanitizer, whose state for each fiber costs milliseconds to
/// set up.
constexpr int many_fibers(int count) {
  return kThreadSanitizer ? count / 4 : count;
}

/// Polls `cond` (yielding) until it holds or `limit` passes; returns its last value.
/// For observing another thread reach a state, never as a substitute for a sync.
/// Yields with tessera::yield_now(), so it also works on a fiber.
template <class Cond>
bool eventually(Cond&& cond, std::chrono::milliseconds limit = 10s) {
  const auto deadline = clock::now() + limit;
  while (!cond()) {
    if (clock::now() >= deadline) return cond();
    yield_now();
  }
  return true;
}

/// Busy-waits `d` on the steady clock: for delays of microseconds, which a
/// sleep would round up far past (work that takes time, or a counterpart
/// landing at a chosen point of a short poll).
inline void spin_for(std::chrono::nanoseconds d) {
  const auto until = clock::now() + d;
  while (clock::now() < until) {
  }
}

/// Aborts the process with a message if not disarmed within `limit`: a hung
/// stress test fails loudly instead of stalling CI.
class watchdog {
 public:
  explicit watchdog(const char* what, std::chrono::seconds limit = 120s)
      : thread_([this, what, limit] {
          std::unique_lock lock(mu_);
          if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "watchdog: '%s' still running after %llds: stuck\n", what,
                         static_cast<long long>(limit.count()));
            std::abort();
          }
        }) {}
  ~watchdog() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace tessera::test
