// counting_semaphore's admission::handoff core (tessera/detail/handoff_semaphore.h).
//
// Why a lock, and why it is cheap here
//   A hand-off between two parties is the hot path of a binary semaphore used
//   as a signal. The TWA semaphore pays six locked read-modify-writes for it:
//   the ticket and the grant fetch-and-adds, the waiter's and the releaser's
//   exchanges on the waiting chain, and park's own two. The count and the
//   queue under one lock need four: the lock on each side, and park's two
//   (the unlock is a plain store). The lock is held for a few instructions and
//   never across a park or an unpark, and a fiber that finds it held backs off
//   as every primitive's lock does (tessera/detail/spin_lock.h).
//
// Timeouts
//   A waiter whose deadline passes takes its node off the queue under the lock
//   (await_taken); a release that handed it a permit first marked the node
//   under that same lock, so the waiter keeps the permit and reports success.
//   Nothing is lost either way, and a timed-out waiter leaves nobody's order
//   changed.
#include "tessera/detail/handoff_semaphore.h"

#include <tessera/detail/cpu.h>

#include "semaphore_errors.h"

namespace tessera::detail {

handoff_semaphore::~handoff_semaphore() {
#if TESSERA_CHECKS
  if (!queue_.empty()) destroyed_with_waiters();
#endif
}

std::ptrdiff_t handoff_semaphore::waiting() const noexcept {
  lock_.lock();
  const std::size_t k = queue_.size();
  lock_.unlock();
  return static_cast<std::ptrdiff_t>(k);
}

void handoff_semaphore::bad_update(std::ptrdiff_t update, std::ptrdiff_t max) const {
  throw_bad_update(update, max);
}

void handoff_semaphore::past_max(std::ptrdiff_t update, std::int64_t count, std::ptrdiff_t max) {
  lock_.unlock();
  throw_past_max(static_cast<std::uint64_t>(update), count, max, "");
}

bool handoff_semaphore::queue_and_wait(detail::deadline deadline) {
  if (deadline.passed()) {
    lock_.unlock();
    return false;
  }
  park_node n;
  n.who = self();
  // An OS thread polls its node first (poll_then_await): a hand-off coming
  // within microseconds then costs neither side a futex call, nor the
  // releaser an unpark.
  queue_.push_back_polling(n);
  lock_.unlock();
  const wait_scope scope(n.who, "counting_semaphore", this);
  // Timed out: the node has left the queue under the lock, unless a release
  // marked it first (then the permit is ours).
  return poll_then_await(n, deadline, lock_, queue_, kPollNanos) != park_mark::none;
}

void handoff_semaphore::hand_off(std::ptrdiff_t update, std::ptrdiff_t max) noexcept {
  // Whom to unpark: collected under the lock, unparked after it (an unpark may
  // switch fibers), a batch at a time.
  constexpr int kBatch = 16;
  waiter* wake[kBatch];
  std::ptrdiff_t left = update;
  for (;;) {
    int woken = 0;
    while (left > 0 && woken < kBatch && !queue_.empty()) {
      if (waiter* const who = take_oldest()) wake[woken++] = who;
      --left;
    }
    if (left > 0 && queue_.empty()) {
      const std::int64_t count = count_.load(std::memory_order_relaxed);
      // release() checked the count against max() before the first batch; only
      // racing releases (a misuse) can overshoot it since.
      if (TESSERA_CHECKS && count > max - left) {
        lock_.unlock();
        misuse_abort(
            "tessera::counting_semaphore::release: count exceeded max() (racing releases)");
      }
      count_.store(count + left, std::memory_order_relaxed);
      left = 0;
    }
    lock_.unlock();
    for (int i = 0; i < woken; ++i) unpark(wake[i]);
    if (left == 0) return;
    lock_.lock();
  }
}

}  // namespace tessera::detail
