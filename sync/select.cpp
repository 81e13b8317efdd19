// select() (tessera/select.h): Go's selectgo on Tessera's channels.
//
// Why lock every channel. A select must see all its cases at one moment to
// know that none is ready before it enlists, or a counterpart could come to
// case A after A was looked at and before A's node is queued, and be missed.
// Holding the channels' locks from the first look until every node is queued
// closes that window; the locks are taken in address order, each once, so two
// selects over the same channels cannot deadlock. The locks are the
// channels' own spin locks, held for a few instructions per case.
//
// Why a claim word. Once enlisted, the select can be served from any of its
// channels, each under its own lock only. The counterpart that would serve a
// node first compares-and-swaps the select's claim word from open to its case
// index (detail::channel_node::claim); the select's deadline does the same
// with kTimedOut. Exactly one wins. A loser unlinks the node and passes over
// it, so a stale node costs one failed CAS. The winner completes its
// transfer and marks the node under its lock; the select, once it sees the
// claim, locks all its channels again — by then the winner's lock hold is
// over — and takes back its other nodes.
#include "tessera/select.h"

#include <tessera/park.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <vector>

namespace tessera::detail {
namespace {

/// A per-thread xorshift: the random poll order (Go's cheaprand).
std::uint32_t next_random() noexcept {
  thread_local std::uint32_t x =
      0x9e3779b9u ^ static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(&x) >> 4);
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return x;
}

/// `n` elements of T: inline up to kInline (no allocation on the common
/// path: a select over a handful of channels), on the heap beyond.
template <class T>
class scratch {
 public:
  static constexpr std::size_t kInline = 16;
  explicit scratch(std::size_t n) {
    if (n > kInline) heap_.resize(n);
  }
  T* data() noexcept { return heap_.empty() ? inline_ : heap_.data(); }

 private:
  T inline_[kInline];
  std::vector<T> heap_;
};

/// The enabled cases: in a random order for polling, and each channel once,
/// in address order, for locking.
struct orders {
  scratch<std::size_t> poll_buf;
  scratch<select_arm*> lock_buf;
  std::span<std::size_t> poll;
  std::span<select_arm*> locks;

  explicit orders(std::span<select_case> cases) : poll_buf(cases.size()), lock_buf(cases.size()) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      if (cases[i].enabled()) poll_buf.data()[n++] = i;
    }
    poll = {poll_buf.data(), n};
    for (std::size_t i = n; i > 1; --i) std::swap(poll[i - 1], poll[next_random() % i]);
    for (std::size_t k = 0; k < n; ++k) lock_buf.data()[k] = cases[poll[k]].arm();
    select_arm** first = lock_buf.data();
    std::sort(first, first + n, [](select_arm* a, select_arm* b) {
      return std::less<const void*>()(a->channel_address(), b->channel_address());
    });
    select_arm** last = std::unique(first, first + n, [](select_arm* a, select_arm* b) {
      return a->channel_address() == b->channel_address();
    });
    locks = {first, static_cast<std::size_t>(last - first)};
  }
  void lock_all() const noexcept {
    for (select_arm* a : locks) a->lock();
  }
  void unlock_all() const noexcept {
    for (auto it = locks.rbegin(); it != locks.rend(); ++it) (*it)->unlock();
  }
};

}  // namespace

select_result run_select(std::span<select_case> cases, deadline d, bool try_only) {
  const orders order(cases);
  if (order.poll.empty()) {
    if (try_only) return {};
    if (!d) {
      throw std::invalid_argument(
          "tessera::select: no enabled case and no deadline: it would wait forever");
    }
    while (park_until(*d)) {
    }
    return {select_result::kNone, channel_status::timeout};
  }

  order.lock_all();
  for (std::size_t i : order.poll) {
    waiter* who = nullptr;
    const channel_status s = cases[i].arm()->attempt(who);
    if (s == channel_status::success || s == channel_status::closed) {
      order.unlock_all();
      if (who != nullptr) unpark(who);
      return {i, s};
    }
  }
  if (try_only) {
    order.unlock_all();
    return {};
  }

  select_state state;
  for (std::size_t i : order.poll) cases[i].arm()->enlist(state, static_cast<int>(i));
  order.unlock_all();

  {
    const wait_scope scope("select", &state);
    while (state.claimed.load(std::memory_order_acquire) == select_state::kOpen) {
      if (!d) {
        park();
      } else if (!park_until(*d)) {
        int open = select_state::kOpen;
        state.claimed.compare_exchange_strong(open, select_state::kTimedOut,
                                              std::memory_order_acq_rel);
      }
    }
  }

  // Take back every node but the one served (its server's lock hold is over
  // once we hold that lock).
  order.lock_all();
  for (std::size_t i : order.poll) cases[i].arm()->delist();
  order.unlock_all();
  const int won = state.claimed.load(std::memory_order_acquire);
  if (won == select_state::kTimedOut) return {select_result::kNone, channel_status::timeout};
  const auto index = static_cast<std::size_t>(won);
  return {index, cases[index].arm()->finish()};
}

}  // namespace tessera::detail
