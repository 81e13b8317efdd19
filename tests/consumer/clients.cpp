// Built against the installed libtessera-pq-dev and libtessera-tls-dev
// packages (run_deb.cmake) and run: their headers compile, their libraries
// and those they depend on (libpq, OpenSSL) link and work.
#include <cstdio>

#include "tessera/pq.h"
#include "tessera/runtime.h"
#include "tessera/tls.h"

int main() {
  int ok = 0;
  tessera::runtime rt({.workers = 1});
  rt.run([&] {
    (void)tessera::tls::context::client();  // OpenSSL: the system's CAs loaded
    ++ok;
    try {
      // No server at this socket directory: libpq fails at once.
      (void)tessera::pq::connection::connect("host=/nonexistent port=1", std::chrono::seconds(5));
    } catch (const tessera::pq::error&) {
      ++ok;
    }
  });
  std::printf("%d\n", ok);
  return ok == 2 ? 0 : 1;
}
