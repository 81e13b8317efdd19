// The simulation (tessera/testing/simulation.h): virtual time, determinism,
// exploration, replay, failures and misuse.
#include <tessera/testing/gtest.h>
#include <tessera/testing/simulation.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <tessera/tessera.h>

#include "simulated_bugs.h"

namespace {

using namespace std::chrono_literals;
using tessera::testing::failure_text;
using simulated::lost_update_body;
using simulated::uninterrupted_run_body;
using tessera::testing::explore;
using tessera::testing::explore_options;
using tessera::testing::replay;
using tessera::testing::run_once;
using tessera::testing::strategy;

explore_options quiet(explore_options o = {}) {
  o.verbose = false;
  return o;
}

TEST(Simulation, VirtualTimeJumpsToTheNextDeadline) {
  std::chrono::nanoseconds slept{};
  const auto real_start = std::chrono::steady_clock::now();
  const auto r = run_once(
      [&] {
        const auto t0 = tessera::steady_clock::now();
        tessera::this_fiber::sleep_for(1h);
        slept = tessera::steady_clock::now() - t0;
      },
      tessera::testing::seed_for({}, 0), quiet());
  EXPECT_EQ(r.failure, nullptr) << failure_text(r.failure);
  EXPECT_EQ(slept, 1h);
  EXPECT_EQ(r.virtual_time, 1h);
  EXPECT_LT(std::chrono::steady_clock::now() - real_start, 10s);
}

TEST(Simulation, EveryTimedWaitTimesOutInVirtualTime) {
  const auto r = run_once(
      [] {
        tessera::timed_mutex m;
        tessera::counting_semaphore<> sem(0);
        tessera::condition_variable cv;
        tessera::mutex cv_mu;
        tessera::auto_reset_event ev;
        m.lock();
        auto other = tessera::fiber([&] {
          const auto t0 = tessera::steady_clock::now();
          TESSERA_SIM_CHECK(!m.try_lock_for(10ms));
          TESSERA_SIM_CHECK(!sem.try_acquire_for(20ms));
          std::unique_lock lk(cv_mu);
          TESSERA_SIM_CHECK(cv.wait_for(lk, 30ms) == std::cv_status::timeout);
          lk.unlock();
          TESSERA_SIM_CHECK(!ev.wait_for(40ms));
          TESSERA_SIM_CHECK(tessera::steady_clock::now() - t0 == 100ms);
        });
        other.join();
        m.unlock();
      },
      tessera::testing::seed_for({}, 1), quiet());
  EXPECT_EQ(r.failure, nullptr) << failure_text(r.failure);
  EXPECT_EQ(r.virtual_time, 100ms);
}

// Go's synctest counts a goroutine blocked on sync.Mutex as not durably
// blocked (golang/go#77687), so time does not advance; here every wait is.
TEST(Simulation, AFiberBlockedOnAMutexLetsTimeAdvance) {
  const auto r = run_once(
      [] {
        tessera::mutex m;
        int order = 0;
        m.lock();
        auto waiter = tessera::fiber([&] {
          std::lock_guard lk(m);
          TESSERA_SIM_CHECK(order == 1);
          order = 2;
        });
        tessera::this_fiber::sleep_for(5min);
        order = 1;
        m.unlock();
        waiter.join();
        TESSERA_SIM_CHECK(order == 2);
      },
      tessera::testing::seed_for({}, 2), quiet());
  EXPECT_EQ(r.failure, nullptr) << failure_text(r.failure);
  EXPECT_EQ(r.virtual_time, 5min);
}

// Ten fibers passing a token round a ring of channels, with timed waits:
// the same seed gives the same trace, different seeds different ones.
void ring_body() {
  constexpr int kFibers = 10;
  std::vector<std::unique_ptr<tessera::channel<int>>> links;
  for (int i = 0; i < kFibers; ++i) links.push_back(std::make_unique<tessera::channel<int>>(1));
  std::vector<tessera::fiber> fibers;
  for (int i = 0; i < kFibers; ++i) {
    fibers.emplace_back([&, i] {
      for (int round = 0; round < 5; ++round) {
        auto v = links[i]->receive();
        TESSERA_SIM_CHECK(v.has_value());
        tessera::this_fiber::sleep_for(std::chrono::milliseconds(1 + i));
        links[(i + 1) % kFibers]->send(*v + 1);
      }
    });
  }
  links[0]->send(0);
  for (auto& f : fibers) f.join();
  TESSERA_SIM_CHECK(links[0]->receive().value() == 5 * kFibers);
}

TEST(Simulation, TheSameSeedGivesTheSameTrace) {
  for (strategy how : {strategy::random, strategy::pct}) {
    explore_options o = quiet();
    o.strategy = how;
    std::set<std::uint64_t> hashes;
    for (std::uint64_t i = 0; i < 8; ++i) {
      const std::uint64_t seed = tessera::testing::seed_for(o, i);
      const auto a = run_once(ring_body, seed, o);
      const auto b = run_once(ring_body, seed, o);
      ASSERT_EQ(a.failure, nullptr) << failure_text(a.failure);
      EXPECT_EQ(a.trace_hash, b.trace_hash) << tessera::testing::seed_string(seed);
      EXPECT_EQ(a.steps, b.steps);
      EXPECT_EQ(a.virtual_time, b.virtual_time);
      EXPECT_EQ(a.fibers, 11u);
      hashes.insert(a.trace_hash);
    }
    EXPECT_GE(hashes.size(), 4u) << "seeds should give different schedules";
  }
}

TEST(Simulation, ExploreFindsALostUpdateAndReplayReproducesIt) {
  for (strategy how : {strategy::random, strategy::pct}) {
    explore_options o = quiet();
    o.strategy = how;
    o.runs = 200;
    const auto seed = explore(lost_update_body, o);
    ASSERT_TRUE(seed.has_value());
    for (int i = 0; i < 3; ++i) {
      try {
        replay(lost_update_body, *seed, o);
        FAIL() << "the replay of " << tessera::testing::seed_string(*seed) << " passed";
      } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "lost update: counter is 1");
      }
    }
  }
}

