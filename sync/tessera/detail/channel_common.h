// tessera/detail/channel_common.h — what both channels share: the status their
// operations return (tessera::channel_status) and the range-for iterator over
// what a channel receives until it is closed and drained.
#pragma once

#include <cstddef>
#include <iterator>
#include <optional>

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

}  // namespace detail
}  // namespace tessera
