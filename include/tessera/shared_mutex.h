// tessera/shared_mutex.h — shared_mutex and shared_timed_mutex: reader-writer
// locks with std::'s interfaces (the timed one's shared and exclusive
// acquisitions can time out), for fibers and OS threads mixed on one lock.
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
// Admission: barging with eventual fairness, as tessera::mutex. Readers never
// keep a writer from taking WRITER (new readers back off as soon as it is set,
// so readers cannot starve writers) and writers barge; a waiter queued longer
// than `handoff_after` (1 ms) is handed the lock by the next unlock() — a
// writer gets WRITER, the queued readers enter together — at most once per
// 1 ms (40 µs when the head waiter is a fiber).
// Size: (kSlots + 1) cache lines, about 2 KiB: one lock per read-mostly table,
// not one per element (use tessera::mutex there).
// Diagnostics: a writer notes where it is when it takes WRITER (one store,
// detail::holder_mark), so the deadlock report names the writer to waiting
// writers and readers in every build; readers are not named.
//
// Box office: one state word for the writers, plus a reader indicator split
// over kSlots cache-line-sized counters (as Linux's percpu-rwsem and folly's
// SharedMutex): a reader counts itself in its own thread's slot, so readers on
// different threads never write the same cache line.
//
//   state_  bit 63  WRITER   a writer holds the lock, or owns the right to it
//                            and is draining the readers still inside
//           bit 62  QUEUED   the queue may be non-empty: unlock() looks at it
//           bits 0-31 bias   1: not biased yet; 2: revoked, for good; else the
//                            slot code of the one thread the lock is biased to
//                            (so state_ == that code means: biased to it, no
//                            writer, nobody queued — the biased reader's one
//                            compare)
//   used_   bit i            slot i may hold counts of this lock: set by a
//                            reader before it first counts through slot i,
//                            never cleared; a writer reads only these slots.
//                            Bit kOwnedSlots (the hand-off slot) set from the start
//   slots_[i]   entered      readers that counted in here  } both only grow;
//               left         readers that counted out here } inside = sum of
//                            entered - sum of left over all slots (a fiber that
//                            migrates may leave through another slot)
//     i < kOwnedSlots        owned: one live OS thread per index, process-wide
//                            (the first threads to use any shared_mutex; an
//                            index is given back when its thread exits). Only
//                            the owner writes slot i, in every lock.
//     i >= kOwnedSlots       shared: every other thread, dealt round-robin;
//                            written with atomic RMWs only.
//
// How readers and writers meet (a Dekker pair made asymmetric with
// sys_membarrier, and reader bias) is told in sync/shared_mutex.cpp and
// model-checked in tests/model/shared_mutex.pml.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "tessera/detail/deadline.h"
#include "tessera/detail/holder_mark.h"
#include "tessera/detail/park_list.h"
#include "tessera/detail/reader_slots.h"
#include "tessera/detail/spin_lock.h"

namespace tessera {

class shared_timed_mutex {
 public:
  /// Reader-indicator slots (each its own cache line).
  static constexpr unsigned kSlots = detail::kReaderSlots;
  /// A waiter queued longer than this is handed the lock.
  static constexpr std::chrono::microseconds handoff_after{1000};

  constexpr shared_timed_mutex() noexcept = default;
  ~shared_timed_mutex();
  shared_timed_mutex(const shared_timed_mutex&) = delete;
  shared_timed_mutex& operator=(const shared_timed_mutex&) = delete;

  void lock() {
    detail::simulation_point();
    (void)acquire({});
  }
  /// Fails if the lock is held either way (readers inside included).
  bool try_lock();
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    const auto deadline = detail::deadline::after(d);
    return acquire(deadline);
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    const auto deadline = detail::deadline::at(t);
    return acquire(deadline);
  }
  /// Precondition: held exclusively by the caller.
  void unlock() {
    detail::simulation_point();
    std::uint64_t s = state_.load(std::memory_order_relaxed);
    if ((s & (kWriter | kQueued)) == kWriter &&
        state_.compare_exchange_strong(s, s & ~kWriter, std::memory_order_release,
                                       std::memory_order_relaxed)) {
      return;
    }
    unlock_slow();
  }

