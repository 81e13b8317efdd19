// The park façade's OS-thread path: one futex word per thread waiter, and the
// type-stable pool of thread waiter records.
#include "tessera/park.h"

#include <sched.h>
#include <time.h>

#include <mutex>
#include <vector>

#include "tessera/detail/futex.h"
#include "tessera/detail/tick_clock.h"
#include "tessera/detail/tls_access.h"

namespace tessera {
namespace {

// Permit word states for thread waiters (the Rust std futex parker's scheme).
constexpr std::int32_t kEmpty = 0;
constexpr std::int32_t kNotified = 1;
constexpr std::int32_t kParked = -1;

// Counted on the futex paths only (a sleep or a wake is a system call anyway);
// relaxed: a hint, not a synchronization.
std::atomic<std::uint64_t> sleeps_and_wakes{0};

// Waits while *word == kParked; returns false only on timeout.
bool futex_wait_parked(std::atomic<std::int32_t>* word, detail::deadline deadline) {
  sleeps_and_wakes.fetch_add(1, std::memory_order_relaxed);
  return detail::futex_wait(word, kParked, deadline) != detail::futex_status::timed_out;
}

void thread_park(waiter& self) {
  // 1 -> 0 consumes a pending permit; 0 -> -1 announces that we sleep.
  // acquire: pairs with the release exchange in thread_unpark.
  if (self.state.fetch_sub(1, std::memory_order_acquire) == kNotified) return;
  for (;;) {
    futex_wait_parked(&self.state, {});
    std::int32_t expected = kNotified;
    // acquire: pairs with the release exchange in thread_unpark.
    if (self.state.compare_exchange_strong(expected, kEmpty, std::memory_order_acquire)) return;
    // Futex woke without a permit (EINTR or a futex-level spurious wake): sleep again.
  }
}

bool thread_park_until(waiter& self, std::chrono::steady_clock::time_point deadline) {
  if (self.state.fetch_sub(1, std::memory_order_acquire) == kNotified) return true;
  for (;;) {
    const bool woken = futex_wait_parked(&self.state, deadline);
    if (!woken) {
      // Timed out: leave the parked state. If an unpark raced in, we consume its
      // permit and report success rather than dropping it.
      return self.state.exchange(kEmpty, std::memory_order_acquire) == kNotified;
    }
    std::int32_t expected = kNotified;
    if (self.state.compare_exchange_strong(expected, kEmpty, std::memory_order_acquire))
      return true;
    if (std::chrono::steady_clock::now() >= deadline) {
      return self.state.exchange(kEmpty, std::memory_order_acquire) == kNotified;
    }
  }
}

void thread_unpark(waiter& who) noexcept {
  // release: whatever the unparker wrote before unpark is visible to the parker.
  if (who.state.exchange(kNotified, std::memory_order_release) == kParked) {
    sleeps_and_wakes.fetch_add(1, std::memory_order_relaxed);
    detail::futex_wake(&who.state, 1);
  }
}

void thread_yield(waiter&) {
  sched_yield();
}

// Type-stable pool of thread waiter records: allocated once, recycled when a
// thread exits, never freed (a stale unpark must stay harmless: docs/design.md).
struct thread_waiter_pool {
  std::mutex mu;
  std::vector<waiter*> free_list;

  waiter* take() {
    {
      std::lock_guard lock(mu);
      if (!free_list.empty()) {
        waiter* w = free_list.back();
        free_list.pop_back();
        ++w->generation;  // a new owner
        return w;
      }
    }
    auto* w = new waiter;  // never deleted: type-stable by design
    w->ops = &detail::thread_park_ops;
    return w;
  }
  void give_back(waiter* w) {
    std::lock_guard lock(mu);
    free_list.push_back(w);
  }
};

thread_waiter_pool& pool() {
  static auto* p = new thread_waiter_pool;  // leaked on purpose: outlives thread_local destructors
  return *p;
}

// Holds the thread's record; returns it to the pool when the thread exits.
struct thread_record {
  waiter* w = nullptr;
  ~thread_record() {
    if (w != nullptr) pool().give_back(w);
  }
};

constinit thread_local waiter* tls_current = nullptr;
constinit thread_local waiter* tls_thread = nullptr;

[[gnu::noinline]] waiter* init_thread_waiter() {
  thread_local thread_record record;
  if (record.w == nullptr) record.w = pool().take();
  tls_thread = record.w;
  if (tls_current == nullptr) tls_current = record.w;
  return record.w;
}

}  // namespace

namespace detail {
const park_ops thread_park_ops{&thread_park,  &thread_park_until, &thread_unpark,
                               &thread_yield, "thread",           true};

std::uint64_t thread_sleeps_and_wakes() noexcept {
  return sleeps_and_wakes.load(std::memory_order_relaxed);
}

TESSERA_TLS_ACCESSOR waiter*& current_waiter_slot() noexcept {
  if (tls_current == nullptr) init_thread_waiter();
  return tls_current;
}

TESSERA_TLS_ACCESSOR waiter* thread_waiter() noexcept {
  waiter* w = tls_thread;
  return w != nullptr ? w : init_thread_waiter();
}
}  // namespace detail

// The calls below read tls_current on the calling thread every time, even
// under LTO (tessera/detail/tls_access.h): a fiber calls them on both sides
// of a park, and may be on another worker after it.
TESSERA_TLS_ACCESSOR waiter* self() noexcept {
  waiter* w = tls_current;
  return w != nullptr ? w : init_thread_waiter();
}

TESSERA_TLS_ACCESSOR void park() {
  waiter* w = tls_current;  // self(), inlined: the hot path of every primitive
  if (w == nullptr) w = init_thread_waiter();
  w->ops->park(*w);
}

TESSERA_TLS_ACCESSOR bool park_until(std::chrono::steady_clock::time_point deadline) {
  waiter* w = self();
  return w->ops->park_until(*w, deadline);
}

TESSERA_TLS_ACCESSOR bool should_spin() noexcept {
  return self()->ops->is_os_thread;
}

TESSERA_TLS_ACCESSOR void yield_now() {
  waiter* w = self();
  w->ops->yield(*w);
}

std::int64_t wait_info::since_ns() const noexcept {
  const std::int64_t stamp = since.load(std::memory_order_relaxed);
  return stamp != 0 ? detail::tick_clock::stamp_to_ns(stamp) : 0;
}

std::int64_t wait_info::seen_since() noexcept {
  std::int64_t s = since.load(std::memory_order_relaxed);
  if (s != 0) return s;
  const std::int64_t now = detail::tick_clock::stamp();
  // Relaxed: a snapshot. Fails only if the waiter began a new wait, stamped
  // (a barging lock's), or another observer stamped first: keep theirs.
  return since.compare_exchange_strong(s, now, std::memory_order_relaxed) ? now : s;
}

}  // namespace tessera
