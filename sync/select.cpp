// select() (tessera/select.h): Go's selectgo on Tessera's channels.
//
// Why lock every channel. A select must see all its cases at one moment to
// know that none is ready before it enlists, or a counterpart could come to
// case A after A was looked at and before A's node is queued, and be missed.
// Holding the channels' locks from the first look until every node is queued
// closes that window; the locks are taken in address order, each once, so two
// selects over the same channels cannot deadlock. The locks are the
// channels' own spin locks, held for a few instructions per case. Before
// that, one pass in the random order tries each case under its own
// channel's lock alone: a ready case is then taken with one lock hold, as a
// plain send or receive takes it (Go's selectgo locks every channel even
// then; over two buffered channels shared by fibers on two workers, holding
// both made every select contend with every send: docs/benchmarks.md,
// "Channels"). Only when no case is ready are all locked (sorted only then),
// polled once more and enlisted.
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
//
// Over lock-free channels there are no locks to see every case at one
// moment, so the select registers in a cell of each channel in turn, and a
// counterpart may reach an early case's cell while a later case is found
// ready. Who carries out which? kotlinx.coroutines' answer (its
// SelectImplementation, on the channels of Koval, Alistarh & Elizarov): while
// it registers, the select's claim word says so (kRegistering) and nobody may
// claim it; a counterpart that meets a case then marks it bounced, gives the
// cell up (SENDER_GONE or RECEIVER_GONE) and takes its next cell. A case the
// select finds ready is then its own: it carries it out and claims itself.
// At the end of a pass the select opens (kRegistering to kOpen) unless a
// case was bounced (kReregister): it registers those again first. Once open,
// counterparts claim as over channel<T>. The bounced counterpart loses
// nothing: it goes on as past a waiter that timed out. Before any of this,
// one pass over the cases' try_ forms in random order finds a ready case
// without leaving given-up cells behind, and gives Go's random choice among
// ready cases. Model: tests/model/lockfree_select.pml.
#include "tessera/select.h"

#include <tessera/park.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <vector>

#include "tessera/detail/simulation_hooks.h"
#include "tessera/detail/tls_access.h"

namespace tessera::detail {
namespace {

/// A per-thread xorshift: the random poll order (Go's cheaprand).
TESSERA_TLS_ACCESSOR std::uint32_t next_random() noexcept {
  if (const simulation_table* s = simulation_hooks.load(std::memory_order_relaxed)) [[unlikely]] {
    std::uint32_t r = 0;
    if (s->random(r)) return r;  // a simulation's seeded choice
  }
  thread_local std::uint32_t x =
      0x9e3779b9u ^ static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(&x) >> 4);
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return x;
}

/// Uniform in [0, n), n < 2^32: Lemire's multiply-shift, no division.
std::size_t below(std::size_t n) noexcept {
  return static_cast<std::size_t>((static_cast<std::uint64_t>(next_random()) * n) >> 32);
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
/// in address order, for locking (over channel<T> only).
struct orders {
  std::span<select_case> cases;
  scratch<std::size_t> poll_buf;
  scratch<std::size_t> lock_buf;
  std::span<std::size_t> poll;
  std::span<std::size_t> locks;  // case indices, one per channel, by channel address
  bool lock_free = false;

  /// Throws std::invalid_argument for cases a select cannot serve.
  explicit orders(std::span<select_case> all)
      : cases(all), poll_buf(all.size()), lock_buf(all.size()) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (all[i].enabled()) poll_buf.data()[n++] = i;
    }
    poll = {poll_buf.data(), n};
    if (n == 0) return;
    for (std::size_t i = n; i > 1; --i) std::swap(poll[i - 1], poll[below(i)]);
    const select_case& first = all[poll[0]];
    lock_free = first.lock_free();
    bool both_ways = false;
    for (std::size_t k = 1; k < n; ++k) {
      const select_case& c = all[poll[k]];
      if (c.lock_free() != lock_free) {
        throw std::invalid_argument(
            "tessera::select: cases over channel<T> and over lockfree_channel<T> cannot be "
            "mixed in one select");
      }
      both_ways |= c.sends() != first.sends();
    }
    // Over lock-free channels there is nothing to lock: the channel order
    // only serves to find one channel named from both sides. Over
    // channel<T> it is needed only once no case was ready (sort_locks()).
    if (lock_free && both_ways) sort_locks();
  }
  /// `locks`: one case per channel, by channel address. Throws for a
  /// lock-free channel named from both sides.
  void sort_locks() {
    const std::size_t n = poll.size();
    std::span<select_case> all = cases;
    std::size_t* by_channel = lock_buf.data();
    std::copy(poll.begin(), poll.end(), by_channel);
    auto address = [&](std::size_t i) { return all[i].channel_address(); };
    std::sort(by_channel, by_channel + n, [&](std::size_t a, std::size_t b) {
      return std::less<const void*>()(address(a), address(b));
    });
    for (std::size_t k = 1; k < n; ++k) {
      if (lock_free && address(by_channel[k]) == address(by_channel[k - 1]) &&
          all[by_channel[k]].sends() != all[by_channel[k - 1]].sends()) {
        throw std::invalid_argument(
            "tessera::select: a select may not both send to and receive from one "
            "lockfree_channel (its two cases could meet in one cell)");
      }
    }
    std::size_t* last = std::unique(by_channel, by_channel + n, [&](std::size_t a, std::size_t b) {
      return address(a) == address(b);
    });
    locks = {by_channel, static_cast<std::size_t>(last - by_channel)};
  }
  locked_arm* locked(std::size_t i) const noexcept {
    return static_cast<locked_arm*>(cases[i].arm());
  }
  void lock_all() const noexcept {
    for (std::size_t i : locks) locked(i)->lock();
  }
  void unlock_all() const noexcept {
    for (auto it = locks.rbegin(); it != locks.rend(); ++it) locked(*it)->unlock();
  }
};

