// The condition variables' queue of parked callers (see detail/waiter_queue.h).
#include "tessera/detail/waiter_queue.h"

#include <vector>

namespace tessera::detail {

void waiter_queue::push(node& n) noexcept {
  lock();
  n.next = nullptr;
  n.prev = tail_;
  if (tail_ != nullptr) {
    tail_->next = &n;
  } else {
    head_.store(&n, std::memory_order_relaxed);
  }
  tail_ = &n;
  unlock();
}

void waiter_queue::unlink(node& n) noexcept {
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

bool waiter_queue::remove(node& n) noexcept {
  lock();
  const bool queued = !n.woken.load(std::memory_order_relaxed);
  if (queued) unlink(n);
  unlock();
  return queued;
}

bool waiter_queue::wake_one(const void* key) noexcept {
  lock();
  node* n = head_.load(std::memory_order_relaxed);
  while (n != nullptr && key != nullptr && n->key != key) n = n->next;
  waiter* who = nullptr;
  if (n != nullptr) {
    unlink(*n);
    who = n->who;  // before the store: the node may die once its owner sees it
    n->woken.store(true, std::memory_order_release);
  }
  unlock();
  unpark(who);  // null is ignored
  return who != nullptr;
}

int waiter_queue::wake_all(const void* key) noexcept {
  // Collect identities under the lock, unpark after it (unpark may switch fibers).
  waiter* local[16];
  std::vector<waiter*> more;
  int count = 0;
  lock();
  for (node* n = head_.load(std::memory_order_relaxed); n != nullptr;) {
    node* next = n->next;
    if (key == nullptr || n->key == key) {
      unlink(*n);
      waiter* who = n->who;
      n->woken.store(true, std::memory_order_release);
      if (count < 16) {
        local[count] = who;
      } else {
        try {
          more.push_back(who);
        } catch (...) {
          unpark(who);  // out of memory: wake it right here rather than lose it
        }
      }
      ++count;
    }
    n = next;
  }
  unlock();
  for (int i = 0; i < count && i < 16; ++i) unpark(local[i]);
  for (waiter* w : more) unpark(w);
  return count;
}

bool waiter_queue::await(node& n, const std::chrono::steady_clock::time_point* deadline) {
  while (!n.woken.load(std::memory_order_acquire)) {
    if (deadline == nullptr) {
      park();
    } else if (!park_until(*deadline) && !n.woken.load(std::memory_order_acquire)) {
      if (remove(n)) return false;  // timed out and left the queue
      // woken just as we timed out: the notification is ours, keep it
    }
  }
  return true;
}

}  // namespace tessera::detail
