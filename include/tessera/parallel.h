// tessera/parallel.h — the parallel algorithms on jobs: parallel_for,
// parallel_for_each, parallel_reduce, parallel_invoke, with oneTBB's
// blocked_range.
//
//   tessera::parallel_for(0, n, [&](int i) { y[i] += a * x[i]; });
//   double s = tessera::parallel_reduce(tessera::blocked_range<int>(0, n, 1024), 0.0,
//       [&](const tessera::blocked_range<int>& r, double acc) { ... return acc; },
//       std::plus<>());
//
// Contract
// - Who may call: a fiber of a running runtime (its runtime is used), or any
//   thread with the runtime passed first. The caller takes part: it runs the
//   first piece itself, then waits as task_group::wait() does (helps, then
//   parks a fiber / blocks a thread). Nested calls are fine (a piece may call
//   parallel_for again).
// - Partitioner (parallel_for, parallel_for_each): recursive halving. The
//   range is split in two, the right half queued as a job, the left half split
//   again, until pieces are no larger than max(grain, ceil(n / (8 × workers)))
//   — about eight pieces per worker, so a worker that finishes early steals a
//   large half, and no piece smaller than the grain (default 1). The grain is
//   a minimum, as with oneTBB's auto_partitioner.
// - parallel_reduce is deterministic: its split tree depends only on the range
//   and the grain (pieces of max(grain, ceil(n / 256)) elements), never on the
//   worker count or timing, and partial results are combined in range order,
//   left with right (oneTBB's parallel_deterministic_reduce). The same inputs
//   give bit-identical floating-point results on 1 or 64 workers.
// - Errors: the first exception of any piece cancels the pieces not yet
//   started and is rethrown to the caller once all started ones have ended.
//   An empty range does nothing. A grain of 0 counts as 1. No runtime and not
//   on a fiber: std::logic_error.
// - Memory ordering: everything before the call happens-before each piece;
//   each piece happens-before the return.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <iterator>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/detail/job_scope.h"

namespace tessera {

class runtime;

/// A half-open range [begin, end) of an integral type or a random-access
/// iterator, with a grain size (oneTBB's tbb::blocked_range).
template <class Value>
class blocked_range {
 public:
  using const_iterator = Value;
  using size_type = std::size_t;

  blocked_range(Value first, Value last, size_type grainsize = 1)
      : begin_(first), end_(last), grain_(grainsize == 0 ? 1 : grainsize) {}
  Value begin() const { return begin_; }
  Value end() const { return end_; }
  size_type size() const { return end_ > begin_ ? static_cast<size_type>(end_ - begin_) : 0; }
  size_type grainsize() const { return grain_; }
  bool empty() const { return !(begin_ < end_); }
  bool is_divisible() const { return size() > grain_; }

  /// Splits off and returns the right half; *this keeps the left one.
  blocked_range split_right() {
    const Value mid = begin_ + static_cast<std::make_signed_t<size_type>>(size() / 2);
    blocked_range right(mid, end_, grain_);
    end_ = mid;
    return right;
  }

