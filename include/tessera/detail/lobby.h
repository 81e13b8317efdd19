// tessera/detail/lobby.h — the lobby of a concurrency-restricted semaphore
// (admission::restricted in front of the TWA semaphore's tickets,
// admission::faa_restricted in front of the FAA semaphore's queue): a FIFO of
// parked callers that hold no place in the queue yet, under a spin lock.
//
// The owner decides who joins (a caller that finds the queue full) and what
// "a free permit" and "progress" are; the lobby calls its oldest members in
// for free permits, keeps the oldest's fairness timer, and lets a member leave
// at its deadline. How each owner uses it, and the Dekker pairs between its
// release and the lobby's count: sync/semaphore.cpp and sync/faa_semaphore.cpp
// (model-checked in tests/model/lobby.pml and tests/model/faa_lobby.pml).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "tessera/detail/deadline.h"
#include "tessera/detail/park_list.h"
#include "tessera/detail/spin_lock.h"
#include "tessera/park.h"

namespace tessera::detail {

class admission_lobby {
 public:
  enum class exit {
    admitted,  ///< called in for a free permit: take a place in the queue, then entered()
    forced,    ///< oldest for a fairness interval: took its place under the lock (take_forced)
    timed_out  ///< the deadline passed in the lobby: holds nothing
  };

  constexpr admission_lobby() = default;
  admission_lobby(const admission_lobby&) = delete;
  admission_lobby& operator=(const admission_lobby&) = delete;

  /// Callers in the lobby. seq_cst: the load half of the owner's Dekker pair
  /// "RMW the count; LD the lobby" (release) against wait()'s "RMW the lobby;
  /// LD the count" (admit).
  std::uint32_t size() const noexcept { return count_.load(std::memory_order_seq_cst); }

  /// A member that left the lobby `how` (called in or forced) has taken its
  /// place in the queue. Called in, its permit no longer counts as promised;
  /// an admit() that saw both counts undercounted the free permits, so this
  /// one looks again (and calls in for any permit still free).
  template <class FreePermits>
  void entered(exit how, FreePermits free_permits) noexcept {
    if (how == exit::admitted) entering_.fetch_sub(1, std::memory_order_seq_cst);
    if (size() != 0) admit(free_permits);
  }

  /// Calls in as many of the oldest members as `free_permits()` (read under
  /// the lock, seq_cst) exceeds the permits promised to members on their way
  /// in, in batches so that the unparks run outside the lock; then unparks the
  /// new oldest, which starts its fairness timer.
  template <class FreePermits>
  void admit(FreePermits free_permits) noexcept {
    constexpr int kBatch = 16;
    for (;;) {
      waiter* called[kBatch];
      int k = 0;
      lock_.lock();
      const std::int64_t free = free_permits() - entering_.load(std::memory_order_seq_cst);
      while (k < kBatch && k < free) {
        park_node* oldest = list_.front();
        if (oldest == nullptr) break;
        leave(*oldest);
        entering_.fetch_add(1, std::memory_order_seq_cst);
        called[k++] = park_list::mark(*oldest, park_mark::woken);
      }
      waiter* next_who = k > 0 ? oldest() : nullptr;
      lock_.unlock();
      for (int i = 0; i < k; ++i) unpark(called[i]);
      if (next_who != nullptr) unpark(next_who);  // starts its fairness timer
      if (k < kBatch || next_who == nullptr) return;
    }
  }

  /// How long the oldest member waits before it is forced in, when it is an
  /// OS thread: 1 ms, as the mutex's fair hand-off, since each forced entry
  /// costs the circulating threads a futex wake and a context switch. A fiber
  /// waits kFiberHandoffInterval (fairness_interval()).
  static constexpr std::chrono::microseconds kThreadFairness{1000};

  /// Joins the lobby (then admit()s, for a permit freed before the join was
  /// seen) and parks until called in, forced in, or `d` passes. Only the
  /// oldest member keeps a timer: once it has been oldest for
  /// fairness_interval(who, kThreadFairness) and `progress()` (a monotonic
  /// count of hand-offs) moved meanwhile, it leaves, and `take_forced()` runs
  /// under the lock, so that no later member can take its place before it;
  /// not while older members called in are still entering. `kind`/`object`:
  /// the wait record.
  template <class FreePermits, class Progress, class TakeForced>
  exit wait(deadline d, const char* kind, const void* object, FreePermits free_permits,
            Progress progress, TakeForced take_forced) {
    const wait_scope scope(kind, object);
    using clock = std::chrono::steady_clock;
    park_node n;
    n.who = self();
    lock_.lock();
    list_.push_back(n);
    count_.fetch_add(1, std::memory_order_seq_cst);  // the owner's Dekker pair
    lock_.unlock();
    admit(free_permits);

    const clock::duration fairness = fairness_interval(*n.who, kThreadFairness);
    bool head = false;
    clock::time_point head_since{};
    std::uint64_t progress_then = 0;
    for (;;) {
      if (n.mark.load(std::memory_order_acquire) != park_mark::none) return exit::admitted;
      // Whoever takes the oldest out unparks the next, which starts its own
      // timer (front() is a lock-free hint).
      if (!head && list_.front() == &n) {
        head = true;
        head_since = steady_now();
        progress_then = progress();
      }
      const clock::time_point forced_at = head ? head_since + fairness : clock::time_point::max();
      const clock::time_point wake_at = d.earlier(forced_at).value_or_max();
      if (wake_at == clock::time_point::max()) {
        park();
        continue;
      }
      if (park_until(wake_at)) continue;
      const auto now = steady_now();
      const bool expired = d.passed(now);
      if (!expired && now < forced_at) continue;
      if (!expired && progress() == progress_then) {
        // Oldest for `fairness`, and nobody was served meanwhile: nobody
        // passed us (the holders just hold), so stay and look again.
        head_since = now;
        continue;
      }
      lock_.lock();
      if (n.mark.load(std::memory_order_acquire) != park_mark::none) {  // called in meanwhile
        lock_.unlock();
        return exit::admitted;
      }
      if (!expired && entering_.load(std::memory_order_seq_cst) != 0) {
        // Older members, called in for free permits, are on their way in: a
        // place taken now would pass them.
        lock_.unlock();
        head_since = now;
        progress_then = progress();
        continue;
      }
      const bool was_front = list_.front() == &n;
      leave(n);
      if (!expired) take_forced();
      waiter* next_who = was_front ? oldest() : nullptr;
      lock_.unlock();
      if (next_who != nullptr) unpark(next_who);  // starts its fairness timer
      return expired ? exit::timed_out : exit::forced;
    }
  }

 private:
  // Under lock_: takes `n` off the list and out of the count.
  void leave(park_node& n) noexcept {
    list_.unlink(n);
    count_.fetch_sub(1, std::memory_order_seq_cst);
  }
  // Under lock_: the oldest member now, or null.
  waiter* oldest() const noexcept {
    const park_node* f = list_.front();
    return f != nullptr ? f->who : nullptr;
  }

  std::atomic<std::uint32_t> count_{0};  // changed under lock_
  // Members called in (each for a free permit) that have not entered yet:
  // changed under lock_ (+) and by the member itself (-).
  std::atomic<std::int64_t> entering_{0};
  alignas(64) spin_lock lock_;
  park_list list_;  // guarded by lock_
};

}  // namespace tessera::detail
