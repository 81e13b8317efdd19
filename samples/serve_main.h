// samples/serve_main.h — what the echo and HTTP servers share: the command line
// (CLI11), SIGINT/SIGTERM handling, the listener, its "listening on" line, and
// the accept loop that starts a fiber per connection.
#pragma once

#include <signal.h>
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

#include "stats_table.h"

namespace tessera::samples {

/// Set once SIGINT or SIGTERM arrived: handlers stop keeping connections alive.
inline std::atomic<bool> g_stopping{false};

/// `idle` from now, or no deadline at all when idle is 0 (--idle-timeout 0:
/// what scripts/netbench.sh compares against, to price the timed waits).
inline tessera::io::clock::time_point idle_deadline(std::chrono::seconds idle) {
  return idle.count() == 0 ? tessera::io::clock::time_point::max()
                           : tessera::io::clock::now() + idle;
}

/// Parses --host, --port, --workers and --idle-timeout (and what
/// `more_options` adds), listens, prints
/// "listening on HOST:PORT", and runs `serve(stream, idle)` in a fiber per
/// connection until SIGINT or SIGTERM (then the listener closes and run()
/// waits for the connections to finish). Returns main()'s exit code.
template <class Serve>
int serve_main(int argc, char** argv, const char* description, unsigned short default_port,
               unsigned default_idle_s, Serve serve,
               const std::function<void(CLI::App&)>& more_options = {}) {
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
  app.add_flag("--stats", stats, "Print each worker's counters (runtime::stats) on exit");
  if (more_options) more_options(app);
  CLI11_PARSE(app, argc, argv);

  // Signals go to a waiting thread, which closes the listener.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  tessera::runtime rt({.workers = workers});
  auto listener = std::make_shared<tessera::net::tcp_listener>(
      tessera::net::tcp_listener::listen(host + ":" + std::to_string(port)));
  std::printf("listening on %s\n", listener->local_endpoint().to_string().c_str());
  std::fflush(stdout);
  std::thread signals([&] {
    int sig = 0;
    sigwait(&set, &sig);
    g_stopping = true;
    listener->close();  // wakes the accept loop
  });
  rt.run([&] {
    for (;;) {
      std::error_code ec;
      tessera::net::tcp_stream s = listener->accept(ec);
      if (ec) {
        if (g_stopping) break;
        continue;  // e.g. a connection reset before it was accepted
      }
      tessera::spawn(serve, std::move(s), std::chrono::seconds(idle_s));
    }
  });
  signals.join();
  std::printf("stopped\n");
  if (stats) print_stats(rt.stats());
  return 0;
}

}  // namespace tessera::samples
