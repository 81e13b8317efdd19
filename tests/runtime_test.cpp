// The fiber runtime: runtime::run, fiber/spawn/this_fiber/fiber_local, the park
// path of fibers, work stealing, remote wake-ups of sleeping workers, timers,
// shutdown, stack overflow reporting.
#include <sched.h>
#include <tessera/barrier.h>
#include <tessera/latch.h>
#include <tessera/mutex.h>
#include <tessera/runtime.h>
#include <tessera/semaphore.h>
#include <tessera/wait_group.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "test_util.h"

namespace tessera::test {
namespace {

TEST(Runtime, RunReturnsTheRootValue) {
  runtime rt({.workers = 2});
  EXPECT_EQ(rt.run([] { return 42; }), 42);
  EXPECT_EQ(rt.workers(), 2u);
  EXPECT_FALSE(rt.describe().empty());
}

// Cores the process may run on, counted independently of hwloc: the distinct
// (package, core) pairs that sysfs gives for the CPUs of the affinity mask.
unsigned cores_in_affinity_mask() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  std::set<std::pair<int, int>> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    int package = -1, core = -1;
    std::ifstream(dir + "physical_package_id") >> package;
    std::ifstream(dir + "core_id") >> core;
    cores.insert({package, core < 0 ? cpu : core});
  }
  return static_cast<unsigned>(cores.size());
}

TEST(Runtime, DefaultWorkersIsOnePerCore) {
  const unsigned cores = cores_in_affinity_mask();
  ASSERT_GE(cores, 1u) << "sched_getaffinity/sysfs gave no CPU";
  runtime rt;
  EXPECT_EQ(rt.workers(), cores) << rt.describe();
  EXPECT_NE(rt.describe().find(std::to_string(cores) + (cores == 1 ? " core" : " cores")),
            std::string::npos)
      << rt.describe();
}

TEST(Runtime, RunRethrowsTheRootException) {
  runtime rt({.workers = 1});
  EXPECT_THROW(rt.run([]() -> int { throw std::runtime_error("boom"); }), std::runtime_error);
  EXPECT_EQ(rt.run([] { return 7; }), 7) << "run() must work again after an exception";
}

TEST(Runtime, RunCanBeCalledAgainAndAgain) {
  runtime rt({.workers = 2});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(rt.run([i] { return i; }), i);
}

TEST(Runtime, TwoRuntimesLiveInOneProcessAtOnce) {
  runtime a({.workers = 1}), b({.workers = 2});
  counting_semaphore<> from_a(0), from_b(0);
  // A fiber of `a` and a fiber of `b` hand a token back and forth: wake-ups
  // cross runtimes through the inboxes.
  std::thread ta([&] {
    a.run([&] {
      for (int i = 0; i < 1000; ++i) {
        from_a.release();
        from_b.acquire();
      }
    });
  });
  b.run([&] {
    for (int i = 0; i < 1000; ++i) {
      from_a.acquire();
      from_b.release();
    }
  });
  ta.join();
  EXPECT_EQ(from_a.available(), 0);
  EXPECT_EQ(from_b.available(), 0);
}

TEST(Runtime, RunFromItsOwnFiberIsRejected) {
  runtime rt({.workers = 1});
  rt.run([&] {
    try {
      rt.run([] {});
      ADD_FAILURE() << "nested run() did not throw";
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("already running"), std::string::npos) << e.what();
    }
  });
}

TEST(Runtime, BadOptionsAreRejectedWithMessage) {
  try {
    runtime rt({.workers = 100000});
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("workers = 100000"), std::string::npos) << e.what();
  }
  EXPECT_THROW(runtime({.stack_size = std::size_t{4} << 30}), std::invalid_argument);
}

TEST(Fiber, JoinRethrowsAndIdsAreDistinct) {
  runtime rt({.workers = 2});
  rt.run([] {
    fiber f([] { throw std::out_of_range("from fiber"); });
    EXPECT_TRUE(f.joinable());
    EXPECT_NE(f.get_id(), fiber::id{});
    EXPECT_NE(f.get_id(), this_fiber::get_id());
    EXPECT_THROW(f.join(), std::out_of_range);
    EXPECT_FALSE(f.joinable());
    EXPECT_THROW(f.join(), std::system_error);
    EXPECT_THROW(f.detach(), std::system_error);
  });
  EXPECT_EQ(this_fiber::get_id(), fiber::id{}) << "a plain thread is not a fiber";
}