TEST(Simulation, PctTriesOrdersThatRandomAlmostNeverDoes) {
  const auto pct = tessera::testing::explore_report(uninterrupted_run_body, quiet({.runs = 100}));
  ASSERT_TRUE(pct.failing_seed.has_value());
  EXPECT_LE(pct.runs, 10u);
  explore_options o = quiet({.runs = simulated::scaled(2000)});
  o.strategy = strategy::random;
  const auto random = tessera::testing::explore_report(uninterrupted_run_body, o);
  EXPECT_FALSE(random.failing_seed.has_value());
  EXPECT_EQ(random.runs, simulated::scaled(2000));
}

TEST(Simulation, ADeadlockFailsTheRunWithTheDeadlockReport) {
  const auto body = [] {
    tessera::mutex a, b;
    auto one = tessera::fiber([&] {
      std::lock_guard la(a);
      tessera::this_fiber::yield();
      std::lock_guard lb(b);
    });
    auto two = tessera::fiber([&] {
      std::lock_guard lb(b);
      tessera::this_fiber::yield();
      std::lock_guard la(a);
    });
    one.join();
    two.join();
  };
  const auto seed = explore(body, quiet({.runs = 200}));
  ASSERT_TRUE(seed.has_value());
  try {
    replay(body, *seed, quiet());
    FAIL() << "the replay passed";
  } catch (const tessera::deadlock_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tessera: deadlock: all 3 fibers are parked"), std::string::npos) << what;
    EXPECT_NE(what.find("nothing in the simulation can wake them"), std::string::npos) << what;
    EXPECT_NE(what.find("the waits form a cycle"), std::string::npos) << what;
    // Fibers are named by their ordinals, as in the trace: the same every run.
    EXPECT_NE(what.find("fiber 2 waits for mutex"), std::string::npos) << what;
    EXPECT_NE(what.find("fiber 3 waits for mutex"), std::string::npos) << what;
  }
}

TEST(Simulation, ASpinningFiberLetsTheOthersRunAndALivelockHitsTheStepLimit) {
  // A tessera::detail spin-wait (cpu_relax) on a value another fiber sets.
  const auto r = run_once(
      [] {
        std::atomic<bool> go{false};
        auto setter = tessera::fiber([&] { go.store(true); });
        while (!go.load()) tessera::detail::cpu_relax();
        setter.join();
      },
      tessera::testing::seed_for({}, 3), quiet());
  EXPECT_EQ(r.failure, nullptr) << failure_text(r.failure);

  explore_options o = quiet();
  o.max_steps = 500;
  const auto spin = run_once(
      [] {
        for (;;) tessera::this_fiber::yield();
      },
      tessera::testing::seed_for(o, 0), o);
  EXPECT_NE(failure_text(spin.failure).find("passed its step limit"), std::string::npos)
      << failure_text(spin.failure);
}

