// What completing I/O in the ring (io_backend::io_uring) must keep of io.h's
// contract, asserted on whichever backend runs (ctest runs the Net.* tests
// on epoll, io_uring and io_uring_poll): small reads of a large stream, a
// deadline with a receive in flight, a peer that resets mid-write, close()
// and interrupt() with a send in flight, close() racing completions. And
// what only the completion backend has (NetRing.*, which ask for it
// themselves): a buffer ring run dry by 1,000 idle-then-busy connections,
// and bytes received into the ring that outlive their runtime.
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <tessera/io.h>
#include <tessera/latch.h>
#include <tessera/net.h>
#include <tessera/runtime.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace tessera::test {
namespace {

using namespace std::chrono_literals;
using net::tcp_listener;
using net::tcp_stream;

std::string address_of(tcp_listener& l) {
  return "127.0.0.1:" + std::to_string(l.local_endpoint().port());
}

// Bytes in a socket's send queue (SIOCOUTQ): how far a writer has got.
int queued_to_send(const tcp_stream& s) {
  int n = 0;
  ::ioctl(const_cast<tcp_stream&>(s).descriptor().native_handle(), SIOCOUTQ, &n);
  return n;
}

// Byte i of stream `k`: every position and stream distinct enough that a
// lost, doubled or reordered chunk shows.
char pattern(std::size_t i, std::size_t k = 0) {
  return static_cast<char>((i * 131 + k * 7 + i / 251) & 0xff);
}

TEST(Net, SmallReadsOfALargeStreamLoseNothing) {
  watchdog dog("net small reads", 60s);
  constexpr std::size_t kBytes = 1 << 20;
  runtime rt({.workers = 2});
  rt.run([&] {
    tcp_listener l = tcp_listener::listen("127.0.0.1:0");
    fiber writer([&] {
      tcp_stream s = l.accept();
      std::vector<char> all(kBytes);
      for (std::size_t i = 0; i < kBytes; ++i) all[i] = pattern(i);
      // Chunks of varied sizes, so arrivals split the receive buffers unevenly.
      for (std::size_t at = 0, step = 1; at < kBytes; step = step * 7 % 9973 + 1) {
        const std::size_t n = std::min(step, kBytes - at);
        s.write_all(all.data() + at, n);
        at += n;
      }
    });
    tcp_stream c = tcp_stream::connect(address_of(l));
    std::vector<char> got;
    char buf[5000];
    for (std::size_t ask = 1; got.size() < kBytes; ask = ask % 4999 + 1) {
      const std::size_t r = c.read_some(buf, ask);
      ASSERT_GT(r, 0u) << "end of stream after " << got.size() << " bytes";
      ASSERT_LE(r, ask);
      got.insert(got.end(), buf, buf + r);
    }
    writer.join();
    for (std::size_t i = 0; i < kBytes; ++i) {
      ASSERT_EQ(got[i], pattern(i)) << "byte " << i;
    }
    std::error_code ec;
    EXPECT_EQ(c.read_some(buf, sizeof buf, ec), 0u) << "the end of stream after the bytes";
    EXPECT_FALSE(ec) << ec.message();
  });
}

TEST(Net, ADeadlineWithAReceiveInFlightLosesNothing) {
  watchdog dog("net deadline in flight", 60s);
  runtime rt({.workers = 1});
  rt.run([&] {
    tcp_listener l = tcp_listener::listen("127.0.0.1:0");
    tcp_stream c = tcp_stream::connect(address_of(l));
    tcp_stream s = l.accept();
    char buf[16];
    std::error_code ec;
    const auto start = io::clock::now();
    EXPECT_EQ(s.read_some(buf, sizeof buf, ec, start + 30ms), 0u);
    EXPECT_EQ(ec, std::errc::timed_out) << ec.message();
    EXPECT_GE(io::clock::now() - start, 30ms) << "timed out early";
    // The receive stays armed; what arrives now is the next read's.
    c.write_all("late", 4);
    const std::size_t r = s.read_some(buf, sizeof buf, ec, io::clock::now() + 10s);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_EQ(std::string(buf, r), "late");
    // Twice, with bytes arriving after the first timeout and before the second read.
    EXPECT_EQ(s.read_some(buf, sizeof buf, ec, io::clock::now() + 5ms), 0u);
    EXPECT_EQ(ec, std::errc::timed_out);
    c.write_all("later", 5);
    s.read_exactly(buf, 5);
    EXPECT_EQ(std::string(buf, 5), "later");
  });
}

TEST(Net, APeerThatResetsMidWriteEndsTheWriteWithAnError) {
  watchdog dog("net reset mid-write", 60s);
  runtime rt({.workers = 2});
  rt.run([&] {
    tcp_listener l = tcp_listener::listen("127.0.0.1:0");
    tessera::latch writing(1);
    fiber peer([&] {
      tcp_stream c = tcp_stream::connect(address_of(l));
      char buf[1024];
      c.read_exactly(buf, sizeof buf);  // the write is under way
      writing.wait();
      const linger abort{1, 0};  // close with a reset
      ::setsockopt(c.descriptor().native_handle(), SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
    });
    tcp_stream s = l.accept();
    std::vector<char> big(64 << 20, 'x');  // far more than the socket buffers hold
    writing.count_down();
    std::error_code ec;
    const std::size_t sent = s.write_all(big.data(), big.size(), ec, io::clock::now() + 20s);
    EXPECT_LT(sent, big.size());
    EXPECT_TRUE(ec == std::errc::connection_reset || ec == std::errc::broken_pipe) << ec.message();
    peer.join();
  });
}

// A writer whose send the peer never drains: the send stays in flight (in
// the ring, on the completion backend) until close() or a stop request.
TEST(Net, CloseAndInterruptEndASendInFlight) {
  watchdog dog("net send in flight", 60s);
  runtime rt({.workers = 2});
  rt.run([&] {
    tcp_listener l = tcp_listener::listen("127.0.0.1:0");
    tcp_stream c = tcp_stream::connect(address_of(l));
    tcp_stream s = l.accept();
    {
      // interrupt(): operation_canceled, and the stream stays usable.
      std::stop_source stop;
      std::atomic<bool> cancelled{false};
      fiber w([&] {
        auto big = std::make_unique<std::vector<char>>(32 << 20, 'y');
        io::cancel_on_stop guard(s.descriptor(), stop.get_token());
        std::error_code ec;
        const std::size_t sent = s.write_all(big->data(), big->size(), ec);
        EXPECT_LT(sent, big->size());
        EXPECT_EQ(ec, std::errc::operation_canceled) << ec.message();
        big.reset();  // the kernel no longer reads it
        cancelled = true;
      });
      // The writer has filled the socket's buffers, and waits.
      EXPECT_TRUE(eventually([&] { return queued_to_send(s) >= 64 * 1024; }));
      stop.request_stop();
      w.join();
      EXPECT_TRUE(cancelled.load());
    }
    {
      // close(): io::error::closed. A second connection, with room to send.
      tcp_stream c2 = tcp_stream::connect(address_of(l));
      tcp_stream s2 = l.accept();
      fiber w([&] {
        std::vector<char> big(32 << 20, 'z');
        std::error_code ec;
        const std::size_t sent = s2.write_all(big.data(), big.size(), ec);
        EXPECT_LT(sent, big.size());
        EXPECT_EQ(ec, io::error::closed) << ec.message();
      });
      EXPECT_TRUE(eventually([&] { return queued_to_send(s2) >= 64 * 1024; }));
      s2.close();
      w.join();
    }
  });
}

// close() from another thread at every point of a stream's traffic: each
// read ends with bytes, the end, or closed, and nothing crashes or leaks
// (the sanitizer builds check the second).
TEST(Net, CloseRacingCompletionsEndsEveryCallCleanly) {
  watchdog dog("net close races", 120s);
  const int rounds = kSanitizerSlowdown > 1 ? 50 : 200;
  runtime rt({.workers = 2});
  rt.start();
  tcp_listener l = tcp_listener::listen("127.0.0.1:0");
  const std::string addr = address_of(l);
  for (int round = 0; round < rounds; ++round) {
    tcp_stream server;
    tessera::latch accepted(1), reading(1);
    std::atomic<bool> over{false};
    auto client = rt.submit([&] {
      tcp_stream c = tcp_stream::connect(addr);
      accepted.wait();
      char chunk[700];
      std::memset(chunk, 'c', sizeof chunk);
      std::error_code ec;
      // Until the round is over (a shut-down peer's buffers fill, and then
      // a write waits for room that never comes: short deadlines).
      while (!over.load() && (!ec || ec == std::errc::timed_out)) {
        c.write_all(chunk, sizeof chunk, ec, io::clock::now() + 2ms);
      }
    });
    auto reader = rt.submit([&] {
      server = l.accept();
      accepted.count_down();
      char buf[512];
      std::error_code ec;
      std::size_t wrong = 0;  // bytes that are not the client's (a recycled buffer's, say)
      reading.count_down();
      for (;;) {
        const std::size_t r = server.read_some(buf, sizeof buf, ec, io::clock::now() + 10s);
        if (ec || r == 0) break;
        wrong +=
            static_cast<std::size_t>(std::count_if(buf, buf + r, [](char c) { return c != 'c'; }));
      }
      EXPECT_EQ(wrong, 0u) << "round " << round;
      EXPECT_TRUE(ec == io::error::closed) << "round " << round << ": " << ec.message();
      server.write_some("x", 1, ec);
      EXPECT_EQ(ec, io::error::closed) << "later calls fail too";
    });
    reading.wait();
    spin_for(std::chrono::microseconds(round % 17 * 13));  // any point of the traffic
    server.close();
    reader.get();
    over = true;
    client.get();
  }
  rt.stop();
}

// The completion backend alone: a ring of 16 buffers of 256 bytes against
// 1,000 connections that first sit idle, each with a read armed, then all
// send 2 KiB at once while their readers wait — far more than the ring
// holds. Receives find it dry and end; the readers then read by recv(2);
// every byte arrives, in order, and every buffer comes back.
TEST(NetRing, ADryBufferRingFallsBackToReceiveAndLosesNothing) {
  watchdog dog("net dry buffer ring", 120s);
  constexpr int kConns = 1000;
  constexpr std::size_t kBytes = 2048;
  runtime rt({.workers = 2, .io = io_backend::io_uring, .io_buffers = 16, .io_buffer_size = 256});
  rt.run([&] {
    tcp_listener l = tcp_listener::listen("127.0.0.1:0", {.backlog = kConns});
    const std::string addr = address_of(l);
    tessera::latch armed(kConns), sent(kConns), checked(kConns);
    std::atomic<int> bad{0};
    fiber acceptor([&] {
      std::vector<fiber> readers;
      for (int k = 0; k < kConns; ++k) {
        tcp_stream s = l.accept();
        readers.emplace_back([&, s = std::move(s)]() mutable {
          char first;
          s.read_exactly(&first, 1);  // the stream's index, sent first: arms the receive
          const auto index = static_cast<unsigned char>(first);
          armed.count_down();
          sent.wait();  // everyone has sent: the ring ran dry meanwhile
          std::vector<char> got(kBytes);
          s.read_exactly(got.data(), kBytes);
          for (std::size_t i = 0; i < kBytes; ++i) {
            if (got[i] != pattern(i, index)) {
              ++bad;
              break;
            }
          }
          s.write_all("k", 1);
          checked.count_down();
        });
      }
      for (auto& f : readers) f.join();
    });
    std::vector<fiber> clients;
    for (int k = 0; k < kConns; ++k) {
      clients.emplace_back([&, k] {
        tcp_stream c = tcp_stream::connect(addr);
        const char index = static_cast<char>(k & 0xff);
        c.write_all(&index, 1);
        armed.wait();  // every reader waits with its receive armed
        std::vector<char> bytes(kBytes);
        for (std::size_t i = 0; i < kBytes; ++i) bytes[i] = pattern(i, k & 0xff);
        c.write_all(bytes.data(), kBytes);
        sent.count_down();
        char ack;
        c.read_exactly(&ack, 1);
      });
    }
    for (auto& f : clients) f.join();
    acceptor.join();
    EXPECT_EQ(bad.load(), 0) << "streams whose bytes came out wrong";
  });
  const auto s = rt.stats();
  EXPECT_GT(s.io_buffers_ran_dry, 0u) << "the ring never ran dry: the test tested nothing";
  EXPECT_EQ(s.io_buffers_in_use, 0u) << "buffers not given back";
}

// Bytes the ring received and nobody read yet outlive the runtime whose
// ring it was: a later read (here by a plain thread) gets them first.
TEST(NetRing, BytesReceivedIntoTheRingOutliveItsRuntime) {
  watchdog dog("net bytes outlive the ring", 60s);
  tcp_listener l = tcp_listener::listen("127.0.0.1:0");
  tcp_stream c = tcp_stream::connect(address_of(l));
  tcp_stream s = l.accept();
  {
    runtime rt({.workers = 1, .io = io_backend::io_uring});
    rt.run([&] {
      c.write_all("abcdef", 6);
      char two[2];
      s.read_exactly(two, 2);  // the ring took all six; two are read
      EXPECT_EQ(std::string(two, 2), "ab");
    });
  }
  c.write_all("gh", 2);
  char rest[6];
  s.read_exactly(rest, 6);
  EXPECT_EQ(std::string(rest, 6), "cdefgh");
}

TEST(NetRing, BufferOptionsOutOfRangeAreClearErrors) {
  try {
    runtime rt({.workers = 1, .io_buffers = 1000});
    ADD_FAILURE() << "io_buffers = 1000 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("io_buffers = 1000 is not a power of two"),
              std::string::npos)
        << e.what();
  }
  try {
    runtime rt({.workers = 1, .io_buffer_size = 16});
    ADD_FAILURE() << "io_buffer_size = 16 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("io_buffer_size = 16 bytes"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tessera::test