TEST(Fiber, PassesArgumentsByValue) {
  runtime rt({.workers = 1});
  EXPECT_EQ(rt.run([] {
    int out = 0;
    fiber f([&out](int a, std::string b) { out = a + static_cast<int>(b.size()); }, 40, "ab");
    f.join();
    return out;
  }),
            42);
}

TEST(Fiber, StartingOutsideARuntimeIsAClearError) {
  try {
    fiber f([] {});
    f.join();
    ADD_FAILURE() << "no exception";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("runtime"), std::string::npos) << e.what();
  }
}

TEST(FiberDeathTest, DestroyingAJoinableFiberTerminatesWithMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        runtime rt({.workers = 1});
        rt.run([] { fiber f([] {}); });
      },
      "destroying a joinable fiber");
}

// Unbounded recursion with a frame the optimiser cannot drop (the depth check
// never stops it in practice: 1 << 30 frames of 512 bytes).
[[gnu::noinline]] int recurse(int n) {
  volatile char pad[512];
  pad[0] = static_cast<char>(n);
  if (n > (1 << 30)) return pad[0];
  return recurse(n + 1) + pad[0];
}

TEST(FiberDeathTest, StackOverflowIsReportedNamingTheFiber) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        runtime rt({.workers = 1, .stack_size = 64 * 1024});
        rt.run([] {
          fiber f([] {
            // Unbounded recursion with a frame the optimiser cannot drop.
            recurse(0);
          });
          f.join();
        });
      },
      "stack overflow in fiber #[0-9]+ \\(stack size 65536 bytes\\)");
}

// Frames larger than a page: a single guard page could be jumped. The guard
// region (runtime_options::guard_size, 64 KiB by default) is larger than this
// frame, so the first frame that does not fit lands in it.
[[gnu::noinline]] int recurse_big(int n) {
  volatile char pad[48 * 1024];
  pad[0] = static_cast<char>(n);
  if (n > (1 << 30)) return pad[0];
  return recurse_big(n + 1) + pad[0];
}

// Frames larger than the guard itself: only stack-clash protection (every page
// of the frame probed in order, which the library passes on to its users'
// builds) makes the overflow hit the guard instead of memory below it.
[[gnu::noinline]] int recurse_huge(int n) {
  volatile char pad[256 * 1024];
  pad[0] = static_cast<char>(n);
  if (n > (1 << 30)) return pad[0];
  return recurse_huge(n + 1) + pad[0];
}

// Overflows in a fiber whose stack has another fiber's stack mapped right
// below it, so that a frame jumping the guard lands in live memory instead of
// faulting. (The pool maps stacks in batches downwards and hands out the
// highest left, so the fiber that takes its stack first sits above the next.)
template <class Overflow>
void overflow_above_a_neighbour(std::size_t stack_size, Overflow overflow) {
  runtime rt({.workers = 1, .stack_size = stack_size});
  rt.run([&] {
    counting_semaphore<> go(0), hold(0);
    fiber f([&] {
      go.acquire();  // its stack is taken; wait until the neighbour has the next
      overflow();
    });
    this_fiber::yield();
    fiber neighbour([&] { hold.acquire(); });
    this_fiber::yield();  // the neighbour runs and parks on its stack
    go.release();
    f.join();
    hold.release();
    neighbour.join();
  });
}

TEST(FiberDeathTest, LargeFrameOverflowIsReportedNotSilent) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(overflow_above_a_neighbour(128 * 1024, [] { recurse_big(0); }),
               "stack overflow in fiber #[0-9]+ \\(stack size 131072 bytes\\)");
  EXPECT_DEATH(overflow_above_a_neighbour(512 * 1024, [] { recurse_huge(0); }),
               "stack overflow in fiber #[0-9]+ \\(stack size 524288 bytes\\)");
}

