// tessera/channel.h — channel<T>: a bounded, closable FIFO channel, and with
// capacity 0 a rendezvous (synchronous) channel, for fibers and OS threads.
//
// Contract
// - Order: FIFO. Values are received in the order their sends took effect
//   (entered the buffer or met a receiver); parked senders are served oldest
//   first, and so are parked receivers. A send that returns success
//   happens-before the receive that gets its value (both sides pass through the
//   lock; a parked party is woken by a release store it reads with acquire).
// - Rendezvous (capacity 0): send returns only once a receiver has taken the
//   value; a receiver takes it from a parked sender, or parks until one comes.
//   try_send succeeds only if a receiver is parked; try_receive only if a sender is.
// - Nothing is lost: a send that fails (closed, full, timeout) leaves its
//   argument untouched — send(T&&) moves from it only on success; a timed wait
//   that expires just as it is served reports success (the item or delivery
//   went through). close() never drops buffered items.
// - Blocking calls park the caller (a fiber switches to its worker at once; a
//   thread first polls for about 5 µs, then sleeps on its futex). Contended,
//   the lock backs off for fibers (spin_lock.h), so one worker's fibers run
//   their operations in batches. No spurious wake-ups are visible; timed calls never
//   return `timeout` before the deadline (steady_clock; durations in any
//   std::chrono unit, converted without rounding down).
// - Who may call: any fiber or OS thread, mixed, any number of senders and
//   receivers. close() may be called by anyone, more than once (later calls do
//   nothing).
// - Requirements on T: nothrow move constructible (values move under the lock,
//   and a move that threw there would lose an item).
// - Misuse: destroying a channel while callers are parked on it is undefined;
//   debug builds (TESSERA_CHECKS) abort with a message saying so. A capacity
//   too large to allocate throws std::bad_alloc from the constructor.
//
// Peers: Go's chan (send on a closed channel panics there; here it fails), and
// Boost.Fiber's buffered_channel / unbuffered_channel (channel_op_status).
// Every operation is a few instructions under one lock (docs/design.md says
// when that bounds it; fiberbench's `channel` rows measure it beside
// Boost.Fiber's).
//
// Box office / bouncer (Preshing, "Semaphores are Surprisingly Versatile"). The box office is the
// channel's state under its small spin lock (detail::spin_lock: a few instructions, never parked
// on); the bouncers are two FIFO queues of parked callers (detail::park_list), each caller waiting
// on its own park_node with park()/unpark() (the park façade).
//
//   field        meaning
//   ring_        the buffer: `capacity()` slots, `count_` of them full from head_
//   senders_     parked senders, oldest first; each node points at the value
//                its sender still owns (nothing is moved until a receiver takes it)
//   receivers_   parked receivers, oldest first; each node points at the slot
//                its receiver wants the value in
//   closed_      set once by close(); never cleared
//
//   Invariants (under the lock): receivers wait only while the buffer is empty
//   and no sender waits; senders wait only while the buffer is full (always,
//   for capacity 0) and no receiver waits. So at most one queue is non-empty.
//
//   send      a receiver waits: hand it the value directly, unpark it (Koval &
//             Elizarov's dual data structure: the value meets a waiting request).
//             Else room in the buffer: append. Else closed: fail. Else park in
//             senders_ until a receiver takes the value, close(), or the deadline.
//   receive   the buffer has an item: take the oldest; if a sender waits, move
//             its value into the freed slot and unpark it. Else (capacity 0) a
//             sender waits: take its value directly. Else closed: fail. Else park
//             in receivers_ until a sender delivers, close(), or the deadline.
//   close     set closed_; unpark every parked sender (their sends fail; their
//             values stay with them) and every parked receiver (nothing to take:
//             they only wait while the buffer is empty). Buffered items stay
//             receivable: receivers drain them, then see `closed`.
//
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "tessera/detail/channel_common.h"
#include "tessera/detail/cpu.h"
#include "tessera/detail/deadline.h"
#include "tessera/detail/park_list.h"
#include "tessera/detail/select_node.h"
#include "tessera/detail/spin_lock.h"

