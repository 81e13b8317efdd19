// The README's example, compiled so the front door never shows code that does not build.
#include <tessera/tessera.h>
#include <thread>
#include <vector>

int main() {
  tessera::counting_semaphore<> slots(2);      // at most two inside at once, FIFO
  std::vector<std::jthread> workers;
  for (int i = 0; i < 8; ++i)
    workers.emplace_back([&] {
      if (!slots.try_acquire_for(std::chrono::milliseconds(50))) return;  // timed out: holds nothing
      /* ... work ... */
      slots.release();
    });
}
