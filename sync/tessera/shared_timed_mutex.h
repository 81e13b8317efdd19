// tessera/shared_timed_mutex.h — shared_mutex and shared_timed_mutex: reader-
// writer locks (the timed one's shared and exclusive acquisitions can time out).
//
// Box office: one state word for the writers, plus a reader indicator split
// over kSlots cache-line-sized counters (a "distributed" or "big-reader"
// indicator, as in Linux's percpu-rwsem and folly's SharedMutex): a reader
// counts itself in its own thread's slot, so readers on different threads (up
// to kOwnedSlots of them) never write the same cache line. Waiters park in a
// FIFO queue (on-stack nodes, park façade) under a spin lock, which is what
// makes timeouts exact.
//
//   state_  bit 63  WRITER   a writer holds the lock, or owns the right to it
//                            and is draining the readers still inside
//           bit 62  QUEUED   the queue may be non-empty: unlock() looks at it
//   slots_[i]                readers inside, counted where they entered (a fiber
//                            that migrates may leave through another slot: only
//                            the sum over all slots means anything)
//     i < kOwnedSlots        owned: one live OS thread per index, process-wide
//                            (the first threads to use any shared_mutex; an
//                            index is given back when its thread exits). Only
//                            the owner writes slot i, in every lock.
//     i >= kOwnedSlots       shared: every other thread, dealt round-robin;
//                            written with atomic RMWs only.
//
//   lock_shared     slot += 1 (RMW), then load state_; WRITER clear: in. WRITER
//                   set: slot -= 1 (waking a draining writer), spin, queue.
//   unlock_shared   slot -= 1 — on an owned slot a plain load and store, no RMW;
//                   then WRITER set: unpark the draining writer, if any.
//   lock            CAS WRITER in (even while QUEUED: barging), then drain: wait
//                   until the slots sum to 0 (spin, then park as `drainer_`).
//                   WRITER set: spin (threads), queue.
//   unlock          clear WRITER; QUEUED: wake the head of the queue — a writer,
//                   or every queued reader — to compete again.
//
// The two sides meet Dekker-style (seq_cst): a reader increments its slot and
// then reads state_; a writer sets WRITER and then reads the slots. At least one
// of them sees the other, so a reader never enters under a writer. Leaving is
// an asymmetric Dekker pair (as in liburcu): a reader's plain store to its owned
// slot may still sit in its core's store buffer when it loads state_, so a
// writer that is about to park waiting for readers first runs sys_membarrier
// (MEMBARRIER_CMD_PRIVATE_EXPEDITED: a full barrier on every core running one
// of our threads) and only then re-reads the slots. Either a leaving reader's
// store was before that barrier (the writer sees it) or its load of state_ is
// after it (the reader sees WRITER and drainer_ and unparks the writer). The
// barrier costs a few µs and runs only when a writer parks; where the kernel
// lacks membarrier, no slot is owned and every count is an RMW.
//
// Preference and fairness: barging with eventual fairness, as tessera::mutex.
// Readers never block a writer from taking WRITER (so a stream of readers cannot
// starve a writer: new readers back off as soon as it is set), and writers
// barge. A waiter queued longer than `handoff_after` (1 ms) is handed the lock
// by the next unlock() — a writer gets WRITER directly; the queued readers are
// counted in and enter together — at most once per ms. So neither side starves
// and, when callers outnumber cores, no convoy forms: while a thread is parked
// the others keep the lock busy. (The previous FIFO-with-batching box office
// convoyed there: read-mostly, 8 threads on 2 cores, 1.7 M iterations/s against
// 40 M for std::shared_mutex.)
//
// Cost: an uncontended lock_shared/unlock_shared is one atomic RMW (two for a
// thread without an owned slot) on the caller's own slot line, two loads of
// state_ and two out-of-line calls (current_reader_slot); lock() also reads
// kSlots lines. sizeof is (kSlots + 1) cache lines, about 2 KiB: this lock is
// for read-mostly data shared by many threads — one per table, not one per
// element (use tessera::mutex there). (semabench read-mostly, 2 cores: 16 slots
// reached 1.7-2.2x std::shared_mutex at 32 threads, 32 slots 2.4-3.1x.)
//
// Contract: std::shared_timed_mutex's interface (shared_mutex: the untimed
// part), for fibers and OS threads mixed on one lock. try_lock_for/until and
// try_lock_shared_for/until never return false before the deadline, and a caller
// that times out leaves nothing behind (a waiter handed the lock as it timed out
// keeps it and returns true). try_lock and try_lock_shared fail only when the
// lock is held the other way (or, for try_lock, held shared). unlock()
// synchronizes-with every later acquisition; unlock_shared() with the next
// lock(). Spurious wake-ups: none visible. Who may call: any fiber or thread;
// unlock*() only a holder. Misuse (TESSERA_CHECKS): unlock() when not held
// exclusively, unlock_shared() when not held shared, destroying it held or with
// waiters, abort with a message naming the type and the rule.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "tessera/detail/park_list.h"
#include "tessera/detail/spin_lock.h"
#include "tessera/mutex.h"  // detail::to_steady, detail::deadline_after