namespace tessera {

template <class T>
class channel : public detail::channel_api<channel<T>, T> {
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "tessera::channel<T>: T must be nothrow move constructible");

 public:
  using value_type = T;
  // send, try_send, send_for/until, receive, try_receive, receive_for/until,
  // begin/end: detail::channel_api (tessera/detail/channel_common.h).

  /// A channel buffering up to `capacity` values; 0 makes it a rendezvous channel.
  explicit channel(std::size_t capacity)
      : capacity_(capacity),
        ring_(capacity == 0 ? nullptr : std::make_unique<std::optional<T>[]>(capacity)) {}
  ~channel() {
#if TESSERA_CHECKS
    if (!senders_.empty() || !receivers_.empty()) {
      detail::misuse_abort("tessera::channel destroyed while senders or receivers wait on it");
    }
#endif
  }
  channel(const channel&) = delete;
  channel& operator=(const channel&) = delete;

  /// Values the channel buffers at most (0: rendezvous).
  std::size_t capacity() const noexcept {
    return capacity_;
  }

  /// Closes the channel: later and parked sends fail; receives drain what is
  /// buffered, then fail. Idempotent.
  void close() noexcept {
    lock_.lock();
    closed_ = true;
    lock_.unlock();
    // Parked callers are taken one per lock hold, so their unparks run outside it.
    for (;;) {
      lock_.lock();
      detail::park_list* list = &senders_;
      detail::park_node* n = claim_front(senders_);
      if (n == nullptr) {
        list = &receivers_;
        n = claim_front(receivers_);
      }
      if (n == nullptr) {
        lock_.unlock();
        return;
      }
      waiter* who = list->take(*n, kClosed);  // null: a thread still polls it
      lock_.unlock();
      unpark(who);
    }
  }
  /// Whether close() has been called (a snapshot).
  bool is_closed() const noexcept {
    lock_.lock();
    const bool c = closed_;
    lock_.unlock();
    return c;
  }
  /// Values buffered now (a snapshot, for tests and monitoring).
  std::size_t size() const noexcept {
    lock_.lock();
    const std::size_t n = count_;
    lock_.unlock();
    return n;
  }

  /// Senders parked now (a snapshot, for tests and monitoring; walks the queue).
  std::size_t waiting_senders() const noexcept {
    return queued(senders_);
  }
  /// Receivers parked now (a snapshot, for tests and monitoring; walks the queue).
  std::size_t waiting_receivers() const noexcept {
    return queued(receivers_);
  }

 private:
  // park_node marks: what a parked caller was given.
  // park_mark::handed: value taken (sender) / delivered (receiver);
  // park_mark::closed: close() woke it, nothing happened.
  static constexpr detail::park_mark kDone = detail::park_mark::handed;
  static constexpr detail::park_mark kClosed = detail::park_mark::closed;
  template <class>
  friend class detail::select_arm_of;
  friend class detail::channel_api<channel, T>;
  struct send_node : detail::channel_node {
    T* value = nullptr;
  };
  struct receive_node : detail::channel_node {
    std::optional<T>* slot = nullptr;
  };

  /// The front of `list` that may be served: a select's node is claimed
  /// first, and one whose select another case (or its deadline) won is
  /// unlinked and passed over. Under lock_.
  static detail::park_node* claim_front(detail::park_list& list) noexcept {
    for (;;) {
      auto* n = static_cast<detail::channel_node*>(list.front());
      if (n == nullptr || n->claim()) return n;
      list.unlink(*n);
      n->linked = false;
    }
  }

