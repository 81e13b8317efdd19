// tessera/detail/park_list.h — the intrusive FIFO of parked callers that every
// queue-based bouncer shares (mutexes, reader-writer lock, condition variables),
// and the park-until-taken loop with timed withdrawal.
#pragma once

#include <atomic>
#include <chrono>

#include "tessera/park.h"

namespace tessera::detail {

/// One parked caller, on its own stack. `woken` is 0 while the node is on a
/// list; whoever takes it off stores a non-zero value saying what it was given.
/// Owners derive from it to carry their own fields.
struct park_node {
  waiter* who = nullptr;
  park_node* next = nullptr;
  park_node* prev = nullptr;
  std::atomic<int> woken{0};
};

/// A doubly linked FIFO of park_nodes. Not synchronized: the owner guards it
/// with its own lock, and takes nodes off and marks them under that lock, so a
/// waiter that finds its node unmarked under the lock knows it is still queued.
class park_list {
 public:
  /// Racy outside the lock (a hint); exact under it.
  bool empty() const noexcept { return head_.load(std::memory_order_relaxed) == nullptr; }
  park_node* front() const noexcept { return head_.load(std::memory_order_relaxed); }

  void push_back(park_node& n) noexcept {
    n.next = nullptr;
    n.prev = tail_;
    if (tail_ != nullptr) {
      tail_->next = &n;
    } else {
      head_.store(&n, std::memory_order_relaxed);
    }
    tail_ = &n;
  }
  void push_front(park_node& n) noexcept {
    n.prev = nullptr;
    n.next = front();
    if (n.next != nullptr) {
      n.next->prev = &n;
    } else {
      tail_ = &n;
    }
    head_.store(&n, std::memory_order_relaxed);
  }
  void unlink(park_node& n) noexcept {
    if (n.prev != nullptr) {
      n.prev->next = n.next;
    } else {
      head_.store(n.next, std::memory_order_relaxed);
    }
    if (n.next != nullptr) {
      n.next->prev = n.prev;
    } else {
      tail_ = n.prev;
    }
  }

  /// Marks an unlinked node with `how` (non-zero) and returns whom to unpark.
  /// The node may die as soon as the store lands: read everything else first.
  static waiter* mark(park_node& n, int how) noexcept {
    waiter* who = n.who;
    n.woken.store(how, std::memory_order_release);
    return who;
  }
  /// unlink + mark.
  waiter* take(park_node& n, int how) noexcept {
    unlink(n);
    return mark(n, how);
  }

 private:
  std::atomic<park_node*> head_{nullptr};  // atomic only for the lock-free empty() hint
  park_node* tail_ = nullptr;
};

/// Parks until `n` is taken and returns the value it was marked with. With a
/// deadline, once it passes: under `lock`, if `n` is still on `list` it leaves
/// it, runs `on_left()` (still under the lock) and 0 is returned; a node taken
/// just as it timed out returns what it was given.
template <class Lock, class OnLeft>
int await_taken(park_node& n, const std::chrono::steady_clock::time_point* deadline, Lock& lock,
                park_list& list, OnLeft&& on_left) {
  for (;;) {
    if (const int v = n.woken.load(std::memory_order_acquire); v != 0) return v;
    if (deadline == nullptr) {
      park();
    } else if (!park_until(*deadline)) {
      lock.lock();
      const int v = n.woken.load(std::memory_order_acquire);
      if (v == 0) {
        list.unlink(n);
        on_left();
      }
      lock.unlock();
      return v;
    }
  }
}

}  // namespace tessera::detail