namespace tessera {
namespace detail {
/// Reader-indicator slots per lock: kOwnedSlots owned ones, then shared ones.
inline constexpr std::uint32_t kReaderSlots = 32;
inline constexpr std::uint32_t kOwnedSlots = 24;
/// Bit of current_reader_slot()'s result: the calling thread owns the slot.
inline constexpr std::uint32_t kSlotOwned = 0x100;
/// The calling OS thread's reader slot: the index in the low bits, plus
/// kSlotOwned if the thread owns it (it alone writes that slot in every lock).
/// Out of line and never inlined or analysed (noipa) on purpose: a fiber that
/// parks may resume on another worker, so the thread-local read must happen
/// afresh at each call, never be reused from before a park by the compiler.
[[gnu::noipa]] std::uint32_t current_reader_slot() noexcept;
/// Whether threads get owned slots (sys_membarrier is available). Fixed at
/// the first call.
bool owned_reader_slots_enabled() noexcept;
/// Makes every count-out a thread did with a plain store (an owned slot)
/// visible before it returns (sys_membarrier, PRIVATE_EXPEDITED). Called by a
/// writer before it parks to wait for readers.
void flush_reader_counts() noexcept;
}  // namespace detail

class shared_timed_mutex {
 public:
  /// Reader-indicator slots (each its own cache line).
  static constexpr unsigned kSlots = detail::kReaderSlots;
  /// A waiter queued longer than this is handed the lock.
  static constexpr std::chrono::microseconds handoff_after{1000};

  shared_timed_mutex() noexcept = default;
  ~shared_timed_mutex();
  shared_timed_mutex(const shared_timed_mutex&) = delete;
  shared_timed_mutex& operator=(const shared_timed_mutex&) = delete;

  void lock() { (void)acquire(nullptr); }
  /// Fails if the lock is held either way (readers inside included).
  bool try_lock();
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    const auto deadline = detail::deadline_after(d);
    return acquire(&deadline);
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    const auto deadline = detail::to_steady(t);
    return acquire(&deadline);
  }
  /// Precondition: held exclusively by the caller.
  void unlock() {
    std::uint64_t s = state_.load(std::memory_order_relaxed);
    if (s == kWriter &&
        state_.compare_exchange_strong(s, 0, std::memory_order_release, std::memory_order_relaxed)) {
      return;
    }
    unlock_slow();
  }

