// tessera/detail/holder_mark.h — where the holder of a lock is, for the
// deadlock report, at the cost of one store per acquisition.
//
// Contract
// - note(): writes an address on the caller's stack (its stack pointer): the
//   fiber or thread that calls it is then found by the stack that address is
//   in. One instruction on x86-64 (`mov %rsp, mem`) and no thread-local read,
//   where the caller's identity (self()) would cost a call; the lock word
//   keeps its own layout. After Linux's PI futexes, which keep the owner's id
//   in the lock word for the same purpose.
// - Who may call: the acquirer, right after it owns the lock (every path that
//   acquires: fast path, barging, hand-off). Nothing clears it: a reader looks
//   at it only while the lock is known to be held (a waiter is parked on it).
// - load(): any thread, any time; relaxed, a snapshot for diagnostics. Nothing
//   synchronizes through it.
#pragma once

#include <cstdint>

namespace tessera::detail {

class holder_mark {
 public:
  constexpr holder_mark() noexcept = default;
  holder_mark(const holder_mark&) = delete;
  holder_mark& operator=(const holder_mark&) = delete;

  void note() noexcept {
#if defined(__x86_64__)
    // A plain 8-byte store (atomic on x86-64), invisible to the compiler's
    // and TSan's view of memory: only load() reads it, relaxed.
    asm volatile("movq %%rsp, %0" : "=m"(where_));
#else
    __atomic_store_n(&where_, reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0)),
                     __ATOMIC_RELAXED);
#endif
  }
  /// The last noted address, or 0 if nobody ever held the lock.
  std::uintptr_t load() const noexcept {
    return __atomic_load_n(&where_, __ATOMIC_RELAXED);
  }

 private:
  std::uintptr_t where_ = 0;
};

}  // namespace tessera::detail
