// The simulated network: tessera::net's sockets, unchanged, inside a
// simulated run — delays, refusal, resets, partitions, datagram loss and
// reordering, deadlines in virtual time.
#include <tessera/testing/gtest.h>
#include <tessera/testing/simulation.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <tessera/tessera.h>

#include "simulated_bugs.h"

namespace {

using namespace std::chrono_literals;
using tessera::testing::failure_text;
using tessera::net::tcp_listener;
using tessera::net::tcp_stream;
using tessera::testing::explore_options;
using tessera::testing::run_once;

explore_options with_delays(std::chrono::nanoseconds lo, std::chrono::nanoseconds hi) {
  explore_options o;
  o.verbose = false;
  o.network.min_delay = lo;
  o.network.max_delay = hi;
  return o;
}

// An echo server on its own fiber, until its listener closes.
tessera::fiber echo_server(tcp_listener& l) {
  return tessera::fiber([&l] {
    std::vector<tessera::fiber> conns;
    for (;;) {
      std::error_code ec;
      tcp_stream s = l.accept(ec);
      if (ec) break;
      conns.emplace_back([s = std::move(s)]() mutable {
        char buf[256];
        std::error_code e;
        for (;;) {
          const std::size_t n = s.read_some(buf, sizeof buf, e);
          if (e || n == 0) return;
          s.write_all(buf, n, e);
          if (e) return;
        }
      });
    }
    for (auto& c : conns) c.join();
  });
}

void echo_body() {
  auto l = tcp_listener::listen("127.0.0.1:0");
  TESSERA_SIM_CHECK(l.local_endpoint().to_string() == "127.0.0.1:10000");
  auto server = echo_server(l);
  std::vector<tessera::fiber> clients;
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back([&l, i] {
      auto s = tcp_stream::connect(l.local_endpoint().to_string());
      TESSERA_SIM_CHECK(s.remote_endpoint().port() == 10000);
      TESSERA_SIM_CHECK(s.local_endpoint().port() >= 40000);
      const std::string msg = "hello " + std::to_string(i);
      s.write_all(msg.data(), msg.size());
      std::string got(msg.size(), '\0');
      s.read_exactly(got.data(), got.size());
      TESSERA_SIM_CHECK(got == msg);
      s.shutdown(SHUT_WR);
      char c;
      TESSERA_SIM_CHECK(s.read_some(&c, 1) == 0);  // the server's end of stream
    });
  }
  for (auto& c : clients) c.join();
  l.close();
  server.join();
}

TEST(SimulatedNetwork, EchoesWithDelaysInVirtualTime) {
  const auto o = with_delays(1ms, 10ms);
  const auto a = run_once(echo_body, tessera::testing::seed_for(o, 0), o);
  ASSERT_EQ(a.failure, nullptr) << failure_text(a.failure);
  EXPECT_GE(a.virtual_time, 3ms);  // handshake, request, reply: 1 ms each at least
  EXPECT_LE(a.virtual_time, 200ms);
  const auto b = run_once(echo_body, tessera::testing::seed_for(o, 0), o);
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.virtual_time, b.virtual_time);
  EXPECT_EQ(tessera::testing::explore(echo_body, {.runs = simulated::scaled(30), .verbose = false}),
            std::nullopt);
}

TEST(SimulatedNetwork, AConnectionToAPortNobodyListensOnIsRefused) {
  const auto r = run_once(
      [] {
        std::error_code ec;
        auto s = tcp_stream::connect(tessera::net::resolve("127.0.0.1:9"), ec);
        TESSERA_SIM_CHECK(ec == std::errc::connection_refused);
        auto l = tcp_listener::listen("127.0.0.1:7000");
        l.close();
        auto t = tcp_stream::connect(tessera::net::resolve("127.0.0.1:7000"), ec);
        TESSERA_SIM_CHECK(ec == std::errc::connection_refused);
      },
      1, with_delays(0ms, 0ms));
  EXPECT_EQ(r.failure, nullptr) << failure_text(r.failure);
}

