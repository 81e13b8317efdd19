#include <tessera/tessera.h>

#include <cstdio>
#include <thread>

int main() {
  tessera::counting_semaphore<> sem(0);
  std::thread t([&] { sem.release(); });
  sem.acquire();
  t.join();
  std::printf("consumer ok: tessera %s\n", tessera::version);
  return 0;
}
