// The TSC-or-steady_clock clock of hot paths (tessera/detail/tick_clock.h).
//
// Why: a fiber's mutex hand-off read steady_clock twice (when the waiter
// queued, and when the unlock looked at the fairness timer), and a wait
// record once; on a virtual machine's clock source those reads were 30-45 %
// of the hand-off (docs/benchmarks.md, "The hand-offs a user calls"). The TSC rate is not
// asked of the kernel, which does not publish it: it is measured against
// steady_clock from a reference pair taken during static initialisation.
#include "tessera/detail/tick_clock.h"

#include <time.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace tessera::detail {
namespace {

bool invariant_tsc() noexcept {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  // unsigned in GCC's cpuid.h, int in clang's
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000u, nullptr)) < 0x80000007u) return false;
  __get_cpuid(0x80000007u, &a, &b, &c, &d);
  return (d & (1u << 8)) != 0;
#else
  return false;
#endif
}

std::int64_t tsc() noexcept {
#if defined(__x86_64__)
  return static_cast<std::int64_t>(__rdtsc());
#else
  return 0;
#endif
}

// The base the rate is measured over.
constexpr std::int64_t kCalibrationNs = 1'000'000;

}  // namespace

const bool tick_clock::uses_tsc = invariant_tsc();
const tick_clock::rep tick_clock::tsc0_ = tsc();
const tick_clock::rep tick_clock::ns0_ = steady_ns();

tick_clock::rep tick_clock::coarse_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

tick_clock::rep tick_clock::calibrate() noexcept {
  std::int64_t t1 = tsc();
  std::int64_t n1 = steady_ns();
  while (n1 - ns0_ < kCalibrationNs) {  // only in the process's first millisecond
    t1 = tsc();
    n1 = steady_ns();
  }
  const auto measured =
      static_cast<rep>(static_cast<double>(t1 - tsc0_) * 1e6 / static_cast<double>(n1 - ns0_));
  const rep v = measured > 0 ? measured : 1;
  per_ms_.store(v, std::memory_order_relaxed);  // racing callers store the same kind of value
  return v;
}

tick_clock::rep tick_clock::stamp_to_ns(rep stamp) noexcept {
  if (!uses_tsc) return stamp;
  const rep rate = per_ms();
  const std::int64_t t1 = tsc();
  const std::int64_t n1 = steady_ns();
  if (stamp >= t1) return n1;
  return n1 - static_cast<rep>(static_cast<double>(t1 - stamp) * 1e6 / static_cast<double>(rate));
}

}  // namespace tessera::detail