TEST(Fiber, DetachedAndSleepingFibersFinishBeforeRunReturns) {
  runtime rt({.workers = 2});
  std::atomic<int> finished{0};
  const auto start = clock::now();
  rt.run([&] {
    for (int i = 0; i < 50; ++i) {
      spawn([&finished, i] {
        this_fiber::sleep_for(std::chrono::milliseconds(10 + i % 5 * 10));
        finished.fetch_add(1);
      });
    }
  });  // the root returns at once; run() must wait for the sleepers
  EXPECT_EQ(finished.load(), 50);
  EXPECT_GE(clock::now() - start, 50ms);
}

TEST(Fiber, UnparkingFinishedFibersIsHarmless) {
  runtime rt({.workers = 2});
  std::vector<waiter*> stale;
  std::mutex mu;
  rt.run([&] {
    std::vector<fiber> fs;
    for (int i = 0; i < 100; ++i) {
      fs.emplace_back([&] {
        std::lock_guard lock(mu);
        stale.push_back(self());
      });
    }
    for (auto& f : fs) f.join();
  });
  // From a thread, with no runtime running, and from fibers of a new run whose
  // records may be the very same recycled ones.
  for (int k = 0; k < 100; ++k) {
    for (waiter* w : stale) unpark(w);
  }
  std::atomic<int> done{0};
  rt.run([&] {
    std::vector<fiber> fs;
    for (int i = 0; i < 100; ++i) {
      fs.emplace_back([&] {
        for (waiter* w : stale) unpark(w);
        this_fiber::sleep_for(1ms);  // parked while stale unparks fly
        done.fetch_add(1);
      });
    }
    for (auto& f : fs) f.join();
  });
  EXPECT_EQ(done.load(), 100);
}

TEST(Scheduler, IdleWorkersStealWork) {
  runtime rt({.workers = 2});
  std::mutex mu;
  std::set<std::thread::id> threads_seen;
  rt.run([&] {
    std::vector<fiber> fs;
    // None starts its work before all are spawned: under a sanitizer the
    // spawning loop can be slower than a thief running the 64 one by one.
    latch all_spawned(1);
    for (int i = 0; i < 64; ++i) {
      fs.emplace_back([&] {
        all_spawned.wait();
        // CPU-bound for ~3 ms: the spawning worker cannot run them all soon.
        spin_for(3ms);
        std::lock_guard lock(mu);
        threads_seen.insert(std::this_thread::get_id());
      });
    }
    all_spawned.count_down();
    for (auto& f : fs) f.join();
  });
  const auto st = rt.stats();
  EXPECT_GT(st.steals, 0u) << "sleeps " << st.worker_sleeps << ", " << rt.describe();
  EXPECT_EQ(threads_seen.size(), 2u) << "fibers ran on one worker only; steals " << st.steals;
}

TEST(Scheduler, ThreadUnparkWakesAFiberWhileEveryWorkerSleeps) {
  watchdog dog("remote unpark", 60s);
  runtime rt({.workers = 2, .idle_spin = std::chrono::microseconds(10)});
  counting_semaphore<> s(0);
  std::atomic<bool> woke{false};
  std::thread runner([&] {
    rt.run([&] {
      s.acquire();  // parks this fiber; both workers then run out of work
      woke = true;
    });
  });
  ASSERT_TRUE(eventually([&] { return rt.stats().sleeping_workers == 2; }))
      << "workers never went to sleep";
  const auto remote_before = rt.stats().remote_wakeups;
  const auto start = clock::now();
  s.release();  // from a plain OS thread
  runner.join();
  EXPECT_TRUE(woke.load());
  EXPECT_LT(clock::now() - start, 2s) << "the sleeping worker was not woken promptly";
  EXPECT_GT(rt.stats().remote_wakeups, remote_before);
}

