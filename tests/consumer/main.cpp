#include <tessera/tessera.h>

#include <cstdio>
#include <mutex>
#include <shared_mutex>
#include <thread>

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
  std::printf("consumer ok: tessera %s, TESSERA_CHECKS %d\n", tessera::version, TESSERA_CHECKS);
  return 0;
}
