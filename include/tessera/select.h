// tessera/select.h — select(): wait on several channels' sends and receives at
// once and carry out exactly one, as Go's select statement; for fibers and OS
// threads.
//
//   int a_val; std::string msg = "hi";
//   auto r = tessera::select(tessera::recv_case(a, a_val), tessera::send_case(b, msg));
//   if (r.index == 0 && r.status == tessera::channel_status::success) use(a_val);
//
// Contract
// - Exactly one case proceeds: select() returns the index of the case carried
//   out and its status — success (sent, or received into the case's
//   variable), or closed (that channel is closed: a receive case once it is
//   drained, a send case at once; Go panics on the latter). No other case
//   moves anything: a send case that was not chosen leaves its value as it
//   was, a receive case's variable is assigned only if chosen.
// - Fairness: among the cases ready when select() looks, one is chosen
//   uniformly at random (Go's rule). Otherwise it waits, and the first
//   counterpart (or close()) to reach one of its cases wins it.
// - Default case: try_select() never waits; with no case ready it returns
//   index kNone and status `empty`. Deadline: select_for / select_until
//   return kNone and `timeout` once it passes with none carried out, never
//   earlier (steady_clock; durations in any std::chrono unit).
// - A disabled case (select_case::disable(), Go's nil channel) is never
//   chosen. select() with no enabled case and no deadline would wait forever:
//   it throws std::invalid_argument instead (try_select returns `empty`,
//   the timed forms wait out their deadline).
// - Channels: tessera::channel<T> or tessera::lockfree_channel<T>, of any T,
//   but one kind per select (a mix throws std::invalid_argument). Several
//   cases may name the same channel; over a lockfree_channel they must all
//   send or all receive (a select that would meet itself in a cell: throws
//   std::invalid_argument). A case keeps a pointer to its channel and its
//   variable: both must outlive the case.
// - Over lockfree_channel, try_select() polls the cases' try_ forms one at a
//   time in a random order (no snapshot of all channels at one moment), and
//   a waiting select takes a cell in each channel: a counterpart that meets
//   one the select no longer needs passes over it to the next cell, as over a
//   timed-out waiter's.
// - Memory ordering: as the channel operation each case stands for.
// - Who may call: any fiber or OS thread; a waiting fiber parks at once, a
//   thread polls its claim for about 5 µs first (as a channel operation
//   does). Misuse: destroying a channel while a select waits on it is
//   undefined (as for any waiter).
//
// How, over channel<T>: as Go's selectgo, with a first pass. select() tries
// each case under its own channel's lock, in the random order; if none is
// ready it locks every case's channel (in address order, each once), looks
// at all of them again, carries out a ready case if there is one (so the
// default case's "none ready" holds at one moment), and otherwise enlists a
// node in each channel's queue of parked senders or receivers and parks.
// All the nodes point at one claim word
// (tessera/detail/select_node.h): the counterpart that would serve a node
// first claims the select, so exactly one case is carried out; once woken, the
// select locks the channels again and takes back its other nodes. Over
// lockfree_channel: as kotlinx.coroutines' select (Koval, Alistarh & Elizarov,
// PPoPP 2023): each case takes an index and waits in its cell, the claim word
// shared the same way, with a registration phase in which counterparts pass
// the select by (sync/select.cpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>

#include "tessera/channel.h"
#include "tessera/lockfree_channel.h"
#include "tessera/detail/deadline.h"
#include "tessera/detail/select_node.h"