  void lock_shared() {
    detail::simulation_point();
    if (!try_lock_shared()) (void)acquire_shared({});
  }
  /// Fails only if a writer holds the lock (or is draining readers to take it).
  bool try_lock_shared() noexcept {
    std::uint32_t c = detail::reader_slot_or_zero();
    const std::uint64_t s = state_.load(std::memory_order_relaxed);
    if (s == c) [[likely]] {
      // Biased to this thread, no writer, nobody queued (one compare: c is never
      // 0 here, as the bias field never is). Count in with a plain store, no
      // RMW, no fence (the other half of the pair is a revoking writer's
      // membarrier). The signal fence only keeps the compiler from sinking the
      // store past the load.
      slot& mine = slot_of(c);
      owner_increment(mine.entered, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);
      // Still biased and no writer: the revoking writer's membarrier is still
      // to come, and orders us.
      if (state_.load(std::memory_order_acquire) == c) [[likely]] {
        note_shared(1);
        return true;
      }
      return biased_entry_changed(mine, c);
    }
    if ((s & kWriter) != 0) return false;
    if (c == 0) c = detail::current_reader_slot_call();
    slot& mine = slot_of(c);
    mark_used(c);  // before the bias (a biased thread's slot is marked) and the count
    if ((s & kBiasMask) == kUnbiased) take_bias(c);
    mine.entered.fetch_add(1, std::memory_order_seq_cst);  // the reader's one RMW
    if ((state_.load(std::memory_order_seq_cst) & kWriter) == 0) {
      note_shared(1);
      return true;
    }
    back_off(mine, c);
    return false;
  }
  template <class Rep, class Period>
  bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& d) {
    const auto deadline = detail::deadline::after(d);
    return try_lock_shared() || acquire_shared(deadline);
  }
  template <class Clock, class Duration>
  bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& t) {
    const auto deadline = detail::deadline::at(t);
    return try_lock_shared() || acquire_shared(deadline);
  }
  /// Precondition: held shared by the caller.
  void unlock_shared() {
    detail::simulation_point();
    note_shared(-1);
    std::uint32_t c = detail::reader_slot_or_zero();
    if (state_.load(std::memory_order_relaxed) == c) [[likely]] {
      // Biased to this thread: its slot is owned and marked. A plain store, as
      // count_out() does for an owned slot.
      owner_increment(slot_of(c).left, std::memory_order_release);
    } else {
      if (c == 0) c = detail::current_reader_slot_call();
      mark_used(c);  // a fiber that migrated leaves through another thread's slot
      count_out(slot_of(c), c);
    }
    if ((state_.load(std::memory_order_seq_cst) & kWriter) != 0) wake_drainer();
  }

 protected:
  /// For shared_mutex: names the type in misuse messages.
  constexpr explicit shared_timed_mutex(const char* type) noexcept : type_(type) {}

 private:
  static constexpr std::uint64_t kWriter = std::uint64_t{1} << 63;
  static constexpr std::uint64_t kQueued = std::uint64_t{1} << 62;
  /// state_'s bias field: a slot code, or not biased yet, or never again.
  static constexpr std::uint64_t kBiasMask = 0xFFFFFFFF;
  static constexpr std::uint64_t kUnbiased = 1;
  static constexpr std::uint64_t kBiasRevoked = 2;
  static_assert(kBiasRevoked < detail::kSlotAssigned);
  struct node;
  /// One reader-indicator slot: readers that entered and left through it, both
  /// only ever growing. Two words, not one count, so that a thread's count-in
  /// and count-out are not one chain of store-to-load forwarding.
  struct alignas(64) slot {
    std::atomic<std::int64_t> entered{0};
    std::atomic<std::int64_t> left{0};
  };

  /// `count` += 1 by the one thread that writes it (an owned slot's owner): a
  /// load and a store, no RMW; `order` is the store's.
  static void owner_increment(std::atomic<std::int64_t>& count, std::memory_order order) noexcept {
    count.store(count.load(std::memory_order_relaxed) + 1, order);
  }
  /// The slot a current_reader_slot() code names.
  slot& slot_of(std::uint32_t slot_code) noexcept {
    // The code's index bits are the slot's byte offset: one AND, no shifts.
    static_assert(sizeof(slot) == std::size_t{1} << detail::kSlotShift);
    constexpr std::uint32_t offset_bits = (kSlots - 1) << detail::kSlotShift;
    return *reinterpret_cast<slot*>(reinterpret_cast<char*>(slots_) + (slot_code & offset_bits));
  }
  /// Marks that slot in used_: a seq_cst RMW the first time a thread counts
  /// through it in this lock, a load after that.
  void mark_used(std::uint32_t slot_code) noexcept {
    const std::uint32_t bit = std::uint32_t{1} << detail::reader_slot_index(slot_code);
    if ((used_.load(std::memory_order_seq_cst) & bit) == 0) {
      used_.fetch_or(bit, std::memory_order_seq_cst);
    }
  }
  /// One reader out through `s`, the caller's slot (`slot_code` from
  /// current_reader_slot()).
  static void count_out(slot& s, std::uint32_t slot_code) noexcept {
    if ((slot_code & detail::kSlotOwned) != 0) {
      // Only this thread writes this slot: a plain store, no RMW. A writer that
      // would park waiting for it first flushes it (flush_reader_counts).
      owner_increment(s.left, std::memory_order_release);
    } else {
      s.left.fetch_add(1, std::memory_order_seq_cst);
    }
  }
  void take_bias(std::uint32_t slot_code) noexcept;
  void replace_bias(std::uint64_t from, std::uint64_t to) noexcept;
  bool biased_entry_changed(slot& mine, std::uint32_t slot_code) noexcept;
  void revoke_foreign_bias() noexcept;
  bool take_writer() noexcept;
  bool acquire(detail::deadline deadline);
  bool acquire_shared(detail::deadline deadline);
  template <class TryBarge>
  detail::acquire_result wait_in_queue(bool shared, detail::deadline deadline,
                                       detail::tick_clock::rep began, TryBarge&& barge);
  bool drain(detail::deadline deadline);
  std::int64_t readers_inside() const noexcept;
  void back_off(slot& mine, std::uint32_t slot_code) noexcept;
  void wake_drainer() noexcept;
  void unlock_slow();
  void note_shared([[maybe_unused]] int delta) noexcept {
#if TESSERA_CHECKS
    if (debug_readers_.fetch_add(delta, std::memory_order_relaxed) + delta < 0) shared_underflow();
#endif
  }
  [[noreturn]] void shared_underflow() const noexcept;

  std::atomic<std::uint64_t> state_{kUnbiased};  // WRITER | QUEUED | bias field
  // Slots that may hold counts (bit i: slots_[i]); the hand-off slot from the start.
  std::atomic<std::uint32_t> used_{std::uint32_t{1} << detail::kOwnedSlots};
  std::atomic<waiter*> drainer_{nullptr};  // the writer waiting for readers to leave
  detail::spin_lock lock_;
  detail::holder_mark holder_;             // where the writer is (the deadlock report)
  detail::park_list queue_;                // guarded by lock_
  detail::tick_clock::rep next_fair_ = 0;  // guarded by lock_ (tick_clock)
  const char* type_ = "tessera::shared_timed_mutex";
#if TESSERA_CHECKS
  std::atomic<std::int64_t> debug_readers_{0};  // readers inside, exactly
#endif
  slot slots_[kSlots];
};

/// The reader-writer lock: std::shared_mutex's interface, the box office above.
class shared_mutex : private shared_timed_mutex {
 public:
  constexpr shared_mutex() noexcept : shared_timed_mutex("tessera::shared_mutex") {}
  using shared_timed_mutex::lock;
  using shared_timed_mutex::lock_shared;
  using shared_timed_mutex::try_lock;
  using shared_timed_mutex::try_lock_shared;
  using shared_timed_mutex::unlock;
  using shared_timed_mutex::unlock_shared;
};

}  // namespace tessera
