// Google Benchmark microbenchmarks, each beside its std/pthread equivalent:
// uncontended acquire+release, park/unpark ping-pong between two threads
// (round trip), atomic_wait/notify ping-pong (round trip).
#include <benchmark/benchmark.h>
#include <semaphore.h>
#include "baseline/preshing_shared_mutex.h"
#include "baseline/ticket_semaphore.h"
#include "baseline/twa_spin_semaphore.h"
#include <tessera/tessera.h>

#include <atomic>
#include <mutex>
#include <semaphore>
#include <shared_mutex>
#include <thread>

namespace {

// ---- uncontended acquire + release ----------------------------------------------
template <class S>
void BM_Uncontended(benchmark::State& state) {
  S s(1);
  for (auto _ : state) {
    s.acquire();
    s.release();
  }
}
BENCHMARK_TEMPLATE(BM_Uncontended, tessera::counting_semaphore<>)->Name("uncontended/tessera::counting_semaphore");
BENCHMARK_TEMPLATE(BM_Uncontended, tessera::ticket_semaphore)->Name("uncontended/tessera::ticket_semaphore");
BENCHMARK_TEMPLATE(BM_Uncontended, std::counting_semaphore<>)->Name("uncontended/std::counting_semaphore");

void BM_UncontendedSemT(benchmark::State& state) {
  sem_t s;
  sem_init(&s, 0, 1);
  for (auto _ : state) {
    sem_wait(&s);
    sem_post(&s);
  }
  sem_destroy(&s);
}
BENCHMARK(BM_UncontendedSemT)->Name("uncontended/sem_t");

void BM_UncontendedStdMutex(benchmark::State& state) {
  std::mutex m;
  for (auto _ : state) {
    m.lock();
    m.unlock();
  }
}
BENCHMARK(BM_UncontendedStdMutex)->Name("uncontended/std::mutex");

// ---- ping-pong: one iteration = one round trip between two threads ----------------
void BM_ParkUnparkPingPong(benchmark::State& state) {
  std::atomic<int> turn{0};
  std::atomic<tessera::waiter*> peer{nullptr};
  std::atomic<bool> done{false};
  tessera::waiter* me = tessera::self();
  std::thread t([&] {
    peer = tessera::self();
    for (;;) {
      while (turn.load() != 1) {
        if (done.load()) return;
        tessera::park();
      }
      turn.store(0);
      tessera::unpark(me);
    }
  });
  while (peer.load() == nullptr) std::this_thread::yield();
  for (auto _ : state) {
    turn.store(1);
    tessera::unpark(peer.load());
    while (turn.load() != 0) tessera::park();
  }
  done = true;
  tessera::unpark(peer.load());
  t.join();
}
BENCHMARK(BM_ParkUnparkPingPong)->Name("pingpong/tessera park+unpark")->UseRealTime();

template <class S>
void BM_SemaphorePingPong(benchmark::State& state) {
  S ping(0), pong(0);
  std::atomic<bool> done{false};
  std::thread t([&] {
    for (;;) {
      ping.acquire();
      if (done.load()) return;
      pong.release();
    }
  });
  for (auto _ : state) {
    ping.release();
    pong.acquire();
  }
  done = true;
  ping.release();
  t.join();
}
BENCHMARK_TEMPLATE(BM_SemaphorePingPong, tessera::binary_semaphore)->Name("pingpong/tessera::binary_semaphore")->UseRealTime();
BENCHMARK_TEMPLATE(BM_SemaphorePingPong, std::binary_semaphore)->Name("pingpong/std::binary_semaphore")->UseRealTime();
// admission::handoff between two OS threads: its polling waiter against the
// TWA semaphore's spinning one.
struct handoff_binary_semaphore : tessera::binary_semaphore {
  explicit handoff_binary_semaphore(std::ptrdiff_t n)
      : tessera::binary_semaphore(n, tessera::admission::handoff) {}
};
BENCHMARK_TEMPLATE(BM_SemaphorePingPong, handoff_binary_semaphore)
    ->Name("pingpong/tessera::binary_semaphore handoff")
    ->UseRealTime();

struct posix_sem {
  sem_t s;
  explicit posix_sem(int n) { sem_init(&s, 0, static_cast<unsigned>(n)); }
  ~posix_sem() { sem_destroy(&s); }
  void acquire() { while (sem_wait(&s) != 0) {} }
  void release() { sem_post(&s); }
};
BENCHMARK_TEMPLATE(BM_SemaphorePingPong, posix_sem)->Name("pingpong/sem_t")->UseRealTime();

// atomic_wait ping-pong: tessera:: vs std::atomic::wait.
template <bool Tessera>
void BM_AtomicWaitPingPong(benchmark::State& state) {
  std::atomic<int> turn{0};
  std::atomic<bool> done{false};
  auto wait = [](std::atomic<int>& a, int old) {
    if constexpr (Tessera) tessera::atomic_wait(&a, old); else a.wait(old);
  };
  auto notify = [](std::atomic<int>& a) {
    if constexpr (Tessera) tessera::atomic_notify_one(&a); else a.notify_one();
  };
  std::thread t([&] {
    for (;;) {
      wait(turn, 0);
      if (done.load()) return;
      turn.store(0);
      notify(turn);
    }
  });
  for (auto _ : state) {
    turn.store(1);
    notify(turn);
    wait(turn, 1);
  }
  done = true;
  turn.store(2);
  notify(turn);
  t.join();
}
BENCHMARK_TEMPLATE(BM_AtomicWaitPingPong, true)->Name("pingpong/tessera::atomic_wait")->UseRealTime();
BENCHMARK_TEMPLATE(BM_AtomicWaitPingPong, false)->Name("pingpong/std::atomic::wait")->UseRealTime();

}  // namespace

// Read-mostly reader-writer lock: each thread does 1 write per 100 reads; each
// section advances a small shared state (reads copy it, writes bump it).
template <class RW>
void BM_ReadMostly(benchmark::State& state) {
  static RW lock;
  static std::uint64_t shared_state[4];
  std::uint64_t sink = 0;
  unsigned i = static_cast<unsigned>(state.thread_index()) * 37u;
  for (auto _ : state) {
    if (++i % 101 == 0) {
      std::unique_lock w(lock);
      ++shared_state[i & 3];
    } else {
      std::shared_lock r(lock);
      sink += shared_state[i & 3];
    }
  }
  benchmark::DoNotOptimize(sink);
}
BENCHMARK_TEMPLATE(BM_ReadMostly, tessera::shared_mutex)->Name("read-mostly/tessera::shared_mutex")->ThreadRange(1, 8)->UseRealTime();
BENCHMARK_TEMPLATE(BM_ReadMostly, tessera::preshing_shared_mutex)->Name("read-mostly/tessera::preshing_shared_mutex")->ThreadRange(1, 8)->UseRealTime();
BENCHMARK_TEMPLATE(BM_ReadMostly, tessera::shared_timed_mutex)->Name("read-mostly/tessera::shared_timed_mutex")->ThreadRange(1, 8)->UseRealTime();
BENCHMARK_TEMPLATE(BM_ReadMostly, std::shared_mutex)->Name("read-mostly/std::shared_mutex")->ThreadRange(1, 8)->UseRealTime();

BENCHMARK_MAIN();