TEST(Scheduler, TimersFireInDeadlineOrder) {
  for (unsigned workers : {1u, 2u}) {
    runtime rt({.workers = workers});
    std::mutex mu;
    std::vector<int> order;
    rt.run([&] {
      std::vector<fiber> fs;
      const int delays_ms[] = {40, 10, 30, 50, 20};
      // Deadlines from one common start, set once every fiber is running: a
      // fiber that starts late (TSan, a busy machine) must not shift its own.
      latch started(std::size(delays_ms) + 1);
      clock::time_point start{};
      for (int d : delays_ms) {
        fs.emplace_back([&, d] {
          started.arrive_and_wait();
          const auto deadline = start + std::chrono::milliseconds(d);
          this_fiber::sleep_until(deadline);
          EXPECT_GE(clock::now(), deadline) << "woke early";
          std::lock_guard lock(mu);
          order.push_back(d);
        });
      }
      start = clock::now();
      started.arrive_and_wait();  // publishes `start` (latch: happens-before)
      for (auto& f : fs) f.join();
    });
    EXPECT_EQ(order, (std::vector<int>{10, 20, 30, 40, 50})) << workers << " workers";
  }
}

// Timers are looked at against the clock only every few µs of TSC ticks, not
// at every pick: a sleeper must still wake on time while fibers on its worker
// switch non-stop (the busy fibers would otherwise hold it off for 2 s).
TEST(Scheduler, TimersFireWhileFibersKeepSwitching) {
  runtime rt({.workers = 1});
  rt.run([] {
    std::atomic<bool> woke{false};
    const auto limit = clock::now() + 2s;
    std::vector<fiber> busy;
    for (int i = 0; i < 2; ++i) {
      busy.emplace_back([&] {
        while (!woke.load() && clock::now() < limit) this_fiber::yield();
      });
    }
    const auto start = clock::now();
    this_fiber::sleep_for(5ms);
    const auto late = clock::now() - start - 5ms;
    woke = true;
    for (auto& f : busy) f.join();
    EXPECT_GE(late, 0ms) << "woke early";
    EXPECT_LT(late, 500ms) << "the timer waited for the busy fibers";
  });
}

TEST(Scheduler, TimedParkTimesOutAndUnparkBeatsTheTimer) {
  runtime rt({.workers = 1});
  rt.run([] {
    const auto start = clock::now();
    EXPECT_FALSE(park_until(start + 15ms));
    EXPECT_GE(clock::now() - start, 15ms);
    waiter* me = self();
    fiber f([me] { unpark(me); });
    // The permit may arrive before or during the park: either way it is consumed.
    EXPECT_TRUE(park_until(clock::now() + 10s));
    f.join();
  });
}

// Regression: with runtime-wide timers another worker could fire a very short
// timer while its fiber was still switching out; the entry was dropped and the
// fiber slept forever (a TSan CI run caught it in the semaphore stress).
TEST(Scheduler, TinyTimedParksAlwaysReturn) {
  watchdog dog("tiny timed parks", 60s);
  runtime rt({.workers = 4});
  std::atomic<long> returned{0};
  rt.run([&] {
    std::vector<fiber> fs;
    for (int i = 0; i < 32; ++i) {
      fs.emplace_back([&, i] {
        for (int k = 0; k < 1500; ++k) {
          park_until(clock::now() + std::chrono::microseconds((i + k) % 7));
          returned.fetch_add(1);
        }
      });
    }
    for (auto& f : fs) f.join();
  });
  EXPECT_EQ(returned.load(), 32L * 1500);
}

TEST(Scheduler, YieldInterleavesFibersOnOneWorker) {
  runtime rt({.workers = 1});
  std::vector<int> trace;
  rt.run([&] {
    fiber a([&] {
      for (int i = 0; i < 3; ++i) {
        trace.push_back(0);
        this_fiber::yield();
      }
    });
    fiber b([&] {
      for (int i = 0; i < 3; ++i) {
        trace.push_back(1);
        this_fiber::yield();
      }
    });
    a.join();
    b.join();
  });
  ASSERT_EQ(trace.size(), 6u);
  for (std::size_t i = 1; i < trace.size(); ++i) EXPECT_NE(trace[i], trace[i - 1]) << "at " << i;
}

