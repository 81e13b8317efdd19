// The explorer against a bug this project fixed before (simulated_bugs.h):
// auto_reset_event's timed-wait race, which the stress test that first
// caught it hit once in 500 to 2,200 repetitions. It must find the old
// algorithm's hang, and pass the fixed one.
#include <tessera/testing/gtest.h>
#include <tessera/testing/simulation.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include <tessera/tessera.h>

#include "simulated_bugs.h"

namespace {

using namespace std::chrono_literals;
using tessera::testing::explore_options;
using tessera::testing::strategy;

explore_options search(strategy how, std::uint64_t runs) {
  explore_options o;
  o.strategy = how;
  o.runs = runs;
  o.verbose = false;
  // The body takes some 30 steps and 2 ms; a run past these hangs (the old
  // event's waiter cycles in the gate's lobby, waking every 40 us for good).
  o.max_steps = 2000;
  o.max_virtual_time = std::chrono::seconds(10);
  return o;
}

// Runs to find it (bench/simbench measures them over many seeds): random
// in tens; pct needs depth 3 or more (the hang needs W1 stopped after its
// timeout, the signaller stopped after its count, and W1 stopped again
// before its gate call) and a few thousand runs.
TEST(SimulationFindsOldBugs, AutoResetEventTimedWaitRace) {
  explore_options deep = search(strategy::pct, 20000);
  deep.depth = 5;
  deep.seed = 7000021;  // simbench's nine bases found it in 442 to 3,321 runs; this one in 442
  const auto pct = tessera::testing::explore_report(simulated::timed_waits_body<false>, deep);
  ASSERT_TRUE(pct.failing_seed.has_value()) << "pct did not find the race in 20,000 runs";
  const auto random = tessera::testing::explore_report(simulated::timed_waits_body<false>,
                                                       search(strategy::random, 5000));
  ASSERT_TRUE(random.failing_seed.has_value()) << "random did not find the race in 5,000 runs";
  EXPECT_LT(random.runs, 1000u);
  std::printf("auto_reset_event timed-wait race: pct found it in run %llu, random in run %llu\n",
              static_cast<unsigned long long>(pct.runs),
              static_cast<unsigned long long>(random.runs));
  // It is the hang: the waiter left in the gate never gets out.
  for (const auto& found : {pct, random}) {
    try {
      tessera::testing::replay(simulated::timed_waits_body<false>, *found.failing_seed,
                               search(strategy::pct, 1));
      FAIL() << "the replay passed";
    } catch (const tessera::deadlock_error& e) {
      EXPECT_NE(std::string(e.what()).find("counting_semaphore"), std::string::npos) << e.what();
    }
  }
  // The fixed algorithm passes the same explorations.
  for (strategy how : {strategy::pct, strategy::random}) {
    const auto fixed = tessera::testing::explore_report(simulated::timed_waits_body<true>,
                                                        search(how, simulated::scaled(5000)));
    EXPECT_FALSE(fixed.failing_seed.has_value());
    EXPECT_EQ(fixed.runs, simulated::scaled(5000));
  }
}

}  // namespace
