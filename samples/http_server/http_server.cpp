// http_server — an HTTP/1.1 keep-alive server on Tessera: a fiber per
// connection, requests parsed with http-parser (Debian's libhttp-parser-dev).
//
//   http_server --port 8080 --workers 1 [--idle-timeout 10]
//               [--tls-cert server.pem --tls-key server.key [--tls-ciphersuites S]]
//
// Routes: "/" answers "Hello, World!"; "/static/NAME" the file NAME of the
// --static directory (read through tessera::io::blocking, so a slow disk parks
// only the fiber; names with '/' or a leading '.' are refused with 404);
// anything else 404. With --tls-cert and --tls-key it serves HTTPS
// (tessera::tls, ALPN "http/1.1"). What every request gets — keep-alive,
// pipelining, 400/431/413 and the lingering close, the deadlines — is
// samples/http_serve.h's: --max-header-bytes (32 KiB, nginx's default),
// --max-body-bytes (1 MiB); a request must arrive whole within
// --idle-timeout seconds of its first byte, and a quiet keep-alive connection
// is closed after it (0 turns the deadlines off). Prints "listening on
// HOST:PORT" once it accepts, then "I/O: " and the backend in use. SIGINT or SIGTERM stop it
// gracefully: the listener and the idle connections close at once, requests in flight are answered
// (with "Connection: close") and then closed.
#include <tessera/net.h>
#include <tessera/tls.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "../http_serve.h"

namespace {

constexpr std::string_view kHello = "Hello, World!";
std::string g_static_dir;  // --static: the directory behind /static/
std::optional<tessera::tls::context> g_tls;  // --tls-cert, --tls-key

/// The contents of /static/NAME, or nothing (no such file, a name that could
/// leave the directory, no --static).
std::optional<std::string> static_file(const std::string& url) {
  constexpr std::string_view kPrefix = "/static/";
  if (g_static_dir.empty() || url.rfind(kPrefix, 0) != 0) return std::nullopt;
  const std::string name = url.substr(kPrefix.size());
  if (name.empty() || name[0] == '.' || name.find('/') != std::string::npos ||
      name.find('?') != std::string::npos) {
    return std::nullopt;
  }
  return tessera::io::blocking([&]() -> std::optional<std::string> {
    std::ifstream f(g_static_dir + "/" + name, std::ios::binary);
    if (!f) return std::nullopt;
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  });
}

void respond(const tessera::samples::http_request& req, std::string& out) {
  std::optional<std::string> file;
  const std::string url(req.url);
  if (url != "/") file = static_file(url);
  const bool ok = url == "/" || file.has_value();
  const std::string_view body =
      file ? std::string_view(*file) : ok ? kHello : std::string_view("Not Found");
  tessera::samples::append_response(
      out, ok ? "200 OK" : "404 Not Found",
      file ? "Content-Type: application/octet-stream\r\n" : "Content-Type: text/plain\r\n", body,
      req.keep_alive);
}

void serve(tessera::samples::connection& conn, std::chrono::seconds idle) {
  (void)conn.stream.set_no_delay(true);
  if (!g_tls) {
    tessera::samples::serve_http(conn, conn.stream, idle, respond);
    return;
  }
  // HTTPS: the handshake counts as a request (a stop waits for it, within
  // the idle timeout), and then the TLS stream owns the socket.
  if (!conn.begin_request()) return;
  std::error_code ec;
  auto tls = tessera::tls::tls_stream::accept(*g_tls, std::move(conn.stream), ec,
                                              tessera::samples::idle_deadline(idle));
  conn.set_socket(&tls.next_layer().descriptor());
  // Before `tls` goes, so that a stop never interrupts a socket that has gone.
  const struct forget_socket {
    tessera::samples::connection& c;
    ~forget_socket() { c.set_socket(nullptr); }
  } forget{conn};
  if (ec || !conn.end_request()) return;
  tessera::samples::serve_http(conn, tls, idle, respond);
}

}  // namespace

int main(int argc, char** argv) {
  return tessera::samples::serve_main(
      argc, argv, "http_server: HTTP/1.1 keep-alive server on Tessera fibers", 8080, 10, serve,
      [](CLI::App& app) {
        app.add_option("--static", g_static_dir, "Directory served under /static/")
            ->check(CLI::ExistingDirectory);
        tessera::samples::add_http_options(app);
        static std::string cert, key, suites;
        app.add_option("--tls-cert", cert, "PEM certificate chain: serve HTTPS")
            ->check(CLI::ExistingFile);
        app.add_option("--tls-key", key, "PEM private key of --tls-cert")->check(CLI::ExistingFile);
        app.add_option("--tls-ciphersuites", suites,
                       "TLS 1.3 cipher suites, OpenSSL's syntax (default: OpenSSL's)");
        app.callback([] {
          if (cert.empty() != key.empty()) {
            throw CLI::ValidationError("--tls-cert and --tls-key", "go together");
          }
          if (!cert.empty()) {
            g_tls = tessera::tls::context::server(cert, key);
            g_tls->set_alpn({"http/1.1"});
            if (!suites.empty()) g_tls->set_ciphersuites(suites);
          }
        });
      });
}
