// bench/pingpong.h — the raw park/unpark ping-pong shared by fiberbench and
// jobbench: two fibers hand a turn back and forth through the park façade.
#pragma once

#include <tessera/park.h>
#include <tessera/runtime.h>

#include <atomic>
#include <chrono>

namespace tessera::samples {

/// Nanoseconds per round trip (two park/unpark hand-offs), `rounds` rounds
/// on a fresh runtime of `workers` workers.
inline double pingpong_park_ns(unsigned workers, int rounds) {
  runtime rt({.workers = workers});
  return rt.run([rounds] {
    std::atomic<int> turn{0};
    std::atomic<waiter*> ids[2] = {nullptr, nullptr};
    auto player = [&](int me) {
      ids[me] = self();
      while (ids[1 - me].load() == nullptr) this_fiber::yield();
      for (int i = 0; i < rounds; ++i) {
        while (turn.load(std::memory_order_acquire) != me) park();
        turn.store(1 - me, std::memory_order_release);
        unpark(ids[1 - me].load(std::memory_order_relaxed));
      }
    };
    const auto t0 = std::chrono::steady_clock::now();
    fiber a(player, 0), b(player, 1);
    a.join();
    b.join();
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
           rounds;
  });
}

}  // namespace tessera::samples