TEST(SimulatedNetwork, AResetFailsBothEnds) {
  const auto r = run_once(
      [] {
        auto l = tcp_listener::listen(":0");
        auto c = tcp_stream::connect("127.0.0.1:10000");
        auto s = l.accept();
        tessera::testing::reset(c);
        char buf[8];
        std::error_code ec;
        s.read_some(buf, sizeof buf, ec);
        TESSERA_SIM_CHECK(ec == std::errc::connection_reset);
        c.read_some(buf, sizeof buf, ec);
        TESSERA_SIM_CHECK(ec == std::errc::connection_reset);
        l.close();
      },
      1, with_delays(1ms, 1ms));
  EXPECT_EQ(r.failure, nullptr) << failure_text(r.failure);
}

TEST(SimulatedNetwork, APartitionHoldsTcpUntilHealedAndTimesOutConnects) {
  const auto r = run_once(
      [] {
        auto l = tcp_listener::listen(":0");
        auto c = tcp_stream::connect("127.0.0.1:10000");
        auto s = l.accept();
        tessera::testing::partition(10000, 0);  // the server, from everyone
        c.write_all("ping", 4);
        char buf[4];
        std::error_code ec;
        const auto t0 = tessera::steady_clock::now();
        s.read_some(buf, sizeof buf, ec, t0 + 2s);
        TESSERA_SIM_CHECK(ec == std::errc::timed_out);
        TESSERA_SIM_CHECK(tessera::steady_clock::now() - t0 == 2s);
        // A new connection's handshake is lost too: connect retries, then gives up.
        auto late = tcp_stream::connect(tessera::net::resolve("127.0.0.1:10000"), ec,
                                        tessera::steady_clock::now() + 5s);
        TESSERA_SIM_CHECK(ec == std::errc::timed_out);
        tessera::testing::heal();
        s.read_exactly(buf, 4);
        TESSERA_SIM_CHECK(std::string(buf, 4) == "ping");
        l.close();
      },
      1, with_delays(1ms, 1ms));
  EXPECT_EQ(r.failure, nullptr) << failure_text(r.failure);
}

TEST(SimulatedNetwork, ALongPartitionResetsTheConnection) {
  auto o = with_delays(1ms, 1ms);
  o.network.partition_timeout = 1min;
  const auto r = run_once(
      [] {
        auto l = tcp_listener::listen(":0");
        auto c = tcp_stream::connect("127.0.0.1:10000");
        auto s = l.accept();
        tessera::testing::partition(c.local_endpoint().port(), 10000);
        c.write_all("ping", 4);
        char buf[4];
        std::error_code ec;
        s.read_some(buf, sizeof buf, ec);
        TESSERA_SIM_CHECK(ec == std::errc::connection_reset);
        l.close();
      },
      1, o);
  EXPECT_EQ(r.failure, nullptr) << failure_text(r.failure);
  EXPECT_GE(r.virtual_time, 1min);
}

TEST(SimulatedNetwork, DatagramsAreDelayedReorderedAndDropped) {
  auto o = with_delays(1ms, 50ms);
  o.network.drop = 0.25;
  std::vector<int> got;
  const auto r = run_once(
      [&] {
        auto a = tessera::net::udp_socket::bind("127.0.0.1:0");
        auto b = tessera::net::udp_socket::bind("127.0.0.1:0");
        TESSERA_SIM_CHECK(b.local_endpoint().port() == 20001);
        std::error_code ec;
        for (int i = 0; i < 100; ++i) a.send_to(&i, sizeof i, b.local_endpoint(), ec);
        for (;;) {
          int v = 0;
          tessera::net::endpoint from;
          b.receive_from(&v, sizeof v, from, ec, tessera::steady_clock::now() + 1s);
          if (ec == std::errc::timed_out) break;
          TESSERA_SIM_CHECK(!ec);
          TESSERA_SIM_CHECK(from.port() == 20000);
          got.push_back(v);
        }
      },
      tessera::testing::seed_for(o, 3), o);
  ASSERT_EQ(r.failure, nullptr) << failure_text(r.failure);
  EXPECT_GT(got.size(), 50u);
  EXPECT_LT(got.size(), 95u);                            // about a quarter lost
  EXPECT_FALSE(std::is_sorted(got.begin(), got.end()));  // overtaken
  std::sort(got.begin(), got.end());
  EXPECT_EQ(std::adjacent_find(got.begin(), got.end()), got.end());  // none twice
}

