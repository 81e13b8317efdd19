// The condition variables' queue of parked callers (see detail/waiter_queue.h).
#include "tessera/detail/waiter_queue.h"

#include <vector>

namespace tessera::detail {

void waiter_queue::push(keyed_park_node& n) noexcept {
  lock();
  list_.push_back(n);
  unlock();
}

bool waiter_queue::remove(keyed_park_node& n) noexcept {
  lock();
  const bool queued = n.mark.load(std::memory_order_relaxed) == park_mark::none;
  if (queued) list_.unlink(n);
  unlock();
  return queued;
}

bool waiter_queue::wake_one(const void* key) noexcept {
  lock();
  auto* n = static_cast<keyed_park_node*>(list_.front());
  while (n != nullptr && key != nullptr && n->key != key)
    n = static_cast<keyed_park_node*>(n->next);
  waiter* who = n != nullptr ? list_.take(*n, park_mark::woken) : nullptr;
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
  for (auto* n = static_cast<keyed_park_node*>(list_.front()); n != nullptr;) {
    auto* next = static_cast<keyed_park_node*>(n->next);
    if (key == nullptr || n->key == key) {
      waiter* who = list_.take(*n, park_mark::woken);
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

bool waiter_queue::await(keyed_park_node& n, detail::deadline deadline) {
  // Woken just as it timed out: the notification is ours, keep it.
  return await_taken(n, deadline, lock_, list_, [] {}) != park_mark::none;
}

bool waiter_queue::await(keyed_park_node& n, detail::deadline deadline,
                         const std::stop_token& stop) {
  // The stop flag is set before the callbacks run, and the callback's unpark
  // leaves a permit: a request landing after the check makes park() return.
  return await_taken(
             n, deadline, lock_, list_, [] {}, [&stop] { return stop.stop_requested(); }) !=
         park_mark::none;
}

}  // namespace tessera::detail
