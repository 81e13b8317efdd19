// tessera/detail/segment_list.h — the infinite array of cells under the segment
// queue synchronizer (segment_queue.h) and the lock-free channel
// (lockfree_channel.h): cells allocated in segments of N, reached from
// `Sides` moving pointers (one per index that walks the array), and reclaimed
// oldest first.
//
// Reclamation (model-checked in tests/model/segment_queue.pml): a segment is
// reclaimed once every side's pointer has passed it and no operation holds
// it. An operation raises the count of the segment it loaded from a pointer,
// then loads the pointer again (hold()); walking forward it holds each next
// segment before it lets go of the last. Reclamation stops at the first held
// segment, so holding a segment protects every later one. Reclaimed segments
// are kept for reuse by the same list (type-stable: a stale raise touches a
// segment, never freed memory) and deleted with it. Why this is sound, with
// seq_cst on both sides: if the reclaimer read a count of 0, the raise came
// later, so the operation's second load sees a pointer that has moved on
// (pointers only move forward) and it lets go and starts over — unless the
// segment was reused and became that pointer's segment again, and then
// holding it is holding the current segment, which is correct.
//
// Removal (CQS; model-checked in tests/model/segment_queue.pml, -DREMOVE): a
// user that cancels cells reports each with cancelled(); a segment whose N
// cells are all cancelled is unlinked from the middle of the list by the
// reclaimer, unless it is the newest or a side's pointer names it, and joins
// the retired segments. Its next pointer stays as it was, so an operation
// that reached it before it was unlinked walks on. An index in a removed
// segment has no cell: at() returns the next live segment and a null cell,
// and the caller treats it as cancelled (only the resuming side can ask for
// one: every suspender of a removed segment has come and gone). A retired
// segment is reused when reclamation, scanning every segment not reclaimed
// in id order, finds none up to it held, and no side's pointer names a
// retired segment at or before it: no operation holds it, and none can reach
// it any more. So a queue whose waiters all time out keeps a bounded number
// of segments, not one per N of them.
//
// The free list (reclaimed segments for reuse; model-checked in
// tests/model/free_list.pml) is a lock-free stack (Treiber's): a push or a pop
// is a CAS on its head. The head word carries, beside the top segment's
// address, a count of the changes made to it, so that a pop which read top A
// and A's next B cannot succeed after others popped A and B and pushed A back
// (ABA): the count moved on. The count has 22 bits (the address's 6 low bits,
// free by the segments' 64-byte alignment, and the 16 above the 48 that user-
// space addresses use on x86-64 and AArch64 Linux, checked at allocation), so
// a stale pop could succeed only if its thread stopped between its two reads
// while exactly a multiple of 4,194,304 changes were made (each reuse of a
// segment is two: tens of millions of operations). Segments are never freed
// while the list lives, so a stale read of a popped segment's link is
// harmless. The reclaimer's lock is only tried (a caller that finds it taken
// leaves a request and goes on). So no operation here waits for another: a
// thread stopped anywhere in here holds up nobody, and at worst keeps segments
// from reclamation while it holds one. (The allocator behind a fresh segment
// is the C++ runtime's.)
//
// Cell requirements: default constructible, and `void reset() noexcept`
// (called on a segment before it is linked, fresh or reused; the cells of a
// reclaimed segment are all in a final state, owning nothing).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "tessera/detail/cpu.h"
#include "tessera/detail/spin_lock.h"

namespace tessera::detail {

template <class Cell, std::size_t N, std::size_t Sides = 2>
class segment_list {
 public:
  static constexpr std::size_t kCells = N;

  struct alignas(64) segment {  // aligned: a segment* has 6 low bits free
    std::atomic<std::uint64_t> id{0};
    std::atomic<segment*> next{nullptr};
    // Operations in or walking from here, one count per side (so that the
    // sides do not share a contended line): held while any is nonzero.
    struct alignas(64) count {
      std::atomic<std::int64_t> n{0};
    };
    count holds[Sides];
    bool held() const noexcept {
      for (const auto& h : holds) {
        if (h.n.load(std::memory_order_seq_cst) != 0) return true;
      }
      return false;
    }
    std::atomic<std::uint32_t> cancelled{0};  // cells reported by cancelled()
    std::atomic<bool> retired{false};         // unlinked (written under reclaim_lock_)
    segment* free_next = nullptr;             // on the retired list (reclaim_lock_)
    std::atomic<segment*> free_link{nullptr};  // on the free list
    // On a 16-byte boundary, so that no cell of 8 or 16 bytes straddles two
    // cache lines (an 8-byte shift of the fields above made every fourth
    // one do so).
    alignas(16) Cell cells[N];
  };

