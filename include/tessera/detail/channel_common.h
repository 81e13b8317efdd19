// tessera/detail/channel_common.h — what both channels share: the status their
// operations return (tessera::channel_status), their public send and receive
// calls (channel_api, over each channel's send_impl/receive_impl), and the
// range-for iterator over what a channel receives until it is closed and
// drained.
#pragma once

#include <chrono>
#include <cstddef>
#include <iterator>
#include <optional>
#include <utility>

#include "tessera/detail/deadline.h"
#include "tessera/detail/poll_before_park.h"
#include "tessera/park.h"

namespace tessera {

/// What a channel operation did.
enum class channel_status {
  success,  ///< sent (buffered or handed off) / received
  empty,    ///< try_receive: nothing to take now
  full,     ///< try_send: no room now (capacity 0: no receiver waiting)
  closed,   ///< the channel is closed (a receive: and drained)
  timeout,  ///< the deadline passed first
};

namespace detail {

/// `for (T& v : ch)`: each step is ch.receive(); the range ends once the
/// channel is closed and drained.
template <class Channel>
class receive_iterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = typename Channel::value_type;
  using difference_type = std::ptrdiff_t;
  using pointer = value_type*;
  using reference = value_type&;
  receive_iterator() = default;
  explicit receive_iterator(Channel* ch) : ch_(ch) { ++*this; }
  reference operator*() { return *value_; }
  pointer operator->() { return &*value_; }
  receive_iterator& operator++() {
    value_ = ch_->receive();
    if (!value_) ch_ = nullptr;
    return *this;
  }
  void operator++(int) { ++*this; }
  bool operator==(const receive_iterator& o) const noexcept { return ch_ == o.ch_; }

 private:
  Channel* ch_ = nullptr;
  std::optional<value_type> value_;
};

/// The calls both channels offer, in terms of the channel's
///   channel_status send_impl(T& v, deadline, bool try_only);
///   channel_status receive_impl(std::optional<T>& out, deadline, bool try_only);
/// (contracts: tessera/channel.h).
template <class Channel, class T>
class channel_api {
 public:
  using value_type = T;

  /// Sends `v`, parking while the buffer is full (capacity 0: until a receiver
  /// takes it). Returns false, leaving `v` untouched, if the channel is or gets
  /// closed first.
  bool send(T&& v) { return self().send_impl(v, {}, false) == channel_status::success; }
  bool send(const T& v) {
    T copy(v);
    return send(std::move(copy));
  }
  /// Sends without waiting: success, full, or closed (`v` untouched unless success).
  channel_status try_send(T&& v) { return self().send_impl(v, {}, true); }
  channel_status try_send(const T& v) {
    T copy(v);
    return try_send(std::move(copy));
  }
  /// send() with a deadline: success, closed, or timeout (`v` untouched unless success).
  template <class Rep, class Period>
  channel_status send_for(T&& v, const std::chrono::duration<Rep, Period>& d) {
    return self().send_impl(v, deadline::after(d), false);
  }
  template <class Clock, class Duration>
  channel_status send_until(T&& v, const std::chrono::time_point<Clock, Duration>& t) {
    return self().send_impl(v, deadline::at(t), false);
  }

  /// Receives the oldest value, parking while there is none. Returns nullopt
  /// once the channel is closed and drained.
  std::optional<T> receive() {
    std::optional<T> out;
    (void)self().receive_impl(out, {}, false);
    return out;
  }
  /// Receives without waiting: success (into `out`), empty, or closed (and drained).
  channel_status try_receive(T& out) { return receive_into(out, {}, true); }
  /// receive() with a deadline: success (into `out`), closed, or timeout.
  template <class Rep, class Period>
  channel_status receive_for(T& out, const std::chrono::duration<Rep, Period>& d) {
    return receive_into(out, deadline::after(d), false);
  }
  template <class Clock, class Duration>
  channel_status receive_until(T& out, const std::chrono::time_point<Clock, Duration>& t) {
    return receive_into(out, deadline::at(t), false);
  }

  /// Range-for over the values until the channel is closed and drained:
  /// `for (T& v : ch)`. Each step is a receive().
  using iterator = receive_iterator<Channel>;
  iterator begin() { return iterator(&self()); }
  iterator end() noexcept { return iterator(); }

 private:
  Channel& self() noexcept { return static_cast<Channel&>(*this); }
  channel_status receive_into(T& out, deadline d, bool try_only) {
    std::optional<T> got;
    const channel_status s = self().receive_impl(got, d, try_only);
    if (s == channel_status::success) out = std::move(*got);
    return s;
  }
};

}  // namespace detail
}  // namespace tessera
