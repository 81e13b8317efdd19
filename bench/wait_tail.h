// bench/wait_tail.h — the acquisition-latency tail the benchmarks report
// (semabench --latency, fiberbench latency): time an acquisition, then reduce
// the recorded waits to p99.9 and max.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera::samples {

/// Calls `acquire()` and appends how long it took (ns, saturated at 2^32-1) to `waits`.
template <class Acquire>
void timed_acquire(std::vector<std::uint32_t>& waits, Acquire&& acquire) {
  const auto t0 = std::chrono::steady_clock::now();
  acquire();
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0);
  waits.push_back(static_cast<std::uint32_t>(std::min<std::int64_t>(ns.count(), UINT32_MAX)));
}

/// p99.9 and max of a run's waits, µs (zeros when none). Reorders `waits`.
struct wait_tail {
  double p999_us = 0;
  double max_us = 0;
};
inline wait_tail tail_of(std::vector<std::uint32_t>& waits) {
  wait_tail t;
  if (waits.empty()) return t;
  const auto k = static_cast<std::size_t>(static_cast<double>(waits.size() - 1) * 0.999);
  std::nth_element(waits.begin(), waits.begin() + static_cast<std::ptrdiff_t>(k), waits.end());
  t.p999_us = waits[k] / 1e3;
  t.max_us = *std::max_element(waits.begin(), waits.end()) / 1e3;
  return t;
}

}  // namespace tessera::samples
