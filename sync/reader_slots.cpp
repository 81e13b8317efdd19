// The reader-slot registry (tessera/detail/reader_slots.h): slot codes per OS
// thread, owned slots given back when their thread exits, and the asymmetric
// fence (sys_membarrier) that makes an owned slot's plain stores safe.
#include "tessera/detail/reader_slots.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "tessera/detail/cpu.h"

// The calling thread's reader-slot code (0: none yet): index << kSlotShift |
// kSlotOwned? | kSlotAssigned. C linkage, because reader_slot_or_zero() in the
// header reads it by its symbol name from inline assembly; `used`, because
// link-time optimisation does not see that reference and would otherwise drop
// or localise the symbol.
extern "C" {
[[gnu::used]] constinit thread_local std::uint32_t tessera_reader_slot_tls = 0;
}

namespace tessera {
namespace detail {
namespace {

static_assert(kOwnedSlots < kReaderSlots && (kReaderSlots & (kReaderSlots - 1)) == 0 &&
              kReaderSlots <= 32 && (kReaderSlots << kSlotShift) <= kSlotOwned &&
              kSlotOwned < kSlotAssigned);

constexpr std::uint32_t code_of(std::uint32_t index) noexcept {
  return kSlotAssigned | (index << kSlotShift);
}
// Owned slot indices not held by a live thread (bit i: slot i is free).
std::atomic<std::uint32_t> free_owned{(1u << kOwnedSlots) - 1};
std::atomic<std::uint32_t> next_shared{0};

long membarrier(int cmd) noexcept {
  return syscall(__NR_membarrier, cmd, 0, 0);
}

}  // namespace

// Owned slots need sys_membarrier's expedited private barrier (Linux 4.14);
// without it (old kernel, a seccomp filter) every thread counts with RMWs.
bool owned_reader_slots_enabled() noexcept {
  static const bool enabled = [] {
    const long cmds = membarrier(MEMBARRIER_CMD_QUERY);
    return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
           membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  }();
  return enabled;
}

namespace {

std::uint32_t shared_slot_code() noexcept {
  const std::uint32_t shared = kReaderSlots - kOwnedSlots;
  return code_of(kOwnedSlots + next_shared.fetch_add(1, std::memory_order_relaxed) % shared);
}

// Gives the thread's owned slot back when the thread exits. Anything the thread
// still does after that (other thread_local destructors) counts in a shared slot.
struct owned_slot_lease {
  std::uint32_t index;
  ~owned_slot_lease() {
    tessera_reader_slot_tls = shared_slot_code();
    free_owned.fetch_or(1u << index, std::memory_order_release);
  }
};

[[gnu::noinline]] std::uint32_t assign_reader_slot() noexcept {
  std::uint32_t code = 0;
  if (owned_reader_slots_enabled()) {
    // The lowest free owned index, if any. acquire: the previous owner's last
    // plain stores to slot i happen-before ours.
    std::uint32_t free = free_owned.load(std::memory_order_relaxed);
    while (free != 0) {
      const auto i = static_cast<std::uint32_t>(__builtin_ctz(free));
      if (free_owned.compare_exchange_weak(free, free & ~(1u << i), std::memory_order_acquire,
                                           std::memory_order_relaxed)) {
        thread_local owned_slot_lease lease{i};
        code = code_of(lease.index) | kSlotOwned;
        break;
      }
    }
  }
  if (code == 0) code = shared_slot_code();
  tessera_reader_slot_tls = code;
  return code;
}

}  // namespace

std::uint32_t current_reader_slot_call() noexcept {
  const std::uint32_t c = tessera_reader_slot_tls;
  return c != 0 ? c : assign_reader_slot();
}

void flush_reader_counts() noexcept {
  if (!owned_reader_slots_enabled()) return;  // no plain stores anywhere
  if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
    misuse_abort("tessera::shared_timed_mutex: sys_membarrier failed after registration");
  }
}

}  // namespace detail
}  // namespace tessera
