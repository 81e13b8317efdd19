// tests/simulated_bugs.h — bugs for the simulation to find, shared by its
// tests and bench/simbench: one this project fixed before, restored, and two
// small ones that show what each schedule is good at.
//
// auto_reset_event's timed-wait race: a waiter that timed out just as a
// signal counted it in waited for the gate untimed; a caller arriving
// meanwhile could take the permit, and the waiter then outlived every
// signal. The event's algorithm is restored before and after the fix, its
// status word a tessera::testing::atomic (every operation a switch point, as
// loom's and shuttle's atomics); its gate is the library's counting_semaphore,
// whose calls are switch points in a simulation anyway.
#pragma once

#include <tessera/testing/gtest.h>
#include <tessera/testing/simulation.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include <tessera/tessera.h>

namespace simulated {

/// Explorations run a tenth of their seeds under ThreadSanitizer, where each
/// fiber's creation costs milliseconds (its per-fiber state is created and
/// cleared): the same bodies, fewer schedules.
constexpr std::uint64_t scaled(std::uint64_t runs) {
#if defined(__SANITIZE_THREAD__)
  return runs / 10;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  return runs / 10;
#else
  return runs;
#endif
#else
  return runs;
#endif
}

using namespace std::chrono_literals;

// tessera::auto_reset_event's box office (Preshing's), with `Fixed` choosing
// the withdrawal after a timed-out gate wait.
template <bool Fixed>
class event_under_test {
 public:
  void signal() {
    int s = status_.load(std::memory_order_relaxed);
    for (;;) {
      const int next = s < 1 ? s + 1 : 1;
      if (status_.compare_exchange_weak(s, next, std::memory_order_release,
                                        std::memory_order_relaxed)) {
        break;
      }
    }
    if (s < 0) gate_.release();
  }
  bool try_wait() {
    int s = status_.load(std::memory_order_relaxed);
    while (s == 1) {
      if (status_.compare_exchange_weak(s, 0, std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }
  bool wait_for(std::chrono::microseconds d) {
    if (status_.fetch_sub(1, std::memory_order_acquire) >= 1) return true;
    if (gate_.try_acquire_for(d)) return true;
    if constexpr (Fixed) {
      for (;;) {  // the fix: look again, never wait untimed
        int s = status_.load(std::memory_order_relaxed);
        while (s < 0) {
          if (status_.compare_exchange_weak(s, s + 1, std::memory_order_relaxed)) return false;
        }
        if (gate_.try_acquire_for(100us)) return true;
      }
    } else {
      int s = status_.load(std::memory_order_relaxed);
      while (s < 0) {
        if (status_.compare_exchange_weak(s, s + 1, std::memory_order_relaxed)) return false;
      }
      gate_.acquire();  // the bug: a signal chose us, but its permit may go to another
      return true;
    }
  }

 private:
  tessera::testing::atomic<int> status_{0};
  tessera::counting_semaphore<> gate_{0};
};

// One signal and two timed waits, all due at the same virtual instant: the
// signal lets exactly one through, or stays set; nobody waits for ever.
template <bool Fixed>
void timed_waits_body() {
  event_under_test<Fixed> ev;
  int passes = 0;
  tessera::fiber signaller([&] {
    tessera::this_fiber::sleep_for(1ms);
    ev.signal();
  });
  tessera::fiber first([&] { passes += ev.wait_for(1ms) ? 1 : 0; });
  tessera::fiber second([&] {
    tessera::this_fiber::sleep_for(1ms);
    passes += ev.wait_for(1ms) ? 1 : 0;
  });
  signaller.join();
  first.join();
  second.join();
  const int pending = ev.try_wait() ? 1 : 0;
  TESSERA_SIM_CHECK(passes + pending == 1);
}

// A lost update: read, yield, write back.
inline void lost_update_body() {
  int counter = 0;
  auto add = [&] {
    const int seen = counter;
    tessera::this_fiber::yield();
    counter = seen + 1;
  };
  auto a = tessera::fiber(add);
  auto b = tessera::fiber(add);
  a.join();
  b.join();
  if (counter != 2) throw std::runtime_error("lost update: counter is " + std::to_string(counter));
}

// An order a random schedule almost never tries: one fiber taking 30
// steps with no other fiber running in between (each step a switch point).
// PCT runs the highest-priority fiber until something stops it, so about
// half its runs try that order; random, one in 2^30.
inline void uninterrupted_run_body() {
  tessera::testing::atomic<int> progress{0};
  auto writer = tessera::fiber([&] {
    for (int i = 0; i < 30; ++i) progress.fetch_add(1);
  });
  auto reader = tessera::fiber([&] {
    if (progress.load() == 30)
      throw std::runtime_error("the reader ran after the writer's 30 steps");
  });
  writer.join();
  reader.join();
}

}  // namespace simulated
