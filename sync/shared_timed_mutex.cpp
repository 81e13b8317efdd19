// shared_timed_mutex (see tessera/shared_timed_mutex.h for the box office).
#include "tessera/shared_timed_mutex.h"

#include <string>

namespace tessera {

struct shared_timed_mutex::node {
  waiter* who;
  bool shared;
  node* next;
  std::atomic<bool> granted;
};

shared_timed_mutex::~shared_timed_mutex() {
#if TESSERA_CHECKS
  if (state_.load() != 0 || head_ != nullptr) {
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
  node n{self(), shared, nullptr, {false}};
  lock_.lock();
  if (head_ == nullptr && try_grant_locked(shared)) {
    lock_.unlock();
    return true;
  }
  // Queue, and announce it: from now on nobody takes a fast path.
  if (tail_ != nullptr) {
    tail_->next = &n;
  } else {
    head_ = &n;
  }
  tail_ = &n;
  state_.fetch_or(kQueued, std::memory_order_relaxed);
  dispatch();  // the lock may have been released meanwhile
  lock_.unlock();

  while (!n.granted.load(std::memory_order_acquire)) {
    if (deadline == nullptr) {
      park();
    } else if (!park_until(*deadline) && !n.granted.load(std::memory_order_acquire)) {
      lock_.lock();
      if (n.granted.load(std::memory_order_relaxed)) {  // granted as we timed out: keep it
        lock_.unlock();
        return true;
      }
      node* prev = nullptr;
      for (node* p = head_; p != &n; p = p->next) prev = p;
      (prev != nullptr ? prev->next : head_) = n.next;
      if (tail_ == &n) tail_ = prev;
      if (head_ == nullptr) state_.fetch_and(~kQueued, std::memory_order_relaxed);
      dispatch();  // a writer leaving the head may let the readers behind it in
      lock_.unlock();
      return false;
    }
  }
  return true;
}

void shared_timed_mutex::dispatch() noexcept {
  while (head_ != nullptr) {
    node* n = head_;
    if (!try_grant_locked(n->shared)) return;
    head_ = n->next;
    if (head_ == nullptr) {
      tail_ = nullptr;
      state_.fetch_and(~kQueued, std::memory_order_relaxed);
    }
    // Read what we need before the store: the node dies once its owner sees it.
    waiter* who = n->who;
    const bool shared = n->shared;
    n->granted.store(true, std::memory_order_release);
    unpark(who);
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