TEST(Simulation, AWaitPastTheVirtualTimeLimitFailsTheRun) {
  explore_options o = quiet();
  o.max_virtual_time = 1h;
  const auto r =
      run_once([] { tessera::this_fiber::sleep_for(2h); }, tessera::testing::seed_for(o, 0), o);
  EXPECT_NE(failure_text(r.failure).find("virtual time limit"), std::string::npos) << failure_text(r.failure);
}

TEST(Simulation, JobsChannelsAndSelectRunUnderTheSimulation) {
  const auto body = [] {
    std::atomic<int> sum{0};
    tessera::task_group g;
    for (int i = 1; i <= 10; ++i) g.run([&sum, i] { sum += i; });
    g.wait();
    TESSERA_SIM_CHECK(sum == 55);
    tessera::lockfree_channel<int> a(1), b(1);
    auto sender = tessera::fiber([&] {
      a.send(1);
      b.send(2);
    });
    int got = 0;
    for (int i = 0; i < 2; ++i) {
      int va = 0, vb = 0;
      const auto r = tessera::select(tessera::recv_case(a, va), tessera::recv_case(b, vb));
      got += r.index == 0 ? va : vb;
    }
    sender.join();
    TESSERA_SIM_CHECK(got == 3);
  };
  EXPECT_EQ(explore(body, quiet({.runs = simulated::scaled(50)})), std::nullopt);
}

TEST(Simulation, ReplayPrintsTheTraceAndWritesAChromeTrace) {
  const std::string file = ::testing::TempDir() + "sim_trace.json";
  explore_options o;
  o.trace_file = file;
  ::testing::internal::CaptureStderr();
  replay(ring_body, tessera::testing::seed_for(o, 5), o);
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(printed.find("tessera::testing: trace of seed 0x1"), std::string::npos) << printed;
  EXPECT_NE(printed.find("fiber 1 parked (join of fiber)"), std::string::npos) << printed;
  EXPECT_NE(printed.find("finished"), std::string::npos);
  std::ifstream in(file);
  const auto json = nlohmann::json::parse(in);
  EXPECT_GT(json["traceEvents"].size(), 50u);
}

TEST(Simulation, MisuseIsRefusedWithAMessage) {
  EXPECT_THROW(explore([] {}, {.depth = 0}), std::invalid_argument);
  EXPECT_THROW(explore([] {}, {.depth = 16}), std::invalid_argument);
  EXPECT_THROW(tessera::testing::parse_seed("0xzz"), std::invalid_argument);
  EXPECT_EQ(tessera::testing::parse_seed("0x10"), 16u);
  EXPECT_THROW(replay([] {}, 0x7000000000000000ULL), std::invalid_argument);
  tessera::runtime rt({.workers = 1});
  rt.run([] {
    try {
      explore([] {});
      ADD_FAILURE() << "explore on a fiber was accepted";
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("called on a fiber"), std::string::npos);
    }
  });
}

TEST(Simulation, ARealRuntimeBesideASimulationKeepsTheRealClock) {
  tessera::runtime rt({.workers = 1});
  std::chrono::nanoseconds real_sleep{};
  std::thread real([&] {
    rt.run([&] {
      const auto t0 = std::chrono::steady_clock::now();
      tessera::this_fiber::sleep_for(20ms);
      real_sleep = std::chrono::steady_clock::now() - t0;
    });
  });
  // Meanwhile a simulation sleeps a day.
  const auto r = run_once([] { tessera::this_fiber::sleep_for(24h); },
                          tessera::testing::seed_for({}, 0), quiet());
  real.join();
  EXPECT_EQ(r.failure, nullptr);
  EXPECT_GE(real_sleep, 20ms);
  EXPECT_LT(real_sleep, 10s);
}

TESSERA_SIM_TEST(SimulationMacro, APassingBodyPasses, {.runs = simulated::scaled(20)}) {
  ring_body();
}

}  // namespace