  /// send()'s part that never waits, under lock_: closed, success (handed to
  /// a receiver, whom it returns in `who`, or buffered), or full.
  channel_status send_now(T& v, waiter*& who) noexcept {
    if (closed_) return channel_status::closed;
    if (detail::park_node* r = claim_front(receivers_); r != nullptr) {  // buffer empty
      static_cast<receive_node*>(r)->slot->emplace(std::move(v));
      who = receivers_.take(*r, kDone);
      return channel_status::success;
    }
    if (count_ < capacity_) {
      push_back(std::move(v));
      return channel_status::success;
    }
    return channel_status::full;
  }
  /// receive()'s part that never waits, under lock_: success (a parked sender
  /// whose value it took is returned in `who`), closed, or empty.
  channel_status receive_now(std::optional<T>& out, waiter*& who) noexcept {
    const bool buffered = count_ > 0;
    if (buffered) pop_front(out);
    // A parked sender (the buffer is full, or capacity is 0): its value refills
    // the slot just freed, or, with nothing buffered, is ours directly.
    if (detail::park_node* s = claim_front(senders_); s != nullptr) {
      T& v = *static_cast<send_node*>(s)->value;
      if (buffered) {
        push_back(std::move(v));
      } else {
        out.emplace(std::move(v));
      }
      who = senders_.take(*s, kDone);
      return channel_status::success;
    }
    if (buffered) return channel_status::success;
    return closed_ ? channel_status::closed : channel_status::empty;
  }

  // Buffer ring, under lock_.
  void push_back(T&& v) noexcept {
    ring_[(head_ + count_) % capacity_].emplace(std::move(v));
    ++count_;
  }
  void pop_front(std::optional<T>& out) noexcept {
    std::optional<T>& front = ring_[head_];
    out.emplace(std::move(*front));
    front.reset();
    head_ = (head_ + 1) % capacity_;
    --count_;
  }

  channel_status send_impl(T& v, detail::deadline deadline, bool try_only) {
    lock_.lock();
    waiter* who = nullptr;
    const channel_status now = send_now(v, who);
    if (now != channel_status::full || try_only) {
      lock_.unlock();
      if (who != nullptr) unpark(who);
      return now;
    }
    send_node n;
    n.value = &v;
    n.who = self();
    const wait_scope scope(n.who, "channel send", this);
    return park_in(senders_, n, deadline);
  }

  channel_status receive_impl(std::optional<T>& out, detail::deadline deadline, bool try_only) {
    lock_.lock();
    waiter* who = nullptr;
    const channel_status now = receive_now(out, who);
    if (now != channel_status::empty || try_only) {
      lock_.unlock();
      if (who != nullptr) unpark(who);
      return now;
    }
    receive_node n;
    n.slot = &out;
    n.who = self();
    const wait_scope scope(n.who, "channel receive", this);
    return park_in(receivers_, n, deadline);
  }

  /// Called under lock_, which it lets go: queues `n` (its `who` set) on
  /// `list` and parks until it is taken (success or closed) or the deadline
  /// passes (it leaves: timeout).
  channel_status park_in(detail::park_list& list, detail::park_node& n, detail::deadline deadline) {
    // An OS thread polls its node before it parks, and a counterpart that
    // takes it meanwhile does not unpark it (poll_then_await).
    list.push_back_polling(n);
    lock_.unlock();
    return outcome(detail::poll_then_await(n, deadline, lock_, list));
  }

  std::size_t queued(const detail::park_list& list) const noexcept {
    lock_.lock();
    const std::size_t n = list.size();
    lock_.unlock();
    return n;
  }

  static channel_status outcome(detail::park_mark mark) noexcept {
    return mark == kDone     ? channel_status::success
           : mark == kClosed ? channel_status::closed
                             : channel_status::timeout;
  }

  const std::size_t capacity_;
  const std::unique_ptr<std::optional<T>[]> ring_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  bool closed_ = false;
  detail::park_list senders_;
  detail::park_list receivers_;
  mutable detail::spin_lock lock_;
};

}  // namespace tessera
