// tessera/detail/cpu.h — the spin-wait hint, its calibration, and the
// misuse-diagnostic helpers.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "tessera/config.h"  // generated: TESSERA_CHECKS_BUILT
#include "tessera/detail/simulation_hooks.h"

/// 1 when the misuse checks are compiled in: extra checks that abort with a
/// message (unlock by a non-owner, destruction with waiters, racing releases
/// past max()). A property of the library build (CMake option TESSERA_CHECKS,
/// recorded in tessera/config.h), not of the includer's NDEBUG: the checks add
/// members to some primitives, so code built with another value would disagree
/// with the library about their layout (a Debug program against a Release
/// library read the reader-writer lock's counters at the wrong offsets and hung).
#if !defined(TESSERA_CHECKS)
#define TESSERA_CHECKS TESSERA_CHECKS_BUILT
#elif TESSERA_CHECKS != TESSERA_CHECKS_BUILT
#error \
    "TESSERA_CHECKS differs from the value this tessera library was built with (tessera/config.h): the primitives' layouts would not match; rebuild tessera with -DTESSERA_CHECKS=ON/OFF or drop the definition"
#endif

namespace tessera::detail {

/// One polite spin-wait step (x86 PAUSE, ARM YIELD), as in Listings 1 and 2.
/// On a fiber of a simulation it also lets the simulation run another fiber
/// (simulation_hooks.h): what it spins for can only come from one of them.
inline void cpu_relax() noexcept {
  if (const simulation_table* s = simulation_hooks.load(std::memory_order_relaxed)) [[unlikely]] {
    s->spin();
  }
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield" ::: "memory");
#else
  asm volatile("" ::: "memory");
#endif
}

/// cpu_relax() steps that take about `ns` nanoseconds on this CPU (at least
/// 1, at most 65,536). One PAUSE takes from a few nanoseconds (older x86 cores)
/// to some 40 (recent Intel cores), so spin budgets in steps would differ
/// tenfold between machines: the step's length is measured once per process,
/// at the first call (a few microseconds), and the count derived from it.
inline unsigned relax_steps_for(unsigned ns) noexcept {
  static const double step_ns = [] {
    using clock = std::chrono::steady_clock;
    double best = 1e9;
    for (int round = 0; round < 3; ++round) {  // the shortest of three: least disturbed
      const auto t0 = clock::now();
      for (int i = 0; i < 256; ++i) cpu_relax();
      best = std::min(best, std::chrono::duration<double, std::nano>(clock::now() - t0).count());
    }
    return std::max(best / 256, 0.25);
  }();
  return static_cast<unsigned>(std::clamp(ns / step_ns, 1.0, 65536.0));
}

/// Reports a violated usage rule and aborts: for misuse detected after the
/// object's state already changed (or in a destructor), where throwing would
/// lose or hide something. `what` names the object and the rule.
[[noreturn, gnu::cold]] inline void misuse_abort(const char* what) noexcept {
  std::fprintf(stderr, "tessera: fatal misuse: %s\n", what);
  std::fflush(stderr);
  std::abort();
}

}  // namespace tessera::detail
