// shared_timed_mutex (see tessera/shared_timed_mutex.h for the box office).
#include "tessera/shared_timed_mutex.h"

#include <string>

namespace tessera {

struct shared_timed_mutex::node : detail::park_node {
  bool shared = false;
};

shared_timed_mutex::~shared_timed_mutex() {
#if TESSERA_CHECKS
  if (state_.load() != 0 || !queue_.empty()) {
    detail::misuse_abort((std::string(type_) + " destroyed while locked or with waiters").c_str());
  }
#endif
}

// Under lock_, with the queue empty or the caller at its head: take the lock if
// it is free for this kind of caller. Queue state is the caller's business.
bool shared_timed_mutex::try_grant_locked(bool shared) noexcept {
  std::uint64_t s = state_.load(std::memory_order_relaxed);
  for (;;) {
    const bool free = shared ? (s & kWriter) == 0 : (s & (kWriter | kReaders)) == 0;
    if (!free) return false;
    const std::uint64_t next = shared ? s + 1 : s | kWriter;
    if (state_.compare_exchange_weak(s, next, std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
      return true;
    }
  }
}

bool shared_timed_mutex::acquire(bool shared, const std::chrono::steady_clock::time_point* deadline) {
  node n;
  n.who = self();
  n.shared = shared;
  lock_.lock();
  if (queue_.empty() && try_grant_locked(shared)) {
    lock_.unlock();
    return true;
  }
  // Queue, and announce it: from now on nobody takes a fast path.
  queue_.push_back(n);
  state_.fetch_or(kQueued, std::memory_order_relaxed);
  dispatch();  // the lock may have been released meanwhile
  lock_.unlock();

  // Granted as it timed out: it keeps the lock.
  return detail::await_taken(n, deadline, lock_, queue_, [this] {
           if (queue_.empty()) state_.fetch_and(~kQueued, std::memory_order_relaxed);
           dispatch();  // a writer leaving the head may let the readers behind it in
         }) != 0;
}

void shared_timed_mutex::dispatch() noexcept {
  while (!queue_.empty()) {
    auto& n = static_cast<node&>(*queue_.front());
    if (!try_grant_locked(n.shared)) return;
    queue_.unlink(n);
    if (queue_.empty()) state_.fetch_and(~kQueued, std::memory_order_relaxed);
    const bool shared = n.shared;  // before the mark: the node dies once its owner sees it
    unpark(detail::park_list::mark(n, 1));
    if (!shared) return;  // a writer goes alone; readers continue the batch
  }
}

void shared_timed_mutex::unlock() {
  std::uint64_t expected = kWriter;
  if (state_.compare_exchange_strong(expected, 0, std::memory_order_release,
                                     std::memory_order_relaxed)) {
    return;
  }
#if TESSERA_CHECKS
  if ((expected & kWriter) == 0) {
    detail::misuse_abort((std::string(type_) + "::unlock: the lock is not held exclusively").c_str());
  }
#endif
  lock_.lock();
  state_.fetch_and(~kWriter, std::memory_order_release);
  dispatch();
  lock_.unlock();
}

void shared_timed_mutex::unlock_shared() {
  const std::uint64_t s = state_.fetch_sub(1, std::memory_order_release);
#if TESSERA_CHECKS
  if ((s & kReaders) == 0) {
    detail::misuse_abort((std::string(type_) + "::unlock_shared: the lock is not held shared").c_str());
  }
#endif
  if ((s & kReaders) == 1 && (s & kQueued) != 0) {  // the last reader out, with waiters
    lock_.lock();
    dispatch();
    lock_.unlock();
  }
}

}  // namespace tessera