namespace tessera {

/// What select() did: the case carried out (kNone: none) and its status.
struct select_result {
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::size_t index = kNone;
  channel_status status = channel_status::empty;
};

namespace detail {

/// One case, type-erased.
class select_arm {
 public:
  virtual ~select_arm() = default;
  virtual const void* channel_address() const noexcept = 0;
  /// A send case (else a receive case).
  virtual bool sends() const noexcept = 0;
  /// Over lockfree_channel (a lockfree_arm), else channel<T> (a locked_arm).
  virtual bool lock_free() const noexcept = 0;
};

/// A case over channel<T>: its channel's lock and queues.
class locked_arm : public select_arm {
 public:
  bool lock_free() const noexcept final { return false; }
  virtual void lock() noexcept = 0;
  virtual void unlock() noexcept = 0;
  /// Under the lock: carries the case out if it is ready (success or closed;
  /// `who` is a counterpart to unpark), else `empty`/`full`.
  virtual channel_status attempt(waiter*& who) noexcept = 0;
  /// attempt() under a lock hold of its own.
  virtual channel_status attempt_alone(waiter*& who) noexcept = 0;
  /// Under the lock: queues this case's node for `state` as case `index`.
  virtual void enlist(select_state& state, int index) noexcept = 0;
  /// Under the lock: takes the node back, unless it was served.
  virtual void delist() noexcept = 0;
  /// After the lock was let go, for the case that won: its status.
  virtual channel_status finish() noexcept = 0;
};

/// A case over lockfree_channel<T>: its cell.
class lockfree_arm : public select_arm {
 public:
  bool lock_free() const noexcept final { return true; }
  /// The case's try_ form: success or closed (carried out), else empty/full.
  virtual channel_status try_now() noexcept = 0;
  /// Takes an index; where the case would wait, registers in the cell as
  /// case `index` of `state` and returns `empty`; else carries it out
  /// (success or closed). Only while `state` is registering.
  virtual channel_status enlist(select_state& state, int index) noexcept = 0;
  /// Whether a counterpart bounced the case since the last call; clears it.
  virtual bool take_bounced() noexcept = 0;
  /// Takes the case back from its cell, if registered, once its server (if
  /// any) is done. Success or closed: the case was carried out there (it
  /// won); `empty`: it was not.
  virtual channel_status withdraw() noexcept = 0;
};

}  // namespace detail

/// A case of a select: recv_case(ch, var) or send_case(ch, value). Cheap to
/// reuse across many selects (built once, it allocates once).
class select_case {
 public:
  select_case() = default;
  explicit select_case(std::unique_ptr<detail::select_arm> arm) : arm_(std::move(arm)) {
    if (arm_ != nullptr) {
      channel_ = arm_->channel_address();
      sends_ = arm_->sends();
      lock_free_ = arm_->lock_free();
    }
  }

  /// Leaves this case out (Go's nil channel), or puts it back in.
  void disable() noexcept { enabled_ = false; }
  void enable() noexcept { enabled_ = arm_ != nullptr; }
  bool enabled() const noexcept { return enabled_ && arm_ != nullptr; }

  detail::select_arm* arm() const noexcept { return arm_.get(); }
  /// The arm's channel_address(), sends() and lock_free(), read once when the
  /// case is built (select() looks at them on every call).
  const void* channel_address() const noexcept { return channel_; }
  bool sends() const noexcept { return sends_; }
  bool lock_free() const noexcept { return lock_free_; }

 private:
  std::unique_ptr<detail::select_arm> arm_;
  const void* channel_ = nullptr;
  bool enabled_ = true;
  bool sends_ = false;
  bool lock_free_ = false;
};

namespace detail {

/// What a case over either channel holds: its channel, and the value it
/// sends or the variable it receives into (one of the two is null).
template <class Base, class Chan, class T>
class arm_over : public Base {
 public:
  arm_over(Chan& ch, T* send_value, T* receive_into)
      : ch_(ch), send_value_(send_value), receive_into_(receive_into) {}
  const void* channel_address() const noexcept override { return &ch_; }
  bool sends() const noexcept override { return send_value_ != nullptr; }

 protected:
  Chan& ch_;
  T* send_value_;
  T* receive_into_;
  std::optional<T> got_;  // a receive's value until the case is carried out
};

template <class T>
class select_arm_of final : public arm_over<locked_arm, tessera::channel<T>, T> {
  using base = arm_over<locked_arm, tessera::channel<T>, T>;
  using base::ch_, base::got_, base::receive_into_, base::send_value_;

 public:
  using chan = tessera::channel<T>;
  using base::base;

  void lock() noexcept override { ch_.lock_.lock(); }
  void unlock() noexcept override { ch_.lock_.unlock(); }

  channel_status attempt(waiter*& who) noexcept override {
    if (send_value_ != nullptr) return ch_.send_now(*send_value_, who);
    got_.reset();
    const channel_status s = ch_.receive_now(got_, who);
    if (s == channel_status::success) *receive_into_ = std::move(*got_);
    return s;
  }
  channel_status attempt_alone(waiter*& who) noexcept override {
    lock();
    const channel_status s = attempt(who);
    unlock();
    return s;
  }

  void enlist(select_state& state, int index) noexcept override {
    channel_node& n = node();
    n.mark.store(park_mark::none, std::memory_order_relaxed);
    n.who = self();
    n.sel = &state;
    n.index = index;
    n.linked = true;
    if (send_value_ != nullptr) {
      send_.value = send_value_;
      ch_.senders_.push_back(send_);
    } else {
      got_.reset();
      receive_.slot = &got_;
      ch_.receivers_.push_back(receive_);
    }
  }

  void delist() noexcept override {
    channel_node& n = node();
    if (n.linked && n.mark.load(std::memory_order_relaxed) == park_mark::none) {
      (send_value_ != nullptr ? ch_.senders_ : ch_.receivers_).unlink(n);
    }
    n.linked = false;
  }

