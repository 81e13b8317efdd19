// tessera/detail/cpu.h — spin-wait hint and the misuse-diagnostic helpers.
#pragma once

#include <cstdio>
#include <cstdlib>

#if !defined(TESSERA_CHECKS)
#if defined(NDEBUG)
#define TESSERA_CHECKS 0
#else
/// 1 in debug builds: extra misuse checks that abort with a message (unlock by a
/// non-owner, destruction with waiters, racing releases past max()).
#define TESSERA_CHECKS 1
#endif
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
