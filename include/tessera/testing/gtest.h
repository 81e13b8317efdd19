// tessera/testing/gtest.h — simulation tests in GoogleTest (target
// tessera::testing; the program links GoogleTest itself).
//
//   TESSERA_SIM_TEST(Pool, NoLostWakeUp, {.runs = 1000}) {
//     ... the body: runs as the root fiber of each simulated run ...
//   }
//
// Contract
// - The test explores `runs` schedules (tessera/testing/simulation.h; the
//   braces are an explore_options) and fails at the first failing seed,
//   with the failure's text, the seed, and the command that replays it.
// - Replay: with TESSERA_SIM_SEED=<seed> in the environment, every
//   TESSERA_SIM_TEST that runs replays that one seed instead, printing its
//   trace (and writing TESSERA_SIM_TRACE=<file> as Chrome trace JSON when
//   set), and fails with its failure. Select the test with --gtest_filter.
// - The body must not use GoogleTest's fatal assertions (ASSERT_*) or
//   EXPECT_*: they do not stop a fiber. Throw, or use
//   TESSERA_SIM_CHECK(condition), which throws std::logic_error naming the
//   condition, file and line.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/testing/simulation.h"

namespace tessera::testing {

/// What TESSERA_SIM_TEST runs (see above); `test` is "Suite.Name".
inline void gtest_explore(void (*body)(), explore_options options, const char* test) {
  const std::vector<std::string> argv = ::testing::internal::GetArgvs();
  const std::string program = argv.empty() ? "the_test" : argv.front();
  if (const char* text = std::getenv("TESSERA_SIM_SEED"); text != nullptr && *text != '\0') {
    if (const char* file = std::getenv("TESSERA_SIM_TRACE")) options.trace_file = file;
    try {
      replay(body, parse_seed(text), options);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "seed " << text << " failed:\n" << e.what();
    }
    return;
  }
  options.replay_hint = std::string("TESSERA_SIM_SEED={seed} ") + program + " --gtest_filter=" + test;
  const exploration found = explore_report(body, options);
  if (!found.failing_seed) return;
  const std::string seed = seed_string(*found.failing_seed);
  ADD_FAILURE() << "seed " << seed << " failed:\n"
                << failure_text(found.failure) << "\nreplay: TESSERA_SIM_SEED=" << seed << ' ' << program
                << " --gtest_filter=" << test;
}

}  // namespace tessera::testing

/// A GoogleTest test whose body is explored under the simulation.
#define TESSERA_SIM_TEST(suite, name, ...)                                             \
  static void tessera_sim_body_##suite##_##name();                                     \
  TEST(suite, name) {                                                                  \
    ::tessera::testing::gtest_explore(&tessera_sim_body_##suite##_##name,              \
                                      ::tessera::testing::explore_options __VA_ARGS__, \
                                      #suite "." #name);                               \
  }                                                                                    \
  static void tessera_sim_body_##suite##_##name()

/// Inside a simulated body: throws std::logic_error if `cond` is false.
#define TESSERA_SIM_CHECK(cond)                                                                  \
  ((cond) ? (void)0                                                                              \
          : throw std::logic_error(std::string("check failed: " #cond " at ") + __FILE__ + ":" + \
                                   std::to_string(__LINE__)))
