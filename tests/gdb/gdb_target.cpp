// The program tests/gdb/gdb_test.sh debugs: three named fibers parked on a
// latch, in a function of known name, while the root fiber stops in
// tessera_gdb_ready() for gdb's breakpoint.
#include <tessera/latch.h>
#include <tessera/runtime.h>

#include <cstdio>
#include <string>

extern "C" [[gnu::noinline]] void tessera_gdb_ready() {
  asm volatile("" ::: "memory");
}

namespace {

[[gnu::noinline]] void parked_in_gdb_target(tessera::latch& gate) {
  gate.wait();
  asm volatile("" ::: "memory");  // not a tail call: this frame stays on the stack
}

}  // namespace

int main() {
  tessera::runtime rt({.workers = 1});
  // Outside the root fiber: the waiters still use `gate` after the root,
  // having counted it down, returns.
  tessera::latch ready(3), gate(1);
  rt.run([&] {
    for (int i = 0; i < 3; ++i) {
      tessera::spawn([&, i] {
        tessera::this_fiber::set_name("waiter " + std::to_string(i));
        ready.count_down();
        parked_in_gdb_target(gate);
      });
    }
    ready.wait();
    // One worker: the three have parked on `gate` before the root runs again.
    tessera_gdb_ready();
    gate.count_down();
  });
  std::puts("gdb_target: done");
}
