// tessera::tls over loopback, with a throw-away CA and a certificate for
// localhost (scripts/make_certs.sh, run by the ctest fixture into the
// directory TESSERA_TLS_CERTS names): round trips with SNI and ALPN in threads
// and fibers, verification failures that say why, close_notify vs a
// truncated stream, deadlines, close() waking a reader, and a plain-text
// client refused.
#include <gtest/gtest.h>
#include <tessera/net.h>
#include <tessera/runtime.h>
#include <tessera/tls.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "exec_env.h"

namespace tessera::test {
namespace {

using namespace std::chrono_literals;

std::string cert_file(const char* name) {
  const char* dir = std::getenv("TESSERA_TLS_CERTS");
  if (dir == nullptr) {
    ADD_FAILURE() << "TESSERA_TLS_CERTS is not set (run through ctest: the tls_certs fixture "
                     "makes the certificates)";
    return name;
  }
  return std::string(dir) + "/" + name;
}

tls::context server_context() {
  auto ctx = tls::context::server(cert_file("server.pem"), cert_file("server.key"));
  ctx.set_alpn({"http/1.1"});
  return ctx;
}

tls::context trusting_client() {
  auto ctx = tls::context::client();
  ctx.load_verify_file(cert_file("ca.pem"));
  return ctx;
}

std::string address(net::tcp_listener& l) {
  return "127.0.0.1:" + std::to_string(l.local_endpoint().port());
}

class TlsIn : public ::testing::TestWithParam<exec_kind> {};
INSTANTIATE_TEST_SUITE_P(Envs, TlsIn,
                         ::testing::Values(exec_kind::threads, exec_kind::fibers_1w,
                                           exec_kind::fibers_2w),
                         [](const auto& p) { return to_string(p.param); });

TEST_P(TlsIn, RoundTripsWithSniAlpnAndCloseNotify) {
  const auto server_ctx = server_context();
  auto client_ctx = trusting_client();
  client_ctx.set_alpn({"h2", "http/1.1"});
  auto l = net::tcp_listener::listen("127.0.0.1:0");
  const std::string to = address(l);
  constexpr std::size_t kBytes = 1 << 20;
  std::string sni, server_alpn, client_alpn;
  std::size_t echoed = 0, received = 0;
  bool clean_end = false;
  run_all(GetParam(), 2, [&](int i) {
    if (i == 0) {  // the server: echo until close_notify
      auto t = tls::tls_stream::accept(server_ctx, l.accept());
      sni = t.server_name();
      server_alpn = t.alpn_protocol();
      std::vector<char> buf(16384);
      for (;;) {
        std::error_code ec;
        const std::size_t n = t.read_some(buf.data(), buf.size(), ec);
        if (ec || n == 0) {
          clean_end = !ec;
          break;
        }
        t.write_all(buf.data(), n);
        echoed += n;
      }
      (void)t.shutdown();
    } else {  // the client: write 1 MiB in pieces, read it back, close_notify
      auto t = tls::tls_stream::connect(client_ctx, net::tcp_stream::connect(to), "localhost");
      client_alpn = t.alpn_protocol();
      std::string out(kBytes, '\0');
      for (std::size_t k = 0; k < out.size(); ++k) out[k] = static_cast<char>(k * 131 + 7);
      std::string back(kBytes, '\0');
      for (std::size_t off = 0; off < kBytes; off += 65536) {
        t.write_all(out.data() + off, 65536);
        std::error_code ec;
        received += t.read_exactly(back.data() + off, 65536, ec);
        ASSERT_FALSE(ec) << ec.message();
      }
      EXPECT_EQ(back, out);
      EXPECT_FALSE(t.shutdown());
      char c;
      std::error_code ec;
      EXPECT_EQ(t.read_some(&c, 1, ec), 0u);  // the server's close_notify
      EXPECT_FALSE(ec) << ec.message();
    }
  });
  EXPECT_EQ(sni, "localhost");
  EXPECT_EQ(server_alpn, "http/1.1");
  EXPECT_EQ(client_alpn, "http/1.1");
  EXPECT_EQ(echoed, kBytes);
  EXPECT_EQ(received, kBytes);
  EXPECT_TRUE(clean_end);
}

TEST_P(TlsIn, VerificationFailuresSayWhy) {
  const auto server_ctx = server_context();
  auto l = net::tcp_listener::listen("127.0.0.1:0");
  const std::string to = address(l);
  std::vector<std::string> reasons;
  run_all(GetParam(), 2, [&](int i) {
    if (i == 0) {
      for (int k = 0; k < 2; ++k) {
        std::error_code ec;
        auto t = tls::tls_stream::accept(server_ctx, l.accept(), ec, io::clock::now() + 10s);
        EXPECT_TRUE(ec);  // the client gave up on us
      }
    } else {
      // The system's CAs do not know our test CA.
      std::error_code ec;
      auto a = tls::tls_stream::connect(tls::context::client(), net::tcp_stream::connect(to),
                                        "localhost", ec);
      EXPECT_EQ(ec, tls::error::verification);
      reasons.push_back(a.last_error());
      a.close();
      // Trusted, but not a certificate for that name.
      auto b = tls::tls_stream::connect(trusting_client(), net::tcp_stream::connect(to),
                                        "example.com", ec);
      EXPECT_EQ(ec, tls::error::verification);
      reasons.push_back(b.last_error());
      b.close();
    }
  });
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_NE(reasons[0].find("self-signed certificate"), std::string::npos) << reasons[0];
  EXPECT_NE(reasons[1].find("mismatch"), std::string::npos) << reasons[1];
  // The throwing form names the operation and the reason.
  try {
    std::jthread server([&] {
      std::error_code ec;
      auto t = tls::tls_stream::accept(server_ctx, l.accept(), ec, io::clock::now() + 10s);
    });
    (void)tls::tls_stream::connect(tls::context::client(), net::tcp_stream::connect(to),
                                   "localhost");
    ADD_FAILURE() << "verified an unknown CA";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find("tessera::tls::tls_stream::connect"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("self-signed"), std::string::npos) << e.what();
  }
}

TEST_P(TlsIn, TruncationDeadlinesAndCloseAreReported) {
  const auto server_ctx = server_context();
  auto l = net::tcp_listener::listen("127.0.0.1:0");
  const std::string to = address(l);
  run_all(GetParam(), 2, [&](int i) {
    if (i == 0) {
      auto t = tls::tls_stream::accept(server_ctx, l.accept());
      char c = 0;
      t.read_exactly(&c, 1);  // the client's go-ahead
      t.write_all("late", 4);
      std::error_code ec;
      (void)t.read_exactly(&c, 1, ec);  // the client's second go-ahead
      t.next_layer().close();           // no close_notify: the client sees truncation
    } else {
      auto t =
          tls::tls_stream::connect(trusting_client(), net::tcp_stream::connect(to), "localhost");
      char buf[8];
      std::error_code ec;
      const auto t0 = io::clock::now();
      EXPECT_EQ(t.read_some(buf, sizeof buf, ec, t0 + 100ms), 0u);
      EXPECT_EQ(ec, std::errc::timed_out);
      EXPECT_GE(io::clock::now() - t0, 100ms);
      t.write_all("g", 1);
      EXPECT_EQ(t.read_exactly(buf, 4, ec), 4u);  // nothing was lost to the timeout
      EXPECT_FALSE(ec);
      EXPECT_EQ(std::string(buf, 4), "late");
      t.write_all("g", 1);
      EXPECT_EQ(t.read_some(buf, sizeof buf, ec), 0u);
      EXPECT_EQ(ec, tls::error::truncated) << ec.message();
    }
  });
}

TEST(Tls, CloseWakesAReaderAndAPlainClientIsRefused) {
  const auto server_ctx = server_context();
  auto l = net::tcp_listener::listen("127.0.0.1:0");
  const std::string to = address(l);
  runtime rt({.workers = 2});
  rt.run([&] {
    // A reader parked in a TLS read is woken by close() from another fiber.
    fiber server([&] {
      auto t = tls::tls_stream::accept(server_ctx, l.accept());
      char c;
      std::error_code ec;
      (void)t.read_some(&c, 1, ec);  // the client closes without writing
    });
    auto t = tls::tls_stream::connect(trusting_client(), net::tcp_stream::connect(to), "localhost");
    std::error_code read_ec;
    fiber reader([&] {
      char c;
      (void)t.read_some(&c, 1, read_ec);
    });
    this_fiber::sleep_for(50ms);  // let the reader park (a missed park fails below, not hangs)
    t.close();
    reader.join();
    EXPECT_EQ(read_ec, io::error::closed);
    server.join();
    // A client that speaks plain HTTP to the TLS port: the handshake fails.
    fiber plain([&] {
      auto s = net::tcp_stream::connect(to);
      const std::string req = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
      s.write_all(req.data(), req.size());
      char buf[256];
      std::error_code ec;
      (void)s.read_some(buf, sizeof buf, ec, io::clock::now() + 5s);
    });
    std::error_code ec;
    auto bad = tls::tls_stream::accept(server_ctx, l.accept(), ec, io::clock::now() + 5s);
    EXPECT_EQ(ec, tls::error::handshake) << ec.message();
    EXPECT_FALSE(bad.last_error().empty());
    bad.close();
    plain.join();
  });
  EXPECT_THROW(tls::context::server("/nonexistent.pem", "/nonexistent.key"), std::runtime_error);
}

}  // namespace
}  // namespace tessera::test