  /// `sides`: how many of the Sides pointers move (the rest are ignored by
  /// reclamation).
  explicit segment_list(std::size_t sides = Sides) : active_(sides) {
    first_ = allocate(0);
    for (auto& side : sides_) side.p.store(first_, std::memory_order_relaxed);
  }
  ~segment_list() {
    for (segment* s = first_; s != nullptr;) delete std::exchange(s, s->next.load());
    for (segment* s = address_of(free_.load()); s != nullptr;)
      delete std::exchange(s, s->free_link.load());
    for (segment* s = retired_; s != nullptr;) delete std::exchange(s, s->free_next);
  }
  segment_list(const segment_list&) = delete;
  segment_list& operator=(const segment_list&) = delete;

  /// Side k's pointer (enqueue/dequeue; send/receive/buffer end).
  std::atomic<segment*>& side(std::size_t k) noexcept { return sides_[k].p; }

  /// Holds the segment side k's pointer names (raise, then check it is still
  /// there), on side k's count.
  segment* hold(std::size_t k) noexcept {
    const std::atomic<segment*>& from = side(k);
    for (;;) {
      segment* s = from.load(std::memory_order_seq_cst);
      s->holds[k].n.fetch_add(1, std::memory_order_seq_cst);
      if (from.load(std::memory_order_seq_cst) == s) return s;
      drop(s, k);
    }
  }
  /// Lets go of `s`, held on side k's count. If side k's pointer has moved
  /// past it, reclamation may have stopped at it: look again.
  void drop(segment* s, std::size_t k) noexcept {
    s->holds[k].n.fetch_sub(1, std::memory_order_seq_cst);
    if (side(k).load(std::memory_order_relaxed) != s) reclaim();
  }

  /// From a segment held on side k's count, the segment `id` (created as
  /// needed), held the same way; moves side k's pointer forward to it (if
  /// `move`) and reclaims. Drops `s`. Never returns a segment before `s`:
  /// with id < s's id it returns `s`.
  segment* walk(segment* s, std::uint64_t id, std::size_t k, bool move = true) {
    while (s->id.load(std::memory_order_acquire) < id) {
      segment* n = s->next.load(std::memory_order_acquire);
      if (n == nullptr) {
        segment* fresh = allocate(s->id.load(std::memory_order_relaxed) + 1);
        if (s->next.compare_exchange_strong(n, fresh, std::memory_order_acq_rel)) {
          n = fresh;
        } else {
          release(fresh);  // another operation linked one first: ours goes back for reuse
        }
      }
      // `s` is held, so reclamation stops at or before it: `n` is safe to hold.
      n->holds[k].n.fetch_add(1, std::memory_order_seq_cst);
      s->holds[k].n.fetch_sub(1, std::memory_order_seq_cst);
      s = n;
    }
    if (!move) return s;
    std::atomic<segment*>* ptr = &side(k);
    bool moved = false;
    for (segment* cur = ptr->load(std::memory_order_acquire);
         cur->id.load(std::memory_order_acquire) < s->id.load(std::memory_order_relaxed);) {
      if (ptr->compare_exchange_weak(cur, s, std::memory_order_seq_cst)) {
        moved = true;
        break;
      }
    }
    if (moved) reclaim();
    return s;
  }

  /// The held segment and the cell of index `i`, walking from `held` (from
  /// hold(k), called *before* `i` was taken from its counter, so that it is
  /// not past i's) and moving side k's pointer forward. A null cell: i's
  /// segment was removed (all its cells cancelled); the segment returned,
  /// held, is the next live one.
  std::pair<segment*, Cell*> at(segment* held, std::uint64_t i, std::size_t k) {
    segment* s = walk(held, i / N, k);
    if (s->id.load(std::memory_order_relaxed) != i / N) return {s, nullptr};
    return {s, &s->cells[i % N]};
  }