  void lock_shared() {
    if (!try_lock_shared()) (void)acquire_shared(nullptr);
  }
  /// Fails only if a writer holds the lock (or is draining readers to take it).
  bool try_lock_shared() noexcept {
    if ((state_.load(std::memory_order_relaxed) & kWriter) != 0) return false;
    const std::uint32_t c = detail::current_reader_slot();
    std::atomic<std::int64_t>& mine = slot_of(c);
    mine.fetch_add(1, std::memory_order_seq_cst);  // the reader's one RMW
    if ((state_.load(std::memory_order_seq_cst) & kWriter) == 0) {
      note_shared(1);
      return true;
    }
    back_off(mine, c);
    return false;
  }
  template <class Rep, class Period>
  bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& d) {
    const auto deadline = detail::deadline_after(d);
    return try_lock_shared() || acquire_shared(&deadline);
  }
  template <class Clock, class Duration>
  bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& t) {
    const auto deadline = detail::to_steady(t);
    return try_lock_shared() || acquire_shared(&deadline);
  }
  /// Precondition: held shared by the caller.
  void unlock_shared() {
    note_shared(-1);
    const std::uint32_t c = detail::current_reader_slot();
    count_out(slot_of(c), c);
    if ((state_.load(std::memory_order_seq_cst) & kWriter) != 0) wake_drainer();
  }

 protected:
  /// For shared_mutex: names the type in misuse messages.
  explicit shared_timed_mutex(const char* type) noexcept : type_(type) {}

 private:
  static constexpr std::uint64_t kWriter = std::uint64_t{1} << 63;
  static constexpr std::uint64_t kQueued = std::uint64_t{1} << 62;
  struct node;
  struct alignas(64) slot {
    std::atomic<std::int64_t> readers{0};
  };

  /// The slot a current_reader_slot() code names.
  std::atomic<std::int64_t>& slot_of(std::uint32_t slot_code) noexcept {
    return slots_[slot_code % kSlots].readers;
  }
  /// One reader fewer in `s`, the caller's slot (`slot_code` from
  /// current_reader_slot()).
  static void count_out(std::atomic<std::int64_t>& s, std::uint32_t slot_code) noexcept {
    if ((slot_code & detail::kSlotOwned) != 0) {
      // Only this thread writes this slot: a plain store, no RMW. A writer that
      // would park waiting for it first flushes it (flush_reader_counts).
      s.store(s.load(std::memory_order_relaxed) - 1, std::memory_order_release);
    } else {
      s.fetch_sub(1, std::memory_order_seq_cst);
    }
  }
  bool take_writer() noexcept;
  bool acquire(const std::chrono::steady_clock::time_point* deadline);
  bool acquire_shared(const std::chrono::steady_clock::time_point* deadline);
  template <class TryBarge>
  int wait_in_queue(bool shared, const std::chrono::steady_clock::time_point* deadline,
                    TryBarge&& barge);
  bool drain(const std::chrono::steady_clock::time_point* deadline);
  std::int64_t readers_inside() const noexcept;
  void back_off(std::atomic<std::int64_t>& mine, std::uint32_t slot_code) noexcept;
  void wake_drainer() noexcept;
  void unlock_slow();
  void note_shared([[maybe_unused]] int delta) noexcept {
#if TESSERA_CHECKS
    if (debug_readers_.fetch_add(delta, std::memory_order_relaxed) + delta < 0) shared_underflow();
#endif
  }
  [[noreturn]] void shared_underflow() const noexcept;

  std::atomic<std::uint64_t> state_{0};
  std::atomic<waiter*> drainer_{nullptr};  // the writer waiting for readers to leave
  detail::spin_lock lock_;
  detail::park_list queue_;                            // guarded by lock_
  std::chrono::steady_clock::time_point next_fair_{};  // guarded by lock_
  const char* type_ = "tessera::shared_timed_mutex";
#if TESSERA_CHECKS
  std::atomic<std::int64_t> debug_readers_{0};  // readers inside, exactly
#endif
  slot slots_[kSlots];
};

/// The reader-writer lock: std::shared_mutex's interface, the box office above.
class shared_mutex : private shared_timed_mutex {
 public:
  shared_mutex() noexcept : shared_timed_mutex("tessera::shared_mutex") {}
  using shared_timed_mutex::lock;
  using shared_timed_mutex::lock_shared;
  using shared_timed_mutex::try_lock;
  using shared_timed_mutex::try_lock_shared;
  using shared_timed_mutex::unlock;
  using shared_timed_mutex::unlock_shared;
};

}  // namespace tessera