TEST(Scheduler, RunnextCannotStarveTheQueue) {
  // Two fibers wake each other forever through the runnext slot. The root's
  // timer must still fire and the root run again (from the deque), and a fiber
  // it starts then must run too. Starved, the root never wakes: the watchdog
  // fails the test with a message.
  watchdog dog("runnext starvation", 60s);
  runtime rt({.workers = 1});
  rt.run([] {
    std::atomic<bool> stop{false};
    std::atomic<long> rounds{0};
    counting_semaphore<> ping(0), pong(0);
    fiber a([&] {
      while (!stop.load()) {
        ping.release();
        pong.acquire();
        rounds.fetch_add(1, std::memory_order_relaxed);
      }
      ping.release();
    });
    fiber b([&] {
      while (!stop.load()) {
        ping.acquire();
        pong.release();
      }
      pong.release();
    });
    this_fiber::sleep_for(5ms);  // a and b now ping-pong through runnext
    const long while_asleep = rounds.load();
    bool c_ran = false;
    fiber c([&] {
      c_ran = true;
      stop = true;
    });
    c.join();
    a.join();
    b.join();
    EXPECT_GT(while_asleep, 0) << "the pair never ran while the root slept";
    EXPECT_TRUE(c_ran);
  });
}

TEST(Scheduler, AWokenFiberIsStolenWhenItsWakerRunsOn) {
  // Fiber `a` arrives last at a latch, which wakes `b` into a's worker's runnext
  // slot, and then computes instead of parking until b has run. Only another
  // worker can run b: it must steal it from the slot (Go steals runnext; a slot
  // nobody may steal leaves b waiting for as long as a runs — here for ever).
  // With idle_spin 0 the other worker is asleep and finds b by polling.
  watchdog dog("runnext stealing", 120s);
  for (const auto spin : {std::chrono::microseconds(50), std::chrono::microseconds(0)}) {
    runtime rt({.workers = 2, .idle_spin = spin});
    rt.run([&] {
      for (int round = 0; round < 20; ++round) {
        latch started(2);
        std::atomic<bool> b_arrived{false}, b_ran{false};
        bool gave_up = false;
        // a arrives last, once b has had ample time (1 ms) to park in the
        // latch: had b not parked yet, it would need no wake-up and the steal
        // would go untested (under TSan, with b on the other worker, that
        // happened in most runs).
        fiber a([&] {
          while (!b_arrived.load()) this_fiber::yield();
          spin_for(1ms);
          started.arrive_and_wait();
          const auto give_up = clock::now() + 10s;
          while (!b_ran.load() && clock::now() < give_up) {
          }
          gave_up = !b_ran.load();
        });
        fiber b([&] {
          b_arrived = true;
          started.arrive_and_wait();
          b_ran = true;
        });
        a.join();
        b.join();
        ASSERT_FALSE(gave_up) << "idle_spin " << spin.count() << " us, round " << round
                              << ": the woken fiber never ran while its waker computed";
      }
    });
    EXPECT_GT(rt.stats().runnext_steals, 0u) << "idle_spin " << spin.count() << " us";
  }
}

TEST(Scheduler, AWorkerWokenFromDeepSleepWakesTheOtherOnceItFillsItsRunnext) {
  // Both workers of a started runtime sleep deep (nothing runs, so neither
  // watches the runnext slots). A fiber submitted from this thread wakes one;
  // it wakes `b` into its runnext slot and then computes instead of parking.
  // The other worker must be woken by that fill and steal b: a worker that
  // turns busy defers waking a deep sleeper until its slot is filled, and a
  // lost deferred wake-up leaves b waiting for as long as the waker computes.
  watchdog dog("deep sleeper and runnext", 60s);
  runtime rt({.workers = 2});
  rt.start();
  for (int round = 0; round < 5; ++round) {
    latch started(2);
    std::atomic<bool> b_arrived{false}, b_ran{false};
    auto b = rt.submit([&] {
      b_arrived = true;
      started.arrive_and_wait();
      b_ran = true;
    });
    // b parks in the latch; then both workers go to sleep, and deep once
    // neither is busy (a sleeper that watched re-checks every millisecond).
    // Wait for b to run first: until a worker has woken for it, the count
    // of deep sleepers may still include that worker, and a submitted now
    // could arrive first and be woken by b — no runnext steal to see.
    for (const auto give_up = clock::now() + 10s; !b_arrived.load() && clock::now() < give_up;) {
      std::this_thread::sleep_for(100us);
    }
    for (const auto give_up = clock::now() + 10s;
         rt.stats().deep_sleeping_workers < 2 && clock::now() < give_up;) {
      std::this_thread::sleep_for(100us);
    }
    ASSERT_EQ(rt.stats().deep_sleeping_workers, 2u) << "round " << round;
    const auto steals_before = rt.stats().runnext_steals;
    auto a = rt.submit([&] {
      started.arrive_and_wait();  // wakes b into this worker's runnext slot
      const auto give_up = clock::now() + 5s;
      while (!b_ran.load() && clock::now() < give_up) {
      }
      return b_ran.load();
    });
    ASSERT_TRUE(a.get()) << "round " << round << ": b never ran while its waker computed";
    b.get();
    EXPECT_GT(rt.stats().runnext_steals, steals_before) << "round " << round;
  }
  rt.stop();
}

