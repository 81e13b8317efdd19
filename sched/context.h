// sched/context.h — one context switch, with the sanitizer annotations it needs.
//
// The switch itself is Boost.Context's fcontext (`make_fcontext`/`jump_fcontext`,
// the engine under boost::context::fiber): we keep our own records, so the
// low-level pair is all we need. AddressSanitizer and ThreadSanitizer must be told
// about every stack switch, or they report false stack-buffer errors and races;
// `switch_guard` brackets each jump with the calls they document
// (__sanitizer_start/finish_switch_fiber, __tsan_switch_to_fiber).
//
// `jump()` enters jump_fcontext without a `call` on x86-64 (see its comment);
// a file that uses it must be compiled with -mno-red-zone (CMakeLists.txt
// does so for sched/fiber_park.cpp, the one caller).
#pragma once

#include <boost/context/detail/fcontext.hpp>

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define TESSERA_ASAN 1
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#else
#define TESSERA_ASAN 0
#endif
#if defined(__SANITIZE_THREAD__)
#define TESSERA_TSAN 1
#include <sanitizer/tsan_interface.h>
#else
#define TESSERA_TSAN 0
#endif

namespace tessera::sched {

using boost::context::detail::fcontext_t;
using boost::context::detail::jump_fcontext;
using boost::context::detail::make_fcontext;
using boost::context::detail::transfer_t;

/// Switch to `to`, passing `data`; returns when something jumps back here.
///
/// jump_fcontext leaves by an indirect jump to the resumed context's return
/// address, never by `ret`. Entered by `call`, it would leave one return-stack
/// predictor entry that nothing pops, and the first `ret` after every switch
/// would mispredict (docs/benchmarks.md, jobbench: `jump-call-rt` against
/// `jump-rt`). On x86-64 we therefore push the return address ourselves and
/// `jmp`: the predictor sees neither a call nor a return, and a fiber resumed
/// where another parked from the same code returns along predicted paths.
/// Only the SysV calling convention is assumed (arguments in rdi/rsi, result
/// in rax/rdx, callee-saved registers preserved, return to the address on top
/// of the stack), so the jump itself stays Boost's.
inline transfer_t jump(fcontext_t to, void* data) noexcept {
#if defined(__x86_64__) && defined(__ELF__)
  transfer_t t;
  asm volatile(
      "leaq 1f(%%rip), %%rax\n\t"
      "pushq %%rax\n\t"
      "jmp *jump_fcontext@GOTPCREL(%%rip)\n"
      "1:"
      : "=a"(t.fctx), "=d"(t.data), "+D"(to), "+S"(data)
      :
      : "rcx", "r8", "r9", "r10", "r11", "memory", "cc",  //
        "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",  //
        "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",  //
#if defined(__AVX512F__)
        "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23",  //
        "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31",  //
        "k1", "k2", "k3", "k4", "k5", "k6", "k7",  //
#endif
        "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)", "st(7)");
  return t;
#else
  return jump_fcontext(to, data);
#endif
}

/// What the sanitizers need to know about one execution context (a fiber's stack
/// or a worker thread's own stack).
struct sanitizer_context {
  const void* stack_bottom = nullptr;  // lowest address of the usable stack (ASan)
  std::size_t stack_size = 0;          // bytes (ASan)
  void* fake_stack = nullptr;          // ASan's fake-stack handle while switched out
  void* tsan_fiber = nullptr;          // TSan's fiber handle
};

/// Call right before jumping from `from` to `to`. `from_is_ending` says the
/// current context never runs again (a finished fiber): ASan then frees its fake stack.
inline void before_switch([[maybe_unused]] sanitizer_context& from,
                          [[maybe_unused]] const sanitizer_context& to,
                          [[maybe_unused]] bool from_is_ending) noexcept {
#if TESSERA_ASAN
  __sanitizer_start_switch_fiber(from_is_ending ? nullptr : &from.fake_stack, to.stack_bottom,
                                 to.stack_size);
#endif
#if TESSERA_TSAN
  __tsan_switch_to_fiber(to.tsan_fiber, 0);
#endif
}

/// Call first thing after a jump lands in `self`. Records, for a context whose
/// bounds we did not allocate (a worker's thread stack), the bounds ASan reports.
inline void after_switch([[maybe_unused]] sanitizer_context& self,
                         [[maybe_unused]] sanitizer_context* previous) noexcept {
#if TESSERA_ASAN
  const void* old_bottom = nullptr;
  std::size_t old_size = 0;
  __sanitizer_finish_switch_fiber(self.fake_stack, &old_bottom, &old_size);
  if (previous != nullptr && previous->stack_bottom == nullptr) {
    previous->stack_bottom = old_bottom;
    previous->stack_size = old_size;
  }
#endif
}

}  // namespace tessera::sched
