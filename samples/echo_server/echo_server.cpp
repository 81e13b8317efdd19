// echo_server — a TCP echo server on Tessera: a fiber per connection, each
// parking on its socket instead of blocking a worker.
//
//   echo_server --port 7000 --workers 2 [--idle-timeout 60]
//
// A connection quiet for --idle-timeout seconds is closed (0: never). As
// Go's net package does, every connection runs with TCP_NODELAY.
// Prints "listening on HOST:PORT" once it accepts, so a script can start it
// and wait for that line, then "I/O: " and the backend in use
// (TESSERA_IO_BACKEND chooses another). SIGINT/SIGTERM stop it: the listener is
// closed, connections finish what they are echoing and close.
#include <tessera/net.h>

#include <chrono>

#include "../serve_main.h"

namespace {

// One connection: echo until the peer closes, goes quiet for `idle`, or errs
// (or the server stops: what was read is echoed first).
void serve(tessera::samples::connection& c, std::chrono::seconds idle) {
  tessera::net::tcp_stream& s = c.stream;
  (void)s.set_no_delay(true);
  char buf[4096];  // an idle connection costs its fiber's touched stack: keep it small
  for (;;) {
    std::error_code ec;
    const auto deadline = tessera::samples::idle_deadline(idle);
    const std::size_t n = s.read_some(buf, sizeof buf, ec, deadline);
    if (ec || n == 0) return;  // timed out, reset, closed, stopped, or end of stream
    if (!c.begin_request()) return;
    s.write_all(buf, n, ec, deadline);
    if (ec || !c.end_request()) return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  return tessera::samples::serve_main(
      argc, argv, "echo_server: a TCP echo server on Tessera fibers", 7000, 60, serve);
}
