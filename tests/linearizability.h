// A linearizability checker for the tests, as Lincheck does it: run short
// random concurrent histories, record each operation's invocation and
// response on one global counter, then search for an order of the operations
// that respects real time (an operation that returned before another was
// invoked comes first) and that a sequential specification accepts with the
// same results (Wing & Gong's search, with Lowe's memoization of
// (operations done, state) pairs).
#pragma once

#include <atomic>
#include <concepts>
#include <cstdint>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tessera::test::lin {

/// One operation of a history: what was called, with which argument, what it
/// returned, and when (positions on the global counter).
struct op {
  int kind = 0;
  long arg = 0;
  long result = 0;
  std::uint64_t invoked = 0;
  std::uint64_t returned = 0;
  int thread = 0;
};

/// Records operations from many threads: call() stamps the invocation, runs
/// the call, stamps the response.
class recorder {
 public:
  explicit recorder(int threads) : per_thread_(static_cast<std::size_t>(threads)) {}
  template <class Fn>
  void call(int thread, int kind, long arg, Fn&& fn) {
    op o;
    o.kind = kind;
    o.arg = arg;
    o.thread = thread;
    o.invoked = clock_.fetch_add(1, std::memory_order_seq_cst);
    o.result = fn();
    o.returned = clock_.fetch_add(1, std::memory_order_seq_cst);
    per_thread_[static_cast<std::size_t>(thread)].push_back(o);
  }
  std::vector<op> history() const {
    std::vector<op> all;
    for (const auto& t : per_thread_) all.insert(all.end(), t.begin(), t.end());
    return all;
  }

 private:
  std::atomic<std::uint64_t> clock_{0};
  std::vector<std::vector<op>> per_thread_;  // each written by its own thread only
};

/// A specification may also take some operations in two steps, as a dual data
/// structure does (Scherer & Scott; Koval & Elizarov, "Dual Data Structures"):
/// `bool request(const op&)` registers a waiting operation, and a later
/// `bool follow_up(const op&)` completes it with o.result, both inside the
/// operation's interval. Operations a specification takes in one step have
/// request() return false.
template <class Spec>
concept dual_spec = requires(Spec s, const op& o) {
  { s.request(o) } -> std::convertible_to<bool>;
  { s.follow_up(o) } -> std::convertible_to<bool>;
};

/// Searches for a linearization of `h` under `Spec`: a copyable, ordered
/// (operator<) state with `bool apply(const op&)` that performs the operation
/// and says whether it would return o.result (and request()/follow_up() for a
/// dual_spec). At most 63 operations.
template <class Spec>
bool linearizable(const std::vector<op>& h, const Spec& initial) {
  const std::size_t n = h.size();
  if (n > 63) return false;
  using mask = std::uint64_t;
  std::set<std::tuple<mask, mask, Spec>> seen;  // dead ends
  std::function<bool(mask, mask, const Spec&)> search = [&](mask done, mask waiting,
                                                            const Spec& state) {
    if (done == (mask{1} << n) - 1) return true;
    if (seen.count({done, waiting, state}) != 0) return false;
    // The earliest response among the pending: only operations invoked
    // before it may take a step next.
    std::uint64_t horizon = ~std::uint64_t{0};
    for (std::size_t i = 0; i < n; ++i) {
      if ((done >> i & 1) == 0 && h[i].returned < horizon) horizon = h[i].returned;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const mask bit = mask{1} << i;
      if ((done & bit) != 0 || h[i].invoked > horizon) continue;
      if ((waiting & bit) != 0) {
        if constexpr (dual_spec<Spec>) {
          Spec next = state;
          if (next.follow_up(h[i]) && search(done | bit, waiting & ~bit, next)) return true;
        }
        continue;
      }
      Spec next = state;
      if (next.apply(h[i]) && search(done | bit, waiting, next)) return true;
      if constexpr (dual_spec<Spec>) {
        Spec wait = state;
        if (wait.request(h[i]) && search(done, waiting | bit, wait)) return true;
      }
    }
    seen.insert({done, waiting, state});
    return false;
  };
  return search(0, 0, initial);
}

/// The history, one operation per line, for a failure message.
template <class Names>
std::string describe(const std::vector<op>& h, Names&& name) {
  std::ostringstream out;
  for (const op& o : h) {
    out << "  thread " << o.thread << " [" << o.invoked << ", " << o.returned << "] "
        << name(o.kind) << "(" << o.arg << ") -> " << o.result << "\n";
  }
  return out.str();
}

}  // namespace tessera::test::lin
