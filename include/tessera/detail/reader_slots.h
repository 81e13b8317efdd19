// tessera/detail/reader_slots.h — the process-wide registry of reader-indicator
// slots that tessera::shared_mutex counts readers in: each OS thread gets a slot
// code at its first read lock; the first kOwnedSlots live threads own a slot
// (only they write it, with plain stores), the rest share slots with RMWs.
// Owned slots need sys_membarrier (a writer's asymmetric fence); without it no
// slot is owned. See sync/reader_slots.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tessera/detail/tls_access.h"

namespace tessera {
namespace detail {
/// Reader-indicator slots per lock: kOwnedSlots owned ones, then shared ones.
inline constexpr std::uint32_t kReaderSlots = 32;
inline constexpr std::uint32_t kOwnedSlots = 24;
/// A reader-slot code (current_reader_slot()): the slot's index times 64 (its
/// byte offset in slots_, so that finding the slot is one AND), kSlotOwned if
/// the calling thread owns it, and kSlotAssigned (so a code is never 0, nor a
/// bias value below it).
inline constexpr std::uint32_t kSlotShift = 6;
inline constexpr std::uint32_t kSlotOwned = 0x800;
inline constexpr std::uint32_t kSlotAssigned = 0x1000;
/// The slot index a reader-slot code names.
constexpr std::uint32_t reader_slot_index(std::uint32_t slot_code) noexcept {
  return (slot_code >> kSlotShift) % kReaderSlots;
}
/// current_reader_slot()'s out-of-line form (and its first-call path, which
/// assigns the thread a slot). Never inlined or analysed (noipa): see below.
TESSERA_TLS_ACCESSOR std::uint32_t current_reader_slot_call() noexcept;
/// The calling OS thread's reader-slot code, or 0 if it has none yet (x86-64
/// only: elsewhere this assigns one). A fiber that parks may resume on another
/// worker, so the thread-local must be read afresh at each call; a compiler may
/// reuse a thread-local's address from before a call, so a plain `thread_local`
/// read will not do. On x86-64 the read is one volatile asm load (initial-exec
/// TLS, with a memory clobber so it cannot move across a park); elsewhere an
/// out-of-line noipa call.
inline std::uint32_t reader_slot_or_zero() noexcept {
#if defined(__x86_64__) && defined(__GNUC__)
  std::uint32_t c;
  asm volatile(
      "movq tessera_reader_slot_tls@gottpoff(%%rip), %%rax\n\t"
      "movl %%fs:(%%rax), %0"
      : "=r"(c)
      :
      : "rax", "memory");
  return c;
#else
  return current_reader_slot_call();
#endif
}
/// The calling OS thread's reader-slot code (assigned at the first call): the
/// slot's byte offset, plus kSlotOwned if the thread owns it (it alone writes
/// that slot in every lock).
inline std::uint32_t current_reader_slot() noexcept {
  const std::uint32_t c = reader_slot_or_zero();
  return c != 0 ? c : current_reader_slot_call();
}
/// Whether threads get owned slots (sys_membarrier is available). Fixed at
/// the first call.
bool owned_reader_slots_enabled() noexcept;
/// Makes every count a thread stored plainly (an owned slot's count-out, a
/// biased thread's count-in) visible before it returns (sys_membarrier,
/// PRIVATE_EXPEDITED). Called by a writer before it parks to wait for readers,
/// and by one that revokes a bias.
void flush_reader_counts() noexcept;
}  // namespace detail
}  // namespace tessera