  /// Reports one more cancelled cell of `s` (held by the caller; each cell
  /// at most once). The N-th asks for the segment's removal.
  void cancelled(segment* s) noexcept {
    if (s->cancelled.fetch_add(1, std::memory_order_acq_rel) + 1 == N) {
      removable_.fetch_add(1, std::memory_order_seq_cst);
      reclaim();
    }
  }

  /// Segments allocated and not reclaimed (for tests of the reclamation).
  std::size_t live_segments() const noexcept { return live_.load(std::memory_order_relaxed); }

  /// Visits every cell of every segment not reclaimed, oldest first, as
  /// fn(index, cell). Only with no operation running (destructors).
  template <class Fn>
  void for_each_quiescent(Fn&& fn) {
    for (segment* s = first_; s != nullptr; s = s->next.load(std::memory_order_relaxed)) {
      for (std::size_t k = 0; k < N; ++k)
        fn(s->id.load(std::memory_order_relaxed) * N + k, s->cells[k]);
    }
  }

 private:
  segment* allocate(std::uint64_t id) {
    segment* s = pop_free();
    if (s == nullptr) {
      s = new segment;
      if ((reinterpret_cast<std::uintptr_t>(s) & ~kAddressBits) != 0) {
        misuse_abort(
            "tessera::detail::segment_list: a segment's address does not fit in 48 bits, "
            "which the free list's tagged head needs");
      }
    }
    s->free_next = nullptr;
    s->retired.store(false, std::memory_order_relaxed);
    s->cancelled.store(0, std::memory_order_relaxed);
    s->next.store(nullptr, std::memory_order_relaxed);
    for (auto& c : s->cells) c.reset();
    s->id.store(id, std::memory_order_relaxed);
    live_.fetch_add(1, std::memory_order_relaxed);
    return s;  // published by the release CAS that links it
  }

