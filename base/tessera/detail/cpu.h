// tessera/detail/cpu.h — spin-wait hint and the misuse-diagnostic helpers.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "tessera/config.h"  // generated: TESSERA_CHECKS_BUILT

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
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield" ::: "memory");
#else
  asm volatile("" ::: "memory");
#endif
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
