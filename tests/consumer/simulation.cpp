// An installed tessera::testing: three fibers sleep an hour of virtual time
// and take a mutex, under 20 schedules, in well under a second.
#include <tessera/tessera.h>
#include <tessera/testing/simulation.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <vector>

int main() {
  const auto start = std::chrono::steady_clock::now();
  const auto seed = tessera::testing::explore(
      [] {
        tessera::mutex m;
        int n = 0;
        std::vector<tessera::fiber> fibers;
        for (int i = 0; i < 3; ++i) {
          fibers.emplace_back([&] {
            tessera::this_fiber::sleep_for(std::chrono::hours(1));
            std::lock_guard lock(m);
            ++n;
          });
        }
        for (auto& f : fibers) f.join();
        if (n != 3) throw std::runtime_error("an increment was lost");
      },
      {.runs = 20});
  if (seed) {
    std::printf("consumer_simulation: seed %s failed\n",
                tessera::testing::seed_string(*seed).c_str());
    return 1;
  }
  if (std::chrono::steady_clock::now() - start > std::chrono::seconds(30)) {
    std::printf("consumer_simulation: an hour of virtual time took real time\n");
    return 1;
  }
  std::printf("consumer_simulation ok\n");
  return 0;
}