  void reclaim() noexcept {
    // One reclaimer at a time; a call that finds another at work leaves it a
    // request, which it sees before it goes (so no pointer move is missed).
    reclaim_wanted_.store(true, std::memory_order_seq_cst);
    while (reclaim_wanted_.load(std::memory_order_seq_cst) && reclaim_lock_.try_lock()) {
      reclaim_wanted_.store(false, std::memory_order_seq_cst);
      reclaim_locked();
      reclaim_lock_.unlock();
    }
  }
  void reclaim_locked() noexcept {
    // Under reclaim_lock_: the pointers' segments cannot be reclaimed but by us.
    std::uint64_t passed = ~std::uint64_t{0};
    for (std::size_t k = 0; k < active_; ++k) {
      passed = std::min(passed, sides_[k].p.load(std::memory_order_seq_cst)->id.load());
    }
    if (removable_.load(std::memory_order_seq_cst) != 0) unlink_cancelled();
    // One scan in id order over the chain from first_ and the retired list,
    // stopping at the first held segment (holding a segment protects every
    // later one). Live segments go oldest first, while every side has passed
    // them; retired ones once no side's pointer can lead to them.
    segment* live = first_;
    segment** retired_link = &retired_;
    bool in_order = true;
    while (live != nullptr || *retired_link != nullptr) {
      segment* r = *retired_link;
      const bool take_retired = r != nullptr && (live == nullptr || r->id < live->id);
      segment* x = take_retired ? r : live;
      if (x->held()) break;
      if (take_retired) {
        if (unreachable(r)) {
          *retired_link = r->free_next;
          release(r);
        } else {
          retired_link = &r->free_next;
        }
      } else {
        segment* next = live->next.load(std::memory_order_seq_cst);
        if (in_order && live->id.load(std::memory_order_relaxed) < passed) {
          // All cancelled but reclaimed in order before it was unlinked: its
          // removal is no longer wanted.
          if (live->cancelled.load(std::memory_order_acquire) == N) {
            removable_.fetch_sub(1, std::memory_order_relaxed);
          }
          first_ = next;
          release(live);
        } else {
          in_order = false;
          if (*retired_link == nullptr) break;  // nothing more to gain
        }
        live = next;
      }
    }
  }
  /// Unlinks every segment whose cells are all cancelled, but the newest and
  /// those a side's pointer names (reclaim_lock_ held: only we change a next
  /// pointer that is not null).
  void unlink_cancelled() noexcept {
    segment* prev = nullptr;
    for (segment* s = first_; s != nullptr;) {
      segment* next = s->next.load(std::memory_order_seq_cst);
      if (next == nullptr || s->cancelled.load(std::memory_order_acquire) != N || named(s)) {
        prev = s;
        s = next;
        continue;
      }
      if (prev == nullptr) {
        first_ = next;
      } else {
        prev->next.store(next, std::memory_order_seq_cst);
      }
      s->retired.store(true, std::memory_order_relaxed);
      segment** link = &retired_;  // kept in id order
      while (*link != nullptr && (*link)->id < s->id) link = &(*link)->free_next;
      s->free_next = *link;
      *link = s;
      removable_.fetch_sub(1, std::memory_order_relaxed);
      s = next;
    }
  }
  bool named(const segment* s) const noexcept {
    for (std::size_t k = 0; k < active_; ++k) {
      if (sides_[k].p.load(std::memory_order_seq_cst) == s) return true;
    }
    return false;
  }
  /// No side's pointer names a retired segment at or before `r` (checked
  /// after the scan found none up to r held).
  bool unreachable(const segment* r) const noexcept {
    for (std::size_t k = 0; k < active_; ++k) {
      const segment* p = sides_[k].p.load(std::memory_order_seq_cst);
      if (p->retired.load(std::memory_order_relaxed) &&
          p->id.load(std::memory_order_relaxed) <= r->id)
        return false;
    }
    return true;
  }
  /// Puts `s` (reclaimed, or allocated and never linked) on the free list.
  void release(segment* s) noexcept {
    live_.fetch_sub(1, std::memory_order_relaxed);
    std::uintptr_t head = free_.load(std::memory_order_relaxed);
    do {
      s->free_link.store(address_of(head), std::memory_order_relaxed);
    } while (!free_.compare_exchange_weak(head, changed(head, s), std::memory_order_release,
                                          std::memory_order_relaxed));
  }
  /// A segment from the free list, or null if it is empty.
  segment* pop_free() noexcept {
    std::uintptr_t head = free_.load(std::memory_order_acquire);
    for (;;) {
      segment* top = address_of(head);
      if (top == nullptr) return nullptr;
      // If `top` was popped (and even reused) since `head` was read, this
      // link is stale, and the CAS fails: the head's count has moved on.
      segment* next = top->free_link.load(std::memory_order_relaxed);
      if (free_.compare_exchange_weak(head, changed(head, next), std::memory_order_acquire,
                                      std::memory_order_acquire)) {
        return top;
      }
    }
  }

  // The free list's head word: the top segment's address in bits 6-47, and
  // the count of changes in bits 0-5 and 48-63.
  static constexpr std::uintptr_t kAddressBits = 0x0000'FFFF'FFFF'FFC0;
  static_assert(sizeof(std::uintptr_t) == 8, "the free list's tagged head needs 64-bit words");
  static segment* address_of(std::uintptr_t head) noexcept {
    return reinterpret_cast<segment*>(head & kAddressBits);
  }
  /// The head word after `head`, with `top` on top and the count one more.
  static std::uintptr_t changed(std::uintptr_t head, segment* top) noexcept {
    const std::uintptr_t count = ((head >> 48) << 6 | (head & 63)) + 1;
    return reinterpret_cast<std::uintptr_t>(top) | (count & 63) | ((count >> 6) << 48);
  }

  struct alignas(64) side_ptr {
    std::atomic<segment*> p;
  };
  side_ptr sides_[Sides];
  const std::size_t active_;
  alignas(64) std::atomic<std::size_t> live_{0};
  spin_lock reclaim_lock_;  // one reclaimer at a time; only tried
  std::atomic<bool> reclaim_wanted_{false};
  std::atomic<std::size_t> removable_{0};  // segments all cancelled, not yet unlinked
  segment* first_ = nullptr;               // the oldest live segment; guarded by reclaim_lock_
  segment* retired_ = nullptr;             // unlinked, in id order; guarded by reclaim_lock_
  std::atomic<std::uintptr_t> free_{0};    // reclaimed segments for reuse: the tagged head
};

}  // namespace tessera::detail
