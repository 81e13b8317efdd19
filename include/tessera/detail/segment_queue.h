// tessera/detail/segment_queue.h — the segment queue synchronizer behind
// admission::faa (Koval & Elizarov, "Dual Data Structures. Fast Semaphore.";
// the published form is Koval, Khalanskiy & Alistarh, "CQS: A
// Formally-Verified Framework for Fair and Abortable Synchronization", PLDI
// 2023).
//
// An infinite array of cells, reached by fetch-and-add on two indices and
// allocated in segments of kSegmentCells: suspend() takes the next cell of the
// enqueue side and waits in it; resume() takes the next cell of the dequeue
// side and hands over to whoever waits there. Both sides count the same cells,
// so the k-th resume meets the k-th suspend: FIFO, with no lock on any path.
//
// Cell states (one word):
//
//   EMPTY      neither side has come
//   waiter*    a suspend() waits here, parked
//   hand-over  resume() came first and left what it hands over — PERMIT, or an
//              element (a pointer with its low bit set, for the blocking pool):
//              asynchronous resumption; the suspend() that comes takes it
//              without parking. resume() into a waiter's cell leaves it there
//              too, and unparks the waiter, which reads it.
//   TAKEN      suspend() took the hand-over it found (CAS hand-over → TAKEN)
//   CANCELLED  the waiter gave up (deadline or stop request): CAS waiter* → CANCELLED
//   BROKEN     a synchronous resume() found no waiter and gave up: CAS EMPTY → BROKEN
//
//   suspend: CAS EMPTY → me, park until the cell is no longer me; at the
//            deadline or a stop request CAS me → CANCELLED (0), failing that a
//            hand-over is there (returned). Or a hand-over is there already:
//            returned at once.
//   resume:  CAS EMPTY → hand-over (true), or CAS waiter* → hand-over and
//            unpark (true); a CANCELLED cell returns false and the hand-over
//            stays with the caller, who retries ("simple cancellation", as
//            kotlinx's Semaphore — see sync/segment_queue.cpp).
//
// Resumption (CQS's two modes, chosen per resume()):
//   async    as above: a resume() that comes first leaves its hand-over in
//            the EMPTY cell and returns; the suspender takes it on arrival.
//            The hand-over is then in no one's hands for a while: an
//            operation that looks at the user's state in between does not
//            see it (counting_semaphore under admission::faa takes this
//            mode: a permit carries nothing, and a release never waits).
//   sync     a resume() that finds the cell EMPTY waits up to kSyncSpins
//            PAUSEs for its suspender to arrive; if none does, it breaks the
//            cell (BROKEN) and returns false with the hand-over, and the
//            suspender that comes later finds BROKEN, gets kBroken and starts
//            its operation over. So a resume() returns true only once the
//            hand-over is in a waiter's hands (blocking_pool takes this mode:
//            an element never waits in a cell, unseen by try_take()).
//
// The cells live in a segment_list (tessera/detail/segment_list.h): segments
// reclaimed oldest first once both indices have passed them and no operation
// holds them, and a segment whose cells are all cancelled or broken removed
// from the middle of the list (a resume whose index falls there fails as at
// a cancelled cell). The cells, the reclamation and the removal are
// model-checked in tests/model/segment_queue.pml.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stop_token>

#include "tessera/detail/deadline.h"
#include "tessera/detail/segment_list.h"

namespace tessera {
class waiter;
}

namespace tessera::detail {

class segment_queue {
 public:
  static constexpr std::size_t kSegmentCells = 32;
  /// PAUSE iterations an OS thread next in line spins before it parks.
  static constexpr std::uint32_t kSpins = 1024;
  /// PAUSE iterations a synchronous resume() waits for its suspender.
  static constexpr std::uint32_t kSyncSpins = 256;

  enum class resume_mode { async, sync };

  segment_queue() = default;
  segment_queue(const segment_queue&) = delete;
  segment_queue& operator=(const segment_queue&) = delete;

  /// Waits in the next cell until a resume() hands over, until `d`, or until
  /// `stop` (if given) is requested. Returns the hand-over (the caller owns
  /// it), or 0: timed out or stopped, the cell cancelled, nothing handed to
  /// this caller, or kBroken: a synchronous resume() gave up on this cell
  /// before the caller came, and the caller starts its operation over.
  /// `kind`/`object`: the wait record (runtime::dump).
  std::uintptr_t suspend(deadline d, const char* kind, const void* object,
                         const std::stop_token* stop = nullptr);
  /// Hands `handover` (kPermit, or an element pointer with its low bit set)
  /// to the next cell's waiter, or (async) leaves it for the suspend() on its
  /// way. False: that cell was cancelled, or (sync) its suspender did not
  /// come in time and the cell is broken; nothing was handed over.
  bool resume(std::uintptr_t handover = kPermit, resume_mode mode = resume_mode::async);

  /// Waiters parked right now (racy snapshot).
  std::ptrdiff_t parked() const noexcept { return parked_.load(std::memory_order_relaxed); }
  /// Cells resume() has reached so far: monotonic, a progress hint (relaxed).
  std::uint64_t resumes() const noexcept { return deq_.load(std::memory_order_relaxed); }
  /// Segments allocated and not reclaimed (for tests of the reclamation).
  std::size_t live_segments() const noexcept { return cells_.live_segments(); }

  static constexpr std::uintptr_t kEmpty = 0, kPermit = 1, kTaken = 2, kCancelled = 3;
  static constexpr std::uintptr_t kBroken = 5;  // odd, below every element pointer
  /// An element pointer `p` (aligned to 2 at least) as a hand-over, and back.
  static std::uintptr_t element(const void* p) noexcept {
    return reinterpret_cast<std::uintptr_t>(p) | 1;
  }
  template <class E>
  static E* element_of(std::uintptr_t handover) noexcept {
    return reinterpret_cast<E*>(handover & ~std::uintptr_t{1});
  }

 private:
  struct word_cell {
    std::atomic<std::uintptr_t> word{kEmpty};
    void reset() noexcept { word.store(kEmpty, std::memory_order_relaxed); }
  };
  using list = segment_list<word_cell, kSegmentCells>;

  list cells_;
  alignas(64) std::atomic<std::uint64_t> enq_{0};
  alignas(64) std::atomic<std::uint64_t> deq_{0};
  alignas(64) std::atomic<std::ptrdiff_t> parked_{0};
};

}  // namespace tessera::detail