/// Parks until a case claims `state` (open), or the deadline passes first
/// and the select claims itself timed out. Returns the claim.
int await_claim(select_state& state, deadline d) {
  int won = select_state::kOpen;
  if (poll_before_park([&] {
        won = state.claimed.load(std::memory_order_acquire);
        return won != select_state::kOpen;
      })) {
    return won;
  }
  const wait_scope scope("select", &state);
  while ((won = state.claimed.load(std::memory_order_acquire)) == select_state::kOpen) {
    if (!d) {
      park();
    } else if (!park_until(*d)) {
      int open = select_state::kOpen;
      state.claimed.compare_exchange_strong(open, select_state::kTimedOut,
                                            std::memory_order_acq_rel);
    }
  }
  return won;
}

/// Over lock-free channels (see the top of this file).
select_result run_lockfree(std::span<select_case> cases, std::span<const std::size_t> poll,
                           deadline d, bool try_only) {
  auto arm = [&](std::size_t i) { return static_cast<lockfree_arm*>(cases[i].arm()); };
  auto carried_out = [](channel_status s) {
    return s == channel_status::success || s == channel_status::closed;
  };
  for (std::size_t i : poll) {
    const channel_status s = arm(i)->try_now();
    if (carried_out(s)) return {i, s};
  }
  if (try_only) return {};

  select_state state;
  state.claimed.store(select_state::kRegistering, std::memory_order_relaxed);
  // Registers every case (or those bounced) until one is carried out or the
  // select opens. Returns the one carried out, if any.
  auto register_cases = [&](bool bounced_only) -> select_result {
    for (std::size_t i : poll) {
      if (bounced_only) {
        if (!arm(i)->take_bounced()) continue;
        (void)arm(i)->withdraw();  // its cell is given up: let go of it
      }
      const channel_status s = arm(i)->enlist(state, static_cast<int>(i));
      if (carried_out(s)) return {i, s};
    }
    return {};
  };
  select_result done = register_cases(false);
  while (done.index == select_result::kNone) {
    int reg = select_state::kRegistering;
    if (state.claimed.compare_exchange_strong(reg, select_state::kOpen,
                                              std::memory_order_acq_rel)) {
      break;
    }
    // kReregister: a counterpart bounced a case (its flag was set first).
    state.claimed.exchange(select_state::kRegistering, std::memory_order_acq_rel);
    done = register_cases(true);
  }
  if (done.index != select_result::kNone) {
    // Ours while registering: counterparts that meet the other cases now
    // find it claimed and pass them over.
    state.claimed.exchange(static_cast<int>(done.index), std::memory_order_acq_rel);
    for (std::size_t i : poll) {
      if (i != done.index) (void)arm(i)->withdraw();
    }
    return done;
  }

  const int won = await_claim(state, d);
  select_result r{select_result::kNone, channel_status::timeout};
  for (std::size_t i : poll) {
    const channel_status s = arm(i)->withdraw();
    if (static_cast<int>(i) == won) r = {i, s};
  }
  return r;
}

}  // namespace

select_result run_select(std::span<select_case> cases, deadline d, bool try_only) {
  orders order(cases);
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
  if (order.lock_free) return run_lockfree(cases, order.poll, d, try_only);
  auto arm = [&](std::size_t i) { return order.locked(i); };

  // First, each case under its own channel's lock alone, in the random
  // order: a ready case costs one lock hold, as a plain send or receive.
  for (std::size_t i : order.poll) {
    waiter* who = nullptr;
    const channel_status s = arm(i)->attempt_alone(who);
    if (s == channel_status::success || s == channel_status::closed) {
      if (who != nullptr) unpark(who);
      return {i, s};
    }
  }
  // None was ready at its look. Seeing them all at one moment (that none is
  // ready, for a default case; before enlisting, otherwise) takes every lock.
  order.sort_locks();
  order.lock_all();
  for (std::size_t i : order.poll) {
    waiter* who = nullptr;
    const channel_status s = arm(i)->attempt(who);
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
  for (std::size_t i : order.poll) arm(i)->enlist(state, static_cast<int>(i));
  order.unlock_all();

  const int won = await_claim(state, d);

  // Take back every node but the one served (its server's lock hold is over
  // once we hold that lock).
  order.lock_all();
  for (std::size_t i : order.poll) arm(i)->delist();
  order.unlock_all();
  if (won == select_state::kTimedOut) return {select_result::kNone, channel_status::timeout};
  const auto index = static_cast<std::size_t>(won);
  return {index, arm(index)->finish()};
}

}  // namespace tessera::detail
