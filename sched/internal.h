// sched/internal.h — what the scheduler's files share and nobody else sees:
// the fiber permit states, the pick-rate constants, small helpers, and the
// process-wide record pool. (Private to sched/; scheduler.h is the map.)
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "scheduler.h"

namespace tessera::sched {

/// steady_clock, read through steady_now(): a simulation's virtual clock on
/// its worker (tessera/detail/simulation_hooks.h).
struct steady : std::chrono::steady_clock {
  static time_point now() noexcept { return detail::steady_now(); }
};

// A fiber waiter's permit word (waiter::state; the scheduler.h state machine).
constexpr std::int32_t kEmpty = 0;
constexpr std::int32_t kNotified = 1;
constexpr std::int32_t kParked = -1;       // in park(): an unpark hands it over as kEmpty
constexpr std::int32_t kParkedTimed = -2;  // in park_until(): an unpark leaves kNotified
constexpr std::int32_t kTimerFired = 2;

// Every this many picks a worker looks at older work first (global FIFO,
// inbox, its own oldest fiber): a pick count, not a duration.
constexpr std::uint32_t kOlderWorkPickInterval = 64;
constexpr std::uint32_t kRunnextLimit = 16;  // runnext picks in a row
// Pending timers are checked against the clock at most once per this many CPU
// timestamp ticks (about 1-4 µs at 1-4 GHz), not at every pick: reading the
// steady clock at every pick is a measurable share of a switch (docs/benchmarks.md).
constexpr std::uint64_t kTimerCheckTicks = 4096;
// Busy workers poll for I/O readiness without blocking at most once per this
// many CPU timestamp ticks (some 0.7-1 ms at 2-3 GHz; Go's sysmon polls a busy
// scheduler every 10 ms): bounding how long a ready socket waits while fibers
// keep every worker busy. Workers poll whenever they run out of fibers, so
// under load this is rarely the poll that finds sockets ready; at 1/17 of
// this (the interval until 2026) the busy polls were a third of a loaded HTTP
// server's polls, each returning a few events, where one later poll would
// have returned them all (docs/benchmarks.md, "System calls per request").
constexpr std::uint64_t kIoPollTicks = std::uint64_t{1} << 21;
// With SQEs queued (the completion backend's sends), a busy worker submits
// them after at most this many ticks (some 5-8 µs): they batch, and a
// request's answer does not wait for the next readiness poll.
constexpr std::uint64_t kIoSubmitTicks = std::uint64_t{1} << 14;
// An idle worker's spin polls a poller whose poll is a system call at these
// intervals: the first gap after its first poll, doubling to the last.
constexpr std::chrono::nanoseconds kSpinPollFirstGap{500};
constexpr std::chrono::nanoseconds kSpinPollMaxGap{4000};
// A runnext slot is stolen once it has held the same fiber, with its owner
// picking nothing, for this long. Long enough that a waker that parks soon (a
// hand-off) or computes briefly runs the woken fiber itself, on its warm core;
// short enough that a fiber woken by a long computation soon runs elsewhere.
// (Go waits ~3 µs; shorter values cost a barging fiber mutex throughput here:
// docs/benchmarks.md, "Constants".)
constexpr auto kRunnextStale = std::chrono::microseconds(50);
// While some worker is busy, a sleeping worker looks at the runnext slots this
// often; while it watches a full slot, once it may have gone stale.
constexpr auto kRunnextPoll = std::chrono::milliseconds(1);

constexpr std::size_t kRecordCache = 256;  // per worker, then back to the pool
constexpr std::size_t kStackCache = 256;

// A cheap, monotonic-enough timestamp for rate limiting (not for deadlines).
inline std::uint64_t cpu_ticks() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_ia32_rdtsc();
#else
  return static_cast<std::uint64_t>(steady::now().time_since_epoch().count());
#endif
}

// A seq_cst fence; ThreadSanitizer does not model fences, so there we use an
// RMW on the variable read next, which gives the same Dekker guarantee.
inline int fenced_load(std::atomic<int>& v) noexcept {
#if defined(__SANITIZE_THREAD__)
  return v.fetch_add(0, std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return v.load(std::memory_order_relaxed);
#endif
}

inline fiber_record* as_record(waiter& w) noexcept {
  return static_cast<fiber_record*>(w.context);
}

/// A fresh or recycled record from the process-wide, type-stable pool (pools.cpp).
fiber_record* new_record();
/// Returns a batch of records to the pool and empties `batch`.
void pool_records(std::vector<fiber_record*>& batch);
/// Sets the worker running on the calling thread (worker.cpp).
void set_current_worker(worker* w) noexcept;

}  // namespace tessera::sched
