// sched/language_state.h — what the C++ and C runtimes keep per thread that a
// fiber must carry with it across a switch (internal; not installed).
//
// A fiber is a thread to the language: a handler that parks, a destructor run
// by unwinding that locks a mutex, code that reads errno after a sleep, all
// expect the state a thread would have kept across a blocking call. Two pieces
// of it live in the worker thread's TLS, and switch_to() swaps both on every
// switch, on the thread that runs the fiber being switched to:
//
// - The C++ ABI's exception globals (Itanium C++ ABI §2.2.2.1,
//   `__cxa_get_globals()`): the stack of exceptions being handled, which
//   `throw;`, `std::current_exception()` and `__cxa_end_catch` read, and the
//   count that `std::uncaught_exceptions()` returns. libsupc++ (GCC's) and
//   libc++abi (LLVM's) lay them out alike: a pointer, then an unsigned count
//   (ARM EHABI adds a third field; those targets are not supported). The
//   struct is 16 bytes on LP64 with its padding, copied whole.
// - `errno` (glibc's `__errno_location()`).
//
// Both addresses are per thread and fixed for its life, so a worker looks them
// up once when it starts (thread_language_state::current()).
#pragma once

#include <cerrno>
#include <cstring>

// Declared by libsupc++'s <cxxabi.h>, exported but not declared by libc++abi's.
namespace __cxxabiv1 {
struct __cxa_eh_globals;
extern "C" __cxa_eh_globals* __cxa_get_globals() noexcept;
}  // namespace __cxxabiv1

namespace tessera::sched {

/// The exception globals as both C++ runtimes define them (see above).
struct eh_globals {
  void* caught_exceptions = nullptr;  // __cxa_exception*: the innermost handled first
  unsigned int uncaught_exceptions = 0;
};
static_assert(sizeof(eh_globals) == 2 * sizeof(void*), "copied as two words");

/// One context's saved copy (a fiber's, or a worker's own stack's).
struct language_state {
  eh_globals eh;
  int error_number = 0;
};

/// Where the calling thread keeps them.
struct thread_language_state {
  eh_globals* eh = nullptr;
  int* error_number = nullptr;

  static thread_language_state current() noexcept {
    return {reinterpret_cast<eh_globals*>(__cxxabiv1::__cxa_get_globals()), &errno};
  }
  /// Saves this thread's state into `out` (the context switching away) and
  /// installs `in` (the context switching in). Copies of whole words, no branch:
  /// a handful of instructions on every switch.
  void swap(language_state& out, const language_state& in) const noexcept {
    // Both addresses first: a store to `out` might alias them, to the compiler.
    eh_globals* const g = eh;
    int* const e = error_number;
    std::memcpy(&out.eh, g, sizeof(eh_globals));
    std::memcpy(g, &in.eh, sizeof(eh_globals));
    out.error_number = *e;
    *e = in.error_number;
  }
};

}  // namespace tessera::sched
