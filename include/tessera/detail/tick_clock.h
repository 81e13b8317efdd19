// tessera/detail/tick_clock.h — the cheapest monotonic clock, for hot paths
// that time short intervals (the barging locks' fairness timer) or stamp a
// wait for diagnostics (wait_scope).
//
// Contract
// - Readings: the TSC on x86-64 when the CPU reports it invariant (CPUID
//   8000_0007h, EDX bit 8), else steady_clock nanoseconds. Monotonic on one
//   CPU; across CPUs as synchronized as the kernel keeps the TSCs (it refuses
//   the TSC as its clock source when they are not). Compare readings only by
//   difference, with intervals made by ticks().
// - Cost: RDTSC, some 10 ns, against 30-40 ns for steady_clock::now() on a
//   virtual machine's clock source (and more, cold, inside a hand-off).
// - Rate: measured once, against steady_clock, over at least the first
//   millisecond of the process; the first ticks() call inside that
//   millisecond waits out the rest of it (once per process).
// - Who may call: any thread or fiber; no allocation, no system call on the
//   TSC path. Readings taken during static initialisation, before the TSC test
//   has run, are steady_clock nanoseconds: compare them with nothing later.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "tessera/detail/simulation_hooks.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace tessera::detail {

class tick_clock {
 public:
  using rep = std::int64_t;

  /// Whether readings are TSC ticks (set during static initialisation).
  static const bool uses_tsc;

  /// A reading: TSC ticks or steady_clock nanoseconds.
  static rep now() noexcept {
    if (const simulation_table* s = simulation_hooks.load(std::memory_order_relaxed)) [[unlikely]] {
      return from_ns(
          std::chrono::duration_cast<std::chrono::nanoseconds>(s->now().time_since_epoch())
              .count());
    }
#if defined(__x86_64__)
    if (uses_tsc) return static_cast<rep>(__rdtsc());
#endif
    return steady_ns();
  }

  /// `d` as a difference of readings (truncated; d >= 0).
  static rep ticks(std::chrono::nanoseconds d) noexcept {
    if (!uses_tsc) return d.count();
    return static_cast<rep>(static_cast<double>(d.count()) * static_cast<double>(per_ms()) * 1e-6);
  }

  /// A stamp for a wait record (wait_info::since): a TSC reading, else
  /// CLOCK_MONOTONIC_COARSE nanoseconds (the kernel tick's resolution). Never 0.
  static rep stamp() noexcept {
    if (simulation_hooks.load(std::memory_order_relaxed) != nullptr) [[unlikely]] {
      return now() | 1;
    }
#if defined(__x86_64__)
    if (uses_tsc) return static_cast<rep>(__rdtsc() | 1);
#endif
    return coarse_ns() | 1;
  }
  /// A now() reading the caller already took, as a stamp (saves a second
  /// clock read where a primitive times the same wait itself). Never 0.
  static rep stamp(rep reading) noexcept {
    return reading | 1;
  }

  /// A stamp as nanoseconds on steady_clock's base (CLOCK_MONOTONIC).
  static rep stamp_to_ns(rep stamp) noexcept;

 private:
  // A steady_clock reading in nanoseconds as a reading of this clock.
  static rep from_ns(rep ns) noexcept {
    return uses_tsc ? tsc0_ + ticks(std::chrono::nanoseconds(ns - ns0_)) : ns;
  }
  static rep steady_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  static rep coarse_ns() noexcept;
  /// TSC ticks per millisecond: measured once (calibrate), then read.
  static rep per_ms() noexcept {
    const rep v = per_ms_.load(std::memory_order_relaxed);
    return v != 0 ? v : calibrate();
  }
  static rep calibrate() noexcept;
  static inline std::atomic<rep> per_ms_{0};
  // The reference pair the rate is measured from: a TSC reading and the
  // steady_clock time beside it, taken during static initialisation.
  static const rep tsc0_;
  static const rep ns0_;
};

}  // namespace tessera::detail
