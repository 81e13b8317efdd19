// loadgen — a load client written on Tessera's own client API (it doubles as
// a client-side test of it), for bench/netbench.sh.
//
//   loadgen http --addr 127.0.0.1:8080 --connections 100 --rate 20000 --seconds 5
//       open loop: requests leave at a fixed total rate whatever the server
//       does, and each latency is measured from when its request was due, so
//       queueing delay is not hidden (wrk's closed loop hides it); prints
//       p50/p99/p99.9 in µs.
//   loadgen echo --addr 127.0.0.1:7000 --connections 100 --size 64 --seconds 5 [--rate R]
//       closed loop: each connection sends `size` bytes and waits for them back;
//       prints round trips per second. With --rate, open loop: round trips
//       start at that total rate (for CPU per round trip at a fixed load).
//   loadgen idle --addr 127.0.0.1:7000 --connections 10000 --seconds 5
//       opens that many connections and holds them quiet for `seconds` once
//       every one is open (or has failed), however long opening took; prints
//       "open N".
#include <tessera/net.h>
#include <tessera/latch.h>
#include <tessera/runtime.h>
#include <tessera/semaphore.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using clk = std::chrono::steady_clock;

// Reads one HTTP response (headers, then Content-Length bytes of body) from s,
// keeping any bytes beyond it in `pending`. False on error or end of stream.
bool read_response(tessera::net::tcp_stream& s, std::string& pending) {
  char buf[4096];
  for (;;) {
    const auto end = pending.find("\r\n\r\n");
    if (end != std::string::npos) {
      std::size_t body = 0;
      const auto cl = pending.find("Content-Length: ");
      if (cl != std::string::npos && cl < end) body = std::stoul(pending.substr(cl + 16));
      if (pending.size() >= end + 4 + body) {
        pending.erase(0, end + 4 + body);
        return true;
      }
    }
    std::error_code ec;
    const std::size_t n = s.read_some(buf, sizeof buf, ec);
    if (ec || n == 0) return false;
    pending.append(buf, n);
  }
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const std::size_t k = std::min(v.size() - 1, static_cast<std::size_t>(p * v.size()));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"loadgen: HTTP open-loop latency, echo throughput, idle connections"};
  std::string mode = "http", addr = "127.0.0.1:8080";
  int connections = 100, size = 64;
  double rate = 20000, seconds = 5;
  app.add_option("mode", mode, "http | echo | idle")->check(CLI::IsMember({"http", "echo", "idle"}));
  app.add_option("--addr", addr, "Server host:port")->capture_default_str();
  app.add_option("-c,--connections", connections, "Connections")->capture_default_str();
  auto* rate_opt =
      app.add_option("--rate", rate,
                     "http: requests per second, all connections together; echo: round trips "
                     "per second (default: as fast as the server answers)")
          ->capture_default_str();
  app.add_option("--size", size, "echo: message bytes")->capture_default_str();
  app.add_option("-s,--seconds", seconds, "Duration")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const bool paced = mode == "http" || rate_opt->count() > 0;

  // No idle spin: a load generator that spins shares the machine's cores with
  // the server it measures (measured on a 2-vCPU VM: it slowed the server).
  tessera::runtime rt({.workers = 1,
                       .stack_size = 64 * 1024,
                       .idle_spin = std::chrono::microseconds(0),
                       .io_idle_spin = std::chrono::microseconds(0)});
  return rt.run([&] {
    std::vector<tessera::fiber> fs;
    std::atomic<long> done{0}, failed{0};
    std::vector<std::vector<double>> lat(static_cast<std::size_t>(connections));
    const auto start = clk::now() + std::chrono::milliseconds(100);
    const auto stop = start + std::chrono::duration_cast<clk::duration>(
                                  std::chrono::duration<double>(seconds));
    tessera::latch opened(connections);
    // At most this many handshakes at once. Thousands of SYNs in one burst
    // overflow the server's SYN queue (tcp_max_syn_backlog, 2048 here), the
    // kernel answers with SYN cookies, and a connection whose last ACK then
    // finds the accept queue full is lost to the server for good while its
    // client sends nothing: an idle client would count it open, a slow
    // server (a sanitizer build) would never see it.
    tessera::counting_semaphore<> connecting(256);
    for (int c = 0; c < connections; ++c) {
      fs.emplace_back([&, c] {
        std::error_code ec;
        connecting.acquire();
        tessera::net::tcp_stream s =
            tessera::net::tcp_stream::connect(tessera::net::resolve(addr), ec);
        connecting.release();
        opened.count_down();
        if (ec) {
          failed.fetch_add(1);
          return;
        }
        if (mode == "idle") {
          // Held from when the last one opened: a slow opening (a
          // sanitizer build, a loaded host) must not shorten the time they
          // are all open at once.
          opened.wait();
          tessera::this_fiber::sleep_for(stop - start);
          return;
        }
        if (mode == "echo") {
          // The reply is read with read_some into a larger buffer, not
          // read_exactly: each read then comes back short, so the next one
          // waits for readiness first instead of making a recv that finds
          // nothing right after the send (half the client's recvs).
          std::string msg(static_cast<std::size_t>(size), 'x');
          std::vector<char> back(msg.size() + 65536);
          const auto interval = std::chrono::duration_cast<clk::duration>(
              std::chrono::duration<double>(paced ? connections / rate : 0));
          auto due = start + interval * c / connections;
          tessera::this_fiber::sleep_until(due);
          for (; clk::now() < stop; due += interval) {
            if (paced) tessera::this_fiber::sleep_until(due);
            s.write_all(msg.data(), msg.size(), ec);
            for (std::size_t got = 0; !ec && got < msg.size();) {
              const std::size_t r = s.read_some(back.data(), back.size(), ec);
              if (!ec && r == 0) ec = tessera::io::error::eof;
              got += r;
            }
            if (ec) {
              failed.fetch_add(1);
              return;
            }
            done.fetch_add(1, std::memory_order_relaxed);
          }
          return;
        }
        // http, open loop: this connection's requests are due every
        // `interval`, offset so the connections interleave.
        const auto interval = std::chrono::duration_cast<clk::duration>(
            std::chrono::duration<double>(connections / rate));
        auto due = start + interval * c / connections;
        static const std::string req = "GET / HTTP/1.1\r\nHost: bench\r\n\r\n";
        std::string pending;
        (void)s.set_no_delay(true);
        for (; due < stop; due += interval) {
          tessera::this_fiber::sleep_until(due);
          s.write_all(req.data(), req.size(), ec);
          if (ec || !read_response(s, pending)) {
            failed.fetch_add(1);
            return;
          }
          lat[static_cast<std::size_t>(c)].push_back(
              std::chrono::duration<double, std::micro>(clk::now() - due).count());
          done.fetch_add(1, std::memory_order_relaxed);
        }
      });
    }
    opened.wait();
    if (mode == "idle") {
      // Flushed now: netbench reads it while the connections are held.
      std::printf("open %d (failed %ld)\n", connections - static_cast<int>(failed.load()),
                  failed.load());
      std::fflush(stdout);
    }
    for (auto& f : fs) f.join();
    const double secs = std::chrono::duration<double>(stop - start).count();
    if (mode == "echo") {
      std::printf("round trips/s %.0f, failed connections %ld, round trips %ld\n",
                  done.load() / secs, failed.load(), done.load());
    } else if (mode == "http") {
      std::vector<double> all;
      for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
      std::printf("requests %ld (%.0f/s), failed connections %ld, p50 %.0f us, p99 %.0f us, "
                  "p99.9 %.0f us\n",
                  done.load(), done.load() / secs, failed.load(), percentile(all, 0.50),
                  percentile(all, 0.99), percentile(all, 0.999));
    }
    return failed.load() == 0 ? 0 : 1;
  });
}