TEST(Scheduler, ParkUnparkRaceStress) {
  // Fibers on 4 workers and plain threads unpark each other in a ring as fast as
  // they can: every switch-out races an unpark. Nothing may be lost or run twice.
  watchdog dog("park/unpark race", 90s);
  runtime rt({.workers = 4});
  constexpr int kRing = 6, kLaps = 3000;
  std::vector<std::atomic<waiter*>> ids(kRing);
  std::vector<std::atomic<int>> tokens(kRing);
  for (auto& t : tokens) t = 0;
  auto member = [&](int i) {
    ids[i] = self();
    while (ids[(i + 1) % kRing].load() == nullptr) yield_now();
    for (int lap = 0; lap < kLaps; ++lap) {
      while (tokens[i].load(std::memory_order_acquire) == 0) park();
      tokens[i].fetch_sub(1, std::memory_order_relaxed);
      tokens[(i + 1) % kRing].fetch_add(1, std::memory_order_release);
      unpark(ids[(i + 1) % kRing].load());
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < kRing; i += 3) threads.emplace_back(member, i);  // members 1 and 4
  rt.run([&] {
    std::vector<fiber> fs;
    for (int i = 0; i < kRing; ++i) {
      if (i % 3 != 1) fs.emplace_back(member, i);
    }
    while (ids[0].load() == nullptr) this_fiber::yield();
    tokens[0].fetch_add(1, std::memory_order_release);
    unpark(ids[0].load());
    for (auto& f : fs) f.join();
  });
  for (auto& t : threads) t.join();
  int total = 0;
  for (auto& t : tokens) total += t.load();
  EXPECT_EQ(total, 1) << "the single token was lost or duplicated";
}

TEST(Scheduler, TimedAndUntimedParksRaceUnparksAndTimers) {
  // One fiber takes tokens, waiting alternately in park() and in park_until()
  // with deadlines of tens of microseconds, while a fiber on another worker and
  // a plain thread hand it tokens: unparks land on either parked value, during
  // the switch-out, and beside timers firing on other workers. Every token must
  // be taken (a lost hand-off hangs the consumer), and a park_until() that
  // reports a timeout must not return before its deadline.
  watchdog dog("timed/untimed park race", 90s);
  runtime rt({.workers = 2});
  constexpr int kPerProducer = 20000;
  std::atomic<int> tokens{0};
  std::atomic<waiter*> consumer{nullptr};
  std::atomic<int> early{0};
  auto produce = [&] {
    while (consumer.load() == nullptr) yield_now();
    for (int i = 0; i < kPerProducer; ++i) {
      tokens.fetch_add(1, std::memory_order_release);
      unpark(consumer.load());
      if (i % 64 == 0) yield_now();
    }
  };
  std::thread outside(produce);
  int taken = 0;
  rt.run([&] {
    fiber inside(produce);
    consumer = self();
    for (int round = 0; taken < 2 * kPerProducer; ++round) {
      if (tokens.load(std::memory_order_acquire) > 0) {
        tokens.fetch_sub(1, std::memory_order_relaxed);
        ++taken;
        continue;
      }
      if (round % 2 == 0) {
        park();
      } else {
        const auto deadline = clock::now() + std::chrono::microseconds(20 + round % 50);
        if (!park_until(deadline) && clock::now() < deadline) early.fetch_add(1);
      }
    }
    inside.join();
  });
  outside.join();
  EXPECT_EQ(taken, 2 * kPerProducer);
  EXPECT_EQ(tokens.load(), 0);
  EXPECT_EQ(early.load(), 0) << "park_until reported a timeout before its deadline";
}

TEST(Scheduler, TimerHeapStaysBoundedWhenFarDeadlinesEndEarly) {
  // A server re-arms an idle timeout of minutes at every read, and nearly every
  // read ends early. Those entries must not pile up until their deadlines come
  // due: the heap holds at most twice the live timers plus 64 (scheduler.h).
  watchdog dog("timer heap bound", 60s);
  runtime rt({.workers = 2});
  constexpr int kWaits = 100000;
  std::size_t most = 0;
  rt.run([&] {
    std::atomic<waiter*> sleeper{nullptr};
    std::atomic<int> round{0};
    std::atomic<int> woken{0};
    fiber waker([&] {
      for (int i = 1; i <= kWaits; ++i) {
        while (round.load(std::memory_order_acquire) != i) yield_now();
        woken.store(i, std::memory_order_release);
        unpark(sleeper.load());
      }
    });
    sleeper = self();
    for (int i = 1; i <= kWaits; ++i) {
      const auto deadline = clock::now() + std::chrono::hours(1);
      round.store(i, std::memory_order_release);
      // A permit left from the last round makes one wait return at once.
      while (woken.load(std::memory_order_acquire) != i) park_until(deadline);
      ASSERT_LT(clock::now(), deadline);
      if (i % 1000 == 0) most = std::max(most, rt.stats().timer_entries);
    }
    waker.join();
  });
  EXPECT_LE(most, 2u * 2u + 64u) << "stale timer entries piled up";
}

TEST(FiberLocal, EachFiberHasItsOwnValueDestroyedAtExit) {
  static std::atomic<int> destroyed{0};
  struct counted {
    int v = 5;
    counted() = default;
    counted(const counted& o) : v(o.v) {}
    ~counted() { destroyed.fetch_add(1); }
  };
  static fiber_local<counted> local;
  destroyed = 0;
  runtime rt({.workers = 2});
  rt.run([] {
    std::vector<fiber> fs;
    for (int i = 0; i < 10; ++i) {
      fs.emplace_back([i] {
        local->v += i;
        this_fiber::yield();
        EXPECT_EQ(local->v, 5 + i);
      });
    }
    for (auto& f : fs) f.join();
  });
  // 10 per-fiber copies (the template itself is the 11th and still alive).
  EXPECT_EQ(destroyed.load(), 10);
  local->v = 1;  // on a plain thread: the thread's own copy
  EXPECT_EQ(local.get().v, 1);
}

TEST(Fiber, ManyParkedFibersAreReleasedInOrder) {
  // 2000 fibers park on one semaphore, one after another (each starts only once
  // the one before it waits); single releases then admit them oldest first.
  // (500 under ThreadSanitizer: many_fibers.)
  watchdog dog("many parked fibers in order", 120s);
  runtime rt({.workers = 2});
  rt.run([] {
    constexpr int kFibers = many_fibers(2000);
    counting_semaphore<> s(0);
    std::vector<int> order;
    order.reserve(kFibers);
    tessera::mutex order_mu;
    std::vector<fiber> fs;
    for (int i = 0; i < kFibers; ++i) {
      fs.emplace_back([&, i] {
        s.acquire();
        std::lock_guard lock(order_mu);
        order.push_back(i);
      });
      while (s.waiting() < i + 1) this_fiber::yield();
    }
    for (int k = 0; k < kFibers; ++k) {
      s.release();
      for (;;) {
        std::unique_lock lock(order_mu);
        if (order.size() == static_cast<std::size_t>(k + 1)) break;
        lock.unlock();
        this_fiber::yield();
      }
    }
    for (auto& f : fs) f.join();
    ASSERT_EQ(order.size(), static_cast<std::size_t>(kFibers));
    for (int k = 0; k < kFibers; ++k) ASSERT_EQ(order[k], k) << "admission " << k;
  });
}

}  // namespace
}  // namespace tessera::test
