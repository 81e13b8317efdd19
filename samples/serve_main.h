// samples/serve_main.h — what the echo and HTTP servers share: the command line
// (CLI11), SIGINT/SIGTERM handling, the listener, its "listening on" line, and
// the accept loop that starts a fiber per connection.
#pragma once

#include <signal.h>
#include <tessera/mutex.h>
#include <tessera/net.h>
#include <tessera/runtime.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "stats_table.h"

namespace tessera::samples {

/// Set once SIGINT or SIGTERM arrived: handlers stop keeping connections alive.
inline std::atomic<bool> g_stopping{false};

/// One open connection, as the graceful stop sees it (Go's http.Server
/// Shutdown): idle connections — waiting for a next request — are closed at
/// once; a busy one finishes its request, answers it, and then closes.
/// serve() calls begin_request() when a request's first bytes arrive and
/// end_request() once it is answered.
class connection {
 public:
  explicit connection(tessera::net::tcp_stream s) : stream(std::move(s)) {}
  tessera::net::tcp_stream stream;
  /// The socket the stop interrupts, when a layer over `stream` (TLS) has
  /// taken it over; nullptr before that layer goes (a stop then interrupts
  /// nothing: the connection is on its way out).
  void set_socket(tessera::io::descriptor* d) {
    std::lock_guard lock(socket_mu_);
    socket_ = d;
  }
  /// False if the server is stopping and has closed this idle connection:
  /// the caller drops what it read and returns.
  bool begin_request() noexcept {
    int idle = kIdle;
    return state_.compare_exchange_strong(idle, kBusy, std::memory_order_acq_rel);
  }
  /// False if the server is stopping: the caller closes the connection.
  bool end_request() noexcept {
    state_.store(kIdle, std::memory_order_release);
    return !g_stopping.load(std::memory_order_acquire);
  }
  /// The stop's side: closes the connection if it is idle (any thread).
  void close_if_idle() {
    int idle = kIdle;
    if (state_.compare_exchange_strong(idle, kClosing, std::memory_order_acq_rel)) {
      std::lock_guard lock(socket_mu_);              // the socket stays while we interrupt it
      if (socket_ != nullptr) socket_->interrupt();  // its read ends with operation_canceled
    }
  }

 private:
  static constexpr int kIdle = 0, kBusy = 1, kClosing = 2;
  std::atomic<int> state_{kIdle};
  tessera::mutex socket_mu_;  // taken by the connection's fiber and by the stop
  tessera::io::descriptor* socket_ = &stream.descriptor();
};

/// Every open connection of the server, for the stop.
class connection_set {
 public:
  void add(connection* c) {
    std::lock_guard lock(mu_);
    all_.push_back(c);
  }
  void remove(connection* c) {
    std::lock_guard lock(mu_);
    std::erase(all_, c);
  }
  void close_idle() {
    std::lock_guard lock(mu_);
    for (connection* c : all_) c->close_if_idle();
  }

 private:
  tessera::mutex mu_;  // taken by fibers and by the signal thread alike
  std::vector<connection*> all_;
};

/// `idle` from now, or no deadline at all when idle is 0 (--idle-timeout 0:
/// what bench/netbench.sh compares against, to price the timed waits).
inline tessera::io::clock::time_point idle_deadline(std::chrono::seconds idle) {
  return idle.count() == 0 ? tessera::io::clock::time_point::max()
                           : tessera::io::clock::now() + idle;
}

/// Parses --host, --port, --workers and --idle-timeout (and what
/// `more_options` adds), listens, prints
/// "listening on HOST:PORT", and runs `serve(stream, idle)` in a fiber per
/// connection until SIGINT or SIGTERM: then the listener closes, idle
/// connections close, busy ones finish their request (see connection), and
/// run() returns once all have gone. Returns main()'s exit code.
template <class Serve>
int serve_main(int argc, char** argv, const char* description, unsigned short default_port,
               unsigned default_idle_s, Serve serve,
               const std::function<void(CLI::App&)>& more_options = {},
               const std::function<void()>& after_run = {}) {
  CLI::App app{description};
  std::string host = "127.0.0.1";
  unsigned short port = default_port;
  unsigned workers = 0;
  unsigned idle_s = default_idle_s;
  bool stats = false;
  app.add_option("--host", host, "Address to listen on")->capture_default_str();
  app.add_option("-p,--port", port, "Port (0: any free one)")->capture_default_str();
  app.add_option("-w,--workers", workers, "Worker threads (0: one per core)")
      ->capture_default_str();
  app.add_option("--idle-timeout", idle_s,
                 "Seconds a connection may stay quiet (and a request take to "
                 "arrive); 0: no deadline")
      ->capture_default_str();
  unsigned idle_spin_us = 10;
  app.add_option(
         "--idle-spin", idle_spin_us,
         "Microseconds an idle worker polls before it sleeps (runtime_options::io_idle_spin): "
         "lower costs less CPU at light load, higher answers sooner")
      ->capture_default_str();
  std::size_t send_zc = 0;
  app.add_option("--send-zc-threshold", send_zc,
                 "io_uring backend: writes of at least this many bytes are zero-copy sends "
                 "(runtime_options::send_zc_threshold; 0: never)")
      ->capture_default_str();
  app.add_flag("--stats", stats, "Print each worker's counters (runtime::stats) on exit");
  if (more_options) more_options(app);
  CLI11_PARSE(app, argc, argv);

  // Signals go to a waiting thread, which closes the listener.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  tessera::runtime rt({.workers = workers,
                       .io_idle_spin = std::chrono::microseconds(idle_spin_us),
                       .send_zc_threshold = send_zc});
  connection_set open;
  auto listener = std::make_shared<tessera::net::tcp_listener>(
      tessera::net::tcp_listener::listen(host + ":" + std::to_string(port)));
  std::printf("listening on %s\n", listener->local_endpoint().to_string().c_str());
  std::printf("I/O: %s\n", rt.io_name());
  std::fflush(stdout);
  std::thread signals([&] {
    int sig = 0;
    sigwait(&set, &sig);
    g_stopping = true;
    listener->close();  // wakes the accept loop
    open.close_idle();
  });
  rt.run([&] {
    for (;;) {
      std::error_code ec;
      tessera::net::tcp_stream s = listener->accept(ec);
      if (ec) {
        if (g_stopping) break;
        continue;  // e.g. a connection reset before it was accepted
      }
      tessera::spawn(
          [&open, serve](tessera::net::tcp_stream stream, std::chrono::seconds idle) {
            connection c(std::move(stream));
            open.add(&c);
            // A stop that came between the accept and add() missed this one.
            if (g_stopping.load()) c.close_if_idle();
            serve(c, idle);
            open.remove(&c);
          },
          std::move(s), std::chrono::seconds(idle_s));
    }
  });
  // Resources of the program's own that hold sockets (a database pool) go
  // while the runtime that polls them is still there.
  if (after_run) after_run();
  signals.join();
  std::printf("stopped\n");
  if (stats) print_stats(rt.stats());
  return 0;
}

}  // namespace tessera::samples
