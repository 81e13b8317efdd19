// The scheduler trace (runtime_options::trace_events, runtime::write_trace):
// parsed back with nlohmann-json, every slice nests on its worker's track and
// every unpark names a fiber the trace knows.
#include <tessera/channel.h>
#include <tessera/jobs.h>
#include <tessera/runtime.h>

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_util.h"

namespace tessera::test {
namespace {

using json = nlohmann::json;

// A little of everything: fibers created, a channel ping-pong (parks and
// unparks), sleeps, and jobs.
void workload() {
  channel<int> ping(0), pong(0);
  fiber echo([&] {
    this_fiber::set_name("echo");
    while (auto v = ping.receive()) (void)pong.send(*v);
  });
  for (int i = 0; i < 200; ++i) {
    (void)ping.send(i);
    (void)pong.receive();
  }
  ping.close();
  echo.join();
  for (int i = 0; i < 5; ++i) this_fiber::sleep_for(std::chrono::microseconds(200));
  task_group g;
  for (int i = 0; i < 100; ++i) g.run([] {});
  g.wait();
}

json trace_of(const runtime& rt) {
  std::ostringstream os;
  rt.write_trace(os);
  return json::parse(os.str());  // throws on malformed JSON
}

// Checks that B/E pairs nest per track; returns the fibers that ran.
std::set<std::uint64_t> check_nesting(const json& trace) {
  std::map<int, std::vector<std::string>> open;
  std::set<std::uint64_t> ran;
  for (const auto& e : trace.at("traceEvents")) {
    const std::string ph = e.at("ph");
    const int tid = e.at("tid");
    if (ph == "B") {
      open[tid].push_back(e.at("name"));
      if (e.value("cat", "") == "fiber") ran.insert(e.at("args").at("fiber").get<std::uint64_t>());
    } else if (ph == "E") {
      EXPECT_FALSE(open[tid].empty()) << "an E with nothing open on worker " << tid;
      if (open[tid].empty()) continue;
      EXPECT_EQ(open[tid].back(), e.at("name").get<std::string>()) << "on worker " << tid;
      open[tid].pop_back();
    }
  }
  for (const auto& [tid, stack] : open) EXPECT_TRUE(stack.empty()) << "left open on " << tid;
  return ran;
}

TEST(Trace, EveryFibersRunsNestAndEveryUnparkNamesAFiber) {
  watchdog dog("Trace.EveryFibersRunsNestAndEveryUnparkNamesAFiber", 60s);
  runtime rt({.workers = 2, .trace_events = 1 << 16});
  rt.run(workload);
  const json trace = trace_of(rt);
  const std::set<std::uint64_t> ran = check_nesting(trace);
  std::set<std::string> seen;
  std::size_t unparks = 0;
  bool named = false;
  for (const auto& e : trace.at("traceEvents")) {
    seen.insert(e.at("name").get<std::string>());
    if (e.at("name") == "unpark") {
      ++unparks;
      const auto woken = e.at("args").at("fiber").get<std::uint64_t>();
      EXPECT_TRUE(ran.count(woken) != 0) << "unpark of fiber " << woken << ", which never ran";
    }
    if (e.at("ph") == "B" && e.at("name").get<std::string>().find("\"echo\"") != std::string::npos)
      named = true;
  }
  EXPECT_GE(unparks, 200u) << "the ping-pong's hand-offs";
  for (const char* kind : {"create", "job", "sleep", "unpark"})
    EXPECT_TRUE(seen.count(kind) != 0) << "no '" << kind << "' event";
  EXPECT_TRUE(named) << "the named fiber's runs carry its name";
}

// One worker, so that every event goes to one ring of 64: the runs of a
// fiber named before the workload are overwritten, those of one named after
// it are kept.
TEST(Trace, ASmallRingKeepsTheLatestEventsAndStillNests) {
  runtime rt({.workers = 1, .trace_events = 64});
  auto named_run = [](const char* name) {
    fiber f([name] {
      this_fiber::set_name(name);
      this_fiber::yield();  // its next run carries the name
    });
    f.join();
  };
  rt.run([&] {
    named_run("oldest");
    workload();
    named_run("latest");
  });
  const json trace = trace_of(rt);
  check_nesting(trace);
  bool oldest = false, latest = false;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "B") continue;
    const auto name = e.at("name").get<std::string>();
    oldest = oldest || name.find("\"oldest\"") != std::string::npos;
    latest = latest || name.find("\"latest\"") != std::string::npos;
  }
  EXPECT_TRUE(latest) << "the last fiber's runs are not in the trace";
  EXPECT_FALSE(oldest) << "the first fiber's runs outlived 400 ping-pongs in a ring of 64";
  // One track's metadata plus at most 64 events (a B or E apiece, an unpark
  // with its arrow's two ends, the closing E of cut slices), and some.
  EXPECT_GT(trace.at("traceEvents").size(), 32u);
  EXPECT_LE(trace.at("traceEvents").size(), 1u + 64u * 3u);
}

TEST(Trace, WriteTraceRefusesWhileRunningOrWhenOff) {
  runtime off({.workers = 1});
  std::ostringstream os;
  EXPECT_THROW(off.write_trace(os), std::logic_error);
  runtime on({.workers = 1, .trace_events = 1024});
  on.start();
  EXPECT_THROW(on.write_trace(os), std::logic_error);
  on.stop();
  EXPECT_NO_THROW(on.write_trace(os));
}

}  // namespace
}  // namespace tessera::test
