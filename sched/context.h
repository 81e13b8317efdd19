// sched/context.h — one context switch, with the sanitizer annotations it needs.
//
// The switch itself is Boost.Context's fcontext (`make_fcontext`/`jump_fcontext`,
// the engine under boost::context::fiber): we keep our own records, so the
// low-level pair is all we need. AddressSanitizer and ThreadSanitizer must be told
// about every stack switch, or they report false stack-buffer errors and races;
// `switch_guard` brackets each jump with the calls they document
// (__sanitizer_start/finish_switch_fiber, __tsan_switch_to_fiber).
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
