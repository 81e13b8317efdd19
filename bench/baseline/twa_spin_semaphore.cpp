// TWA-Semaphore with a spinning waiting array (Dice & Kogan, Listing 2).
#include "baseline/twa_spin_semaphore.h"

#include <algorithm>

namespace tessera {
namespace detail {
namespace {
constexpr std::size_t spin_bucket_count = 2048;  // Listing 2's TableSize
alignas(4096) constinit spin_bucket spin_table[spin_bucket_count];
}  // namespace

spin_bucket& spin_bucket_at(std::uint32_t index) noexcept {
  return spin_table[index & (spin_bucket_count - 1)];
}
}  // namespace detail

twa_spin_semaphore::twa_spin_semaphore(std::ptrdiff_t desired)
    : hash_base_(static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(this) >> 7)) {
  if (desired < 0) {
    throw std::invalid_argument("tessera::twa_spin_semaphore: initial count " +
                                std::to_string(desired) + " is negative");
  }
  grant_.store(static_cast<std::uint64_t>(desired));
}

void twa_spin_semaphore::acquire_slow(std::uint64_t tx) noexcept {
  auto& bucket = detail::spin_bucket_at(hash(tx));
  std::uint64_t mx = bucket.update_sequence.load();
  for (;;) {
    const auto dx = static_cast<std::int64_t>(grant_.load() - tx);
    if (dx > 0) return;
    if (dx + long_term_threshold > 0) {  // near: global spinning on the grant
      detail::cpu_relax();
      continue;
    }
    const std::uint64_t vx = mx;  // far: semi-local spinning on the bucket
    while ((mx = bucket.update_sequence.load()) == vx) detail::cpu_relax();
  }
}

void twa_spin_semaphore::release(std::ptrdiff_t update) {
  if (update < 0) {
    throw std::invalid_argument("tessera::twa_spin_semaphore::release: update " +
                                std::to_string(update) + " is negative");
  }
  const auto n = static_cast<std::uint64_t>(update);
  const std::uint64_t g = grant_.fetch_add(n) + n;  // the new grant
  const std::uint64_t t = ticket_.load();
  // Tickets [g - n + L, g + L) just came within the threshold: poke their buckets.
  const std::uint64_t first = g - n + long_term_threshold;
  // Listing 2's shortcut (old grant + L >= ticket): none of those tickets was taken.
  if (static_cast<std::int64_t>(first - t) >= 0) return;
  const std::uint64_t last = std::min<std::uint64_t>(g + long_term_threshold, t);
  for (std::uint64_t k = first; k < last; ++k) {
    detail::spin_bucket_at(hash(k)).update_sequence.fetch_add(1);
  }
}

}  // namespace tessera
