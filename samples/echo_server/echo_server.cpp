// echo_server — a TCP echo server on Tessera: a fiber per connection, each
// parking on its socket instead of blocking a worker.
//
//   echo_server --port 7000 --workers 2 [--idle-timeout 60]
//
// Prints one line "listening on HOST:PORT" once it accepts, so a script can
// start it and wait for that line. SIGINT/SIGTERM stop it: the listener is
// closed, connections finish what they are echoing and close.
#include <signal.h>
#include <tessera/net.h>
#include <tessera/runtime.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

namespace {

std::atomic<bool> g_stop{false};

// One connection: echo until the peer closes, goes quiet for `idle`, or errs.
void serve(tessera::net::tcp_stream s, std::chrono::seconds idle) {
  char buf[16 * 1024];
  for (;;) {
    std::error_code ec;
    const auto deadline = tessera::io::clock::now() + idle;
    const std::size_t n = s.read_some(buf, sizeof buf, ec, deadline);
    if (ec || n == 0) return;  // timed out, reset, closed, or end of stream
    s.write_all(buf, n, ec, deadline);
    if (ec) return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"echo_server: a TCP echo server on Tessera fibers"};
  std::string host = "127.0.0.1";
  unsigned short port = 7000;
  unsigned workers = 0;
  unsigned idle_s = 60;
  app.add_option("--host", host, "Address to listen on")->capture_default_str();
  app.add_option("-p,--port", port, "Port (0: any free one)")->capture_default_str();
  app.add_option("-w,--workers", workers, "Worker threads (0: one per core)")->capture_default_str();
  app.add_option("--idle-timeout", idle_s, "Close a connection idle this long, seconds")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  // Signals go to a waiting thread, which closes the listener.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  tessera::Runtime rt({.workers = workers});
  auto listener = std::make_shared<tessera::net::tcp_listener>(
      tessera::net::tcp_listener::listen(host + ":" + std::to_string(port)));
  std::printf("listening on %s\n", listener->local_endpoint().to_string().c_str());
  std::fflush(stdout);

  std::thread signals([&] {
    int sig = 0;
    sigwait(&set, &sig);
    g_stop = true;
    listener->close();  // wakes the accept loop
  });

  rt.run([&] {
    for (;;) {
      std::error_code ec;
      tessera::net::tcp_stream s = listener->accept(ec);
      if (ec) {
        if (g_stop) break;
        continue;  // e.g. a connection reset before we accepted it
      }
      tessera::spawn(serve, std::move(s), std::chrono::seconds(idle_s));
    }
  });
  signals.join();
  std::printf("stopped\n");
  return 0;
}