  channel_status finish() noexcept override {
    const park_mark m = node().mark.load(std::memory_order_acquire);
    if (m != park_mark::handed) return channel_status::closed;
    if (send_value_ == nullptr) *receive_into_ = std::move(*got_);
    return channel_status::success;
  }

 private:
  channel_node& node() noexcept {
    return send_value_ != nullptr ? static_cast<channel_node&>(send_) : receive_;
  }

  typename chan::send_node send_;
  typename chan::receive_node receive_;
};

template <class T>
class lockfree_arm_of final : public arm_over<lockfree_arm, tessera::lockfree_channel<T>, T> {
  using base = arm_over<lockfree_arm, tessera::lockfree_channel<T>, T>;
  using base::ch_, base::got_, base::receive_into_, base::send_value_;

 public:
  using chan = tessera::lockfree_channel<T>;
  using base::base;
  using base::sends;

  channel_status try_now() noexcept override {
    if (sends()) return ch_.send_impl(*send_value_, {}, true);
    got_.reset();
    return received(ch_.receive_impl(got_, {}, true));
  }

  channel_status enlist(select_state& state, int index) noexcept override {
    slot_.rec.sel = &state;
    slot_.rec.index = index;
    slot_.rec.bounced.store(false, std::memory_order_relaxed);
    if (sends()) return ch_.send_impl(*send_value_, {}, false, &slot_);
    got_.reset();
    return received(ch_.receive_impl(got_, {}, false, &slot_));
  }

  bool take_bounced() noexcept override {
    return slot_.rec.bounced.exchange(false, std::memory_order_relaxed);
  }

  channel_status withdraw() noexcept override {
    const std::uintptr_t st = ch_.withdraw(slot_, sends());
    if (st == chan::kDone || st == chan::kBuffered) return received(channel_status::success);
    return st == chan::kClosed ? channel_status::closed : channel_status::empty;
  }

 private:
  /// A receive case carried out: its value goes to the case's variable.
  channel_status received(channel_status s) noexcept {
    if (s == channel_status::success && !sends()) *receive_into_ = std::move(*got_);
    return s;
  }

  typename chan::select_slot slot_;
};

}  // namespace detail

/// A case that receives from `ch` into `out` (assigned only if chosen).
template <class T>
select_case recv_case(channel<T>& ch, T& out) {
  return select_case(std::make_unique<detail::select_arm_of<T>>(ch, nullptr, &out));
}
/// A case that sends `value` on `ch` (moved from only if chosen and sent).
template <class T>
select_case send_case(channel<T>& ch, T& value) {
  return select_case(std::make_unique<detail::select_arm_of<T>>(ch, &value, nullptr));
}
/// The same over a lock-free channel.
template <class T>
select_case recv_case(lockfree_channel<T>& ch, T& out) {
  return select_case(std::make_unique<detail::lockfree_arm_of<T>>(ch, nullptr, &out));
}
template <class T>
select_case send_case(lockfree_channel<T>& ch, T& value) {
  return select_case(std::make_unique<detail::lockfree_arm_of<T>>(ch, &value, nullptr));
}

namespace detail {
select_result run_select(std::span<select_case> cases, deadline d, bool try_only);
}

/// Waits until one case can be carried out, carries it out, and says which.
/// Throws std::invalid_argument if no case is enabled.
inline select_result select(std::span<select_case> cases) {
  return detail::run_select(cases, {}, false);
}
/// Carries out a ready case, or returns {kNone, empty} at once (Go's default).
inline select_result try_select(std::span<select_case> cases) {
  return detail::run_select(cases, {}, true);
}
/// select() with a deadline: {kNone, timeout} once it passes.
template <class Rep, class Period>
select_result select_for(std::span<select_case> cases,
                         const std::chrono::duration<Rep, Period>& rel_time) {
  return detail::run_select(cases, detail::deadline::after(rel_time), false);
}
template <class Clock, class Duration>
select_result select_until(std::span<select_case> cases,
                           const std::chrono::time_point<Clock, Duration>& abs_time) {
  return detail::run_select(cases, detail::deadline::at(abs_time), false);
}

/// The same with the cases written in place: select(recv_case(a, x), send_case(b, y)).
template <class... Cases>
requires(sizeof...(Cases) > 0 && (std::is_same_v<Cases, select_case> && ...)) select_result
    select(Cases&&... cases) {
  select_case all[] = {std::move(cases)...};
  return select(std::span<select_case>(all));
}
template <class... Cases>
requires(sizeof...(Cases) > 0 && (std::is_same_v<Cases, select_case> && ...)) select_result
    try_select(Cases&&... cases) {
  select_case all[] = {std::move(cases)...};
  return try_select(std::span<select_case>(all));
}

}  // namespace tessera
