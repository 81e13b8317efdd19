// deadlock: what a Tessera program that deadlocks prints. Two named fibers
// take two mutexes in opposite orders; the runtime reports it (the cycle is
// followed in builds with TESSERA_CHECKS, which know each mutex's owner) and
// run() throws tessera::deadlock_error.
//   deadlock            the report, on stderr; exit status 1
//   deadlock --dump     first a dump of the live runtime, while both wait
#include <tessera/tessera.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <mutex>

namespace {

// Lives on the root fiber's stack: the deadlocked fibers are abandoned with
// it, holding its mutexes, and nothing destroys a mutex they hold.
struct bank {
  tessera::mutex accounts, audit_log;
  tessera::latch both_hold{2};
};

[[gnu::noinline]] void transfer(bank& b) {
  std::lock_guard a(b.accounts);
  b.both_hold.arrive_and_wait();
  std::lock_guard l(b.audit_log);
}

[[gnu::noinline]] void audit(bank& b) {
  std::lock_guard l(b.audit_log);
  b.both_hold.arrive_and_wait();
  std::lock_guard a(b.accounts);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"deadlock: a lock-order inversion, reported"};
  bool dump = false;
  app.add_flag("--dump", dump, "dump the runtime's fibers while they wait, before the report");
  CLI11_PARSE(app, argc, argv);

  tessera::runtime rt({.workers = 2, .deadlock_grace = std::chrono::milliseconds(300)});
  try {
    rt.run([&] {
      tessera::this_fiber::set_name("main");
      bank b;
      tessera::fiber t([&] {
        tessera::this_fiber::set_name("transfer");
        transfer(b);
      });
      tessera::fiber u([&] {
        tessera::this_fiber::set_name("audit");
        audit(b);
      });
      if (dump) {
        // Both hold their first lock and go for the second: let them wait a while.
        b.both_hold.wait();
        tessera::this_fiber::sleep_for(std::chrono::milliseconds(50));
        rt.dump(std::cout);
        std::cout.flush();
      }
      t.join();
      u.join();
    });
  } catch (const tessera::deadlock_error&) {
    std::puts("caught tessera::deadlock_error");
    return 1;
  }
  return 0;
}
