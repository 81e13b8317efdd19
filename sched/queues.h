// sched/queues.h — the run queues: a Chase–Lev work-stealing deque per worker,
// an MPSC inbox per worker for wake-ups from other threads, and the runtime's
// global FIFO (overflow, yields). All intrusive or pointer-only: no allocation
// on the scheduling path.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "tessera/detail/basic_spin_lock.h"

namespace tessera::sched {

/// The lock of the global FIFO: a spin lock (cheaper than std::mutex
/// uncontended; the yield path crosses it twice per yield) that yields the OS
/// thread when contended (never the fiber path of yield_now(): it is held on a
/// worker's scheduling path).
using spin_mutex = detail::basic_spin_lock<&detail::os_yield>;

/// Chase & Lev's work-stealing deque ("Dynamic circular work-stealing deque",
/// SPAA 2005) with the C11 orderings of Lê, Pop, Cohen & Zappa Nardelli (PPoPP
/// 2013), fixed capacity. The owner pushes and takes at the bottom (LIFO: the
/// newest fiber runs first, so a fiber tree is explored depth-first and few
/// fibers are alive at once); thieves steal the oldest at the top. Where the
/// paper uses fences we use seq_cst on the access itself (same effect on x86,
/// and ThreadSanitizer understands it).
template <class T, std::size_t Capacity = 4096>
class chase_lev_deque {
  static_assert((Capacity & (Capacity - 1)) == 0, "capacity must be a power of two");

 public:
  /// Owner only. Returns false when full (the caller overflows elsewhere).
  bool push(T* item) noexcept {
    const std::int64_t b = bottom_.load(std::memory_order_relaxed);
    const std::int64_t t = top_.load(std::memory_order_acquire);
    if (b - t >= static_cast<std::int64_t>(Capacity)) return false;
    slots_[static_cast<std::size_t>(b) & (Capacity - 1)].store(item, std::memory_order_relaxed);
    bottom_.store(b + 1, std::memory_order_release);  // publishes the slot and *item
    return true;
  }

  /// Owner only: the newest item, or null.
  T* take() noexcept {
    // Empty at a glance: only we push, and top_ only grows, so a top_ at or
    // past our bottom_ stays so until our next push. Spares the fence when
    // there is nothing to take (a yield, a park with an empty deque).
    if (top_.load(std::memory_order_relaxed) >= bottom_.load(std::memory_order_relaxed)) {
      return nullptr;
    }
    const std::int64_t b = bottom_.load(std::memory_order_relaxed) - 1;
    bottom_.store(b, std::memory_order_seq_cst);  // Dekker with steal(): store bottom, load top
    std::int64_t t = top_.load(std::memory_order_seq_cst);
    if (t > b) {  // empty
      bottom_.store(b + 1, std::memory_order_relaxed);
      return nullptr;
    }
    T* item = slots_[static_cast<std::size_t>(b) & (Capacity - 1)].load(std::memory_order_relaxed);
    if (t == b) {  // last item: race the thieves for it
      if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                        std::memory_order_relaxed)) {
        item = nullptr;
      }
      bottom_.store(b + 1, std::memory_order_relaxed);
    }
    return item;
  }

  /// Any thread (the owner too, for fairness): the oldest item, or null if the
  /// deque is empty or a race was lost.
  T* steal() noexcept {
    std::int64_t t = top_.load(std::memory_order_seq_cst);
    const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
    if (t >= b) return nullptr;
    T* item = slots_[static_cast<std::size_t>(t) & (Capacity - 1)].load(std::memory_order_relaxed);
    if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                      std::memory_order_relaxed)) {
      return nullptr;
    }
    return item;
  }

  /// A racy hint for idle checks.
  bool looks_empty() const noexcept {
    return top_.load(std::memory_order_relaxed) >= bottom_.load(std::memory_order_relaxed);
  }
  /// How many items it holds, as a racy hint (the dump).
  std::size_t size_hint() const noexcept {
    const std::int64_t n =
        bottom_.load(std::memory_order_relaxed) - top_.load(std::memory_order_relaxed);
    return n > 0 ? static_cast<std::size_t>(n) : 0;
  }
  /// As looks_empty(), with seq_cst loads: for a re-check that must see a push
  /// made before the pusher's seq_cst look at the sleepers (Dekker).
  bool looks_empty_seq_cst() const noexcept {
    return top_.load(std::memory_order_seq_cst) >= bottom_.load(std::memory_order_seq_cst);
  }

 private:
  alignas(64) std::atomic<std::int64_t> top_{0};
  alignas(64) std::atomic<std::int64_t> bottom_{0};
  alignas(64) std::array<std::atomic<T*>, Capacity> slots_{};
};

/// Multi-producer, single-consumer inbox: a Treiber stack that the consumer
/// empties with one exchange and reverses into arrival order. Items link through
/// `T::link`.
template <class T>
class mpsc_inbox {
 public:
  /// Any thread. Returns true if the inbox was empty before (a hint).
  bool push(T* item) noexcept {
    T* head = head_.load(std::memory_order_relaxed);
    do {
      item->link = head;
    } while (!head_.compare_exchange_weak(head, item, std::memory_order_seq_cst,
                                          std::memory_order_relaxed));
    return head == nullptr;
  }
  /// Consumer only: everything pushed so far, oldest first, linked through `link`.
  T* take_all() noexcept {
    if (head_.load(std::memory_order_relaxed) == nullptr) return nullptr;
    T* list = head_.exchange(nullptr, std::memory_order_acquire);
    T* reversed = nullptr;
    while (list != nullptr) {
      T* next = list->link;
      list->link = reversed;
      reversed = list;
      list = next;
    }
    return reversed;
  }
  bool looks_empty() const noexcept { return head_.load(std::memory_order_seq_cst) == nullptr; }

 private:
  alignas(64) std::atomic<T*> head_{nullptr};
};

/// The runtime's global FIFO: a spin_mutex around an intrusive list, with a size
/// hint so empty checks take no lock. Receives fibers that yield (so a yielding
/// fiber goes behind everyone, as Go's Gosched does), deque overflow, and the
/// root fiber.
template <class T>
class global_fifo {
 public:
  void push(T* item) noexcept {
    item->link = nullptr;
    std::lock_guard lock(mu_);
    if (tail_ != nullptr) {
      tail_->link = item;
    } else {
      head_ = item;
    }
    tail_ = item;
    // Only lock holders change size_, so no RMW. A pusher that then looks
    // for sleepers does so after a seq_cst fence (fenced_load), which orders
    // this store before that look (the Dekker pair with idle()'s re-check).
    size_.store(size_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  T* pop() noexcept {
    if (size_.load(std::memory_order_relaxed) == 0) return nullptr;
    std::lock_guard lock(mu_);
    T* item = head_;
    if (item == nullptr) return nullptr;
    head_ = item->link;
    if (head_ == nullptr) tail_ = nullptr;
    size_.store(size_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    return item;
  }
  bool looks_empty() const noexcept { return size_.load(std::memory_order_seq_cst) == 0; }
  std::size_t size_hint() const noexcept { return size_.load(std::memory_order_relaxed); }

 private:
  spin_mutex mu_;
  T* head_ = nullptr;
  T* tail_ = nullptr;
  std::atomic<std::size_t> size_{0};
};

}  // namespace tessera::sched
