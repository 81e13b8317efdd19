#include <tessera/tessera.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

int main() {
  tessera::counting_semaphore<> sem(0);
  std::thread t([&] { sem.release(); });
  sem.acquire();
  t.join();
  // Reads and writes through the library's out-of-line paths (a writer drains
  // the reader slots): this hung when the consumer's build type disagreed with
  // the library's about the lock's layout.
  tessera::shared_mutex rw;
  long value = 0, sum = 0;
  for (int i = 0; i < 1000; ++i) {
    if (i % 10 == 9) {
      std::lock_guard w(rw);
      ++value;
    } else {
      std::shared_lock r(rw);
      sum += value;
    }
  }
  if (value != 100 || sum != 44550) {
    std::printf("consumer: shared_mutex gave value %ld sum %ld (want 100, 44550)\n", value, sum);
    return 1;
  }
  // Fibers that park inside catch handlers: the program's compiler (clang, in
  // consumer_clang) and the library's must agree on the C++ ABI's exception
  // state that the library carries from worker to worker.
  std::atomic<int> bad{0};
  tessera::runtime rt({.workers = 2});
  rt.run([&] {
    tessera::mutex m;
    std::vector<tessera::fiber> fibers;
    for (int i = 0; i < 16; ++i) {
      fibers.emplace_back([&, i] {
        for (int round = 0; round < 50; ++round) {
          try {
            throw std::runtime_error(std::to_string(i));
          } catch (const std::runtime_error& e) {
            {
              std::lock_guard lock(m);
              tessera::this_fiber::yield();
            }
            try {
              throw;
            } catch (const std::runtime_error& again) {
              if (&again != &e || std::to_string(i) != e.what()) ++bad;
            }
          }
        }
      });
    }
    for (auto& f : fibers) f.join();
  });
  if (bad != 0) {
    std::printf("consumer: %d handlers saw another fiber's exception\n", bad.load());
    return 1;
  }
  std::printf("consumer ok: tessera %s, TESSERA_CHECKS %d\n", tessera::version, TESSERA_CHECKS);
  return 0;
}
