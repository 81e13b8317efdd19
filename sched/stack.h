// sched/stack.h — fiber stacks: mmap'd, a guard page below each, committed lazily,
// pooled; and the SIGSEGV handler that turns a guard-page hit into a message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace tessera::sched {

/// One fiber stack. The mapping is [map, map + map_size); its lowest `guard`
/// bytes are PROT_NONE, the rest is the usable stack, which grows down from top().
/// Pages are committed by the kernel on first touch (MAP_NORESERVE), so a fiber
/// that uses 8 KiB of a 256 KiB stack costs 8 KiB of RSS.
struct stack_mem {
  char* map = nullptr;
  std::size_t map_size = 0;
  std::size_t guard = 0;

  char* bottom() const noexcept { return map + guard; }
  char* top() const noexcept { return map + map_size; }
  std::size_t usable() const noexcept { return map_size - guard; }
  explicit operator bool() const noexcept { return map != nullptr; }
};

/// A thread-safe pool of equally sized stacks, owned by one runtime. Stacks it
/// hands out go back with give(); the pool keeps up to `cache_limit` of them
/// mapped for reuse and unmaps the rest. Everything is unmapped on destruction.
class stack_pool {
 public:
  /// `usable_size` is rounded up to whole pages. `guard_bytes` (0: none; else
  /// rounded up to whole pages) of PROT_NONE go below each stack (two kernel
  /// mappings per stack: see take()).
  stack_pool(std::size_t usable_size, std::size_t guard_bytes, std::size_t cache_limit = 4096);
  ~stack_pool();
  stack_pool(const stack_pool&) = delete;
  stack_pool& operator=(const stack_pool&) = delete;

  /// A stack, from the cache or freshly mapped. Throws std::system_error with a
  /// message naming the size and, on ENOMEM, the vm.max_map_count limit.
  stack_mem take();
  void give(stack_mem s) noexcept;
  /// Moves up to `n` stacks in and out in one lock (for per-worker caches).
  void take_batch(std::vector<stack_mem>& into, std::size_t n);
  void give_batch(std::vector<stack_mem>& from) noexcept;

  std::size_t usable_size() const noexcept { return usable_; }
  bool guarded() const noexcept { return guard_ != 0; }
  /// Stacks currently mapped (in use or cached).
  std::size_t mapped() const noexcept;

 private:
  stack_mem map_one();
  static void unmap(stack_mem s) noexcept;

  std::size_t usable_;
  std::size_t guard_;
  std::size_t cache_limit_;
  mutable std::mutex mu_;
  std::vector<stack_mem> cache_;
  std::size_t mapped_ = 0;
};

/// What the overflow handler needs to name the fiber that hit its guard page.
struct overflow_info {
  const char* guard_lo = nullptr;  // [guard_lo, guard_hi) is PROT_NONE
  const char* guard_hi = nullptr;
  std::uint64_t fiber_id = 0;
  std::size_t stack_size = 0;
};

/// Installs (once per process) a SIGSEGV/SIGBUS handler on an alternate signal
/// stack. When the faulting address lies in the running fiber's guard page it
/// writes "tessera: stack overflow in fiber #N (stack size S bytes) ..." to
/// stderr and lets the fault kill the process; any other fault goes to the
/// handler that was installed before ours (or the default action).
void install_overflow_handler();

/// Per-thread: the running fiber's guard page, as a pointer to the fiber's own
/// record of it (set by the worker at each switch: one store; null or null
/// fields mean "not on a fiber").
const overflow_info*& current_overflow_info() noexcept;

/// Gives the calling thread an alternate signal stack for the overflow handler
/// (a fiber that overflowed has no stack left to run a handler on).
class alt_signal_stack {
 public:
  alt_signal_stack();
  ~alt_signal_stack();
  alt_signal_stack(const alt_signal_stack&) = delete;
  alt_signal_stack& operator=(const alt_signal_stack&) = delete;

 private:
  void* mem_ = nullptr;
  bool installed_ = false;
};

}  // namespace tessera::sched
