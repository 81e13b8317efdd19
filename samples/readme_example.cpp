// The README's example, compiled so the front door never shows code that does not build.
#include <tessera/tessera.h>
#include <cstdio>
#include <mutex>
#include <vector>

int main() {
  tessera::runtime rt({.workers = 2});          // one worker per core by default
  long total = rt.run([] {                      // the root fiber; run() returns its value
    tessera::mutex m;                           // works for fibers and threads alike
    long sum = 0;
    std::vector<tessera::fiber> fibers;
    for (int i = 1; i <= 100; ++i)
      fibers.emplace_back([&, i] { std::lock_guard lock(m); sum += i; });
    for (auto& f : fibers) f.join();
    return sum;
  });
  std::printf("%ld\n", total);                  // 5050
}