TEST(SimulatedNetwork, SocketsOutsideARunAreTheKernels) {
  EXPECT_THROW(tessera::testing::heal(), std::logic_error);
  tessera::runtime rt({.workers = 1});
  rt.run([] {
    auto l = tcp_listener::listen("127.0.0.1:0");
    EXPECT_NE(l.local_endpoint().port(), 10000);  // the kernel's port
  });
}

// tests/net_test.cpp's "either order passes" cases, with both orders (the
// wait parked first, or the close or stop first) explored instead of nudged
// by a sleep, and deadlines checked exactly in virtual time.
TESSERA_SIM_TEST(NetUnderSimulation, CloseWakesAReaderOrFailsItsRead,
                 {.runs = simulated::scaled(200)}) {
  auto l = tcp_listener::listen(":0");
  auto client = tcp_stream::connect("127.0.0.1:10000");
  auto server = l.accept();
  tessera::fiber reader([&] {
    char c;
    std::error_code ec;
    TESSERA_SIM_CHECK(client.read_some(&c, 1, ec) == 0);
    TESSERA_SIM_CHECK(ec == tessera::io::error::closed);
  });
  tessera::fiber closer([&] { client.close(); });
  reader.join();
  closer.join();
  char c;
  std::error_code ec;
  (void)client.read_some(&c, 1, ec);
  TESSERA_SIM_CHECK(ec == tessera::io::error::closed);  // later calls fail too
  l.close();
}

TESSERA_SIM_TEST(NetUnderSimulation, AStopRequestCancelsAWaitAndLeavesTheStreamUsable,
                 {.runs = simulated::scaled(200)}) {
  auto l = tcp_listener::listen(":0");
  auto client = tcp_stream::connect("127.0.0.1:10000");
  auto server = l.accept();
  std::stop_source stop;
  tessera::fiber reader([&] {
    char buf[8];
    std::error_code ec;
    {
      tessera::io::cancel_on_stop guard(client.descriptor(), stop.get_token());
      TESSERA_SIM_CHECK(client.read_some(buf, sizeof buf, ec) == 0);
      TESSERA_SIM_CHECK(ec == std::errc::operation_canceled);
    }
    server.write_all("after", 5);
    client.read_exactly(buf, 5);
    TESSERA_SIM_CHECK(std::string(buf, 5) == "after");
  });
  tessera::fiber stopper([&] { stop.request_stop(); });
  reader.join();
  stopper.join();
  l.close();
}

TESSERA_SIM_TEST(NetUnderSimulation, AcceptDeadlineAndCloseWakeTheListener,
                 {.runs = simulated::scaled(200)}) {
  auto l = tcp_listener::listen(":0");
  bool timed_out = false;
  tessera::fiber accepter([&] {
    std::error_code ec;
    const auto start = tessera::steady_clock::now();
    auto none = l.accept(ec, start + 20ms);
    TESSERA_SIM_CHECK(ec == std::errc::timed_out);
    TESSERA_SIM_CHECK(tessera::steady_clock::now() - start == 20ms);
    timed_out = true;
    auto closed = l.accept(ec);  // until closed
    TESSERA_SIM_CHECK(ec == tessera::io::error::closed);
  });
  tessera::fiber closer([&] {
    while (!timed_out) tessera::this_fiber::yield();
    l.close();
  });
  accepter.join();
  closer.join();
}

}  // namespace