 private:
  Value begin_, end_;
  size_type grain_;
};

namespace detail {

/// Pieces per worker of the parallel_for partitioner.
inline constexpr std::size_t kPiecesPerWorker = 8;
/// At most this many pieces in a parallel_reduce, whatever the worker count.
inline constexpr std::size_t kReducePieces = 256;

template <class Range, class Body>
void for_pieces(job_scope& s, Range r, const Body& body, std::size_t chunk) {
  while (r.size() > chunk) {
    Range right = r.split_right();
    s.spawn([&s, right, &body, chunk] { for_pieces(s, right, body, chunk); });
  }
  if (!s.cancelled()) body(r);
}

template <class Range, class Body>
void parallel_for_on(runtime_impl* rt, const Range& range, const Body& body) {
  if (range.empty()) return;
  const std::size_t n = range.size();
  const std::size_t per = kPiecesPerWorker * worker_count(rt);
  const std::size_t chunk = std::max(range.grainsize(), (n + per - 1) / per);
  job_scope s(rt);
  s.run_inline([&] { for_pieces(s, range, body, chunk); });
  s.wait();
}

template <class Range, class T, class Body, class Reduction>
T reduce_pieces(runtime_impl* rt, Range r, const T& identity, const Body& body,
                const Reduction& reduction, std::size_t chunk) {
  if (r.size() <= chunk) return body(static_cast<const Range&>(r), identity);
  Range right = r.split_right();
  std::optional<T> right_value;
  job_scope s(rt);
  s.spawn([&] { right_value.emplace(reduce_pieces(rt, right, identity, body, reduction, chunk)); });
  std::optional<T> left_value;
  s.run_inline([&] { left_value.emplace(reduce_pieces(rt, r, identity, body, reduction, chunk)); });
  s.wait();  // rethrows the first exception of either half
  return reduction(std::move(*left_value), std::move(*right_value));
}

}  // namespace detail

/// Calls body(subrange) on pieces that together cover `range` exactly once.
template <class Value, class Body>
void parallel_for(runtime& rt, const blocked_range<Value>& range, const Body& body) {
  detail::parallel_for_on(detail::impl_of(rt), range, body);
}
template <class Value, class Body>
void parallel_for(const blocked_range<Value>& range, const Body& body) {
  detail::parallel_for_on(detail::runtime_for("tessera::parallel_for"), range, body);
}

/// Calls f(i) for every i in [first, last), with the given minimum grain.
template <class Index, class F,
          class = std::enable_if_t<std::is_integral_v<Index> && std::is_invocable_v<F&, Index>>>
void parallel_for(runtime& rt, Index first, Index last, const F& f, std::size_t grain = 1) {
  parallel_for(rt, blocked_range<Index>(first, last, grain), [&f](const blocked_range<Index>& r) {
    for (Index i = r.begin(); i != r.end(); ++i) f(i);
  });
}
template <class Index, class F,
          class = std::enable_if_t<std::is_integral_v<Index> && std::is_invocable_v<F&, Index>>>
void parallel_for(Index first, Index last, const F& f, std::size_t grain = 1) {
  detail::parallel_for_on(detail::runtime_for("tessera::parallel_for"),
                          blocked_range<Index>(first, last, grain),
                          [&f](const blocked_range<Index>& r) {
                            for (Index i = r.begin(); i != r.end(); ++i) f(i);
                          });
}

/// Calls f(*it) for every element of [first, last). Random-access iterators
/// are split directly; others are first collected (one pass, sequential).
template <class It, class F>
void parallel_for_each(runtime& rt, It first, It last, const F& f);
template <class It, class F>
void parallel_for_each(It first, It last, const F& f) {
  if constexpr (std::is_base_of_v<std::random_access_iterator_tag,
                                  typename std::iterator_traits<It>::iterator_category>) {
    detail::parallel_for_on(detail::runtime_for("tessera::parallel_for_each"),
                            blocked_range<It>(first, last), [&f](const blocked_range<It>& r) {
                              for (It i = r.begin(); i != r.end(); ++i) f(*i);
                            });
  } else {
    std::vector<It> its;
    for (It i = first; i != last; ++i) its.push_back(i);
    parallel_for_each(its.begin(), its.end(), [&f](It i) { f(*i); });
  }
}
template <class It, class F>
void parallel_for_each(runtime& rt, It first, It last, const F& f) {
  if constexpr (std::is_base_of_v<std::random_access_iterator_tag,
                                  typename std::iterator_traits<It>::iterator_category>) {
    parallel_for(rt, blocked_range<It>(first, last), [&f](const blocked_range<It>& r) {
      for (It i = r.begin(); i != r.end(); ++i) f(*i);
    });
  } else {
    std::vector<It> its;
    for (It i = first; i != last; ++i) its.push_back(i);
    parallel_for_each(rt, its.begin(), its.end(), [&f](It i) { f(*i); });
  }
}

/// Reduces `range`: body(subrange, identity) -> T for each piece, combined
/// with reduction(T, T) -> T in range order. Deterministic (see above).
template <class Value, class T, class Body, class Reduction>
T parallel_reduce(runtime& rt, const blocked_range<Value>& range, const T& identity,
                  const Body& body, const Reduction& reduction) {
  if (range.empty()) return identity;
  const std::size_t chunk = std::max(range.grainsize(), (range.size() + detail::kReducePieces - 1) /
                                                            detail::kReducePieces);
  return detail::reduce_pieces(detail::impl_of(rt), range, identity, body, reduction, chunk);
}
template <class Value, class T, class Body, class Reduction>
T parallel_reduce(const blocked_range<Value>& range, const T& identity, const Body& body,
                  const Reduction& reduction) {
  if (range.empty()) return identity;
  const std::size_t chunk = std::max(range.grainsize(), (range.size() + detail::kReducePieces - 1) /
                                                            detail::kReducePieces);
  return detail::reduce_pieces(detail::runtime_for("tessera::parallel_reduce"), range, identity,
                               body, reduction, chunk);
}

/// Runs every f concurrently (all but the last as jobs, the last on the
/// caller) and returns when all have; rethrows the first exception. From a
/// fiber of a running runtime.
template <class... F>
void parallel_invoke(F&&... fs) {
  static_assert(sizeof...(F) >= 1, "tessera::parallel_invoke needs at least one function");
  detail::job_scope s(detail::runtime_for("tessera::parallel_invoke"));
  std::size_t left = sizeof...(F);
  (
      [&] {
        if (--left != 0) {
          s.spawn([&fs] { fs(); });
        } else {
          s.run_inline([&fs] { fs(); });
        }
      }(),
      ...);
  s.wait();
}

}  // namespace tessera
