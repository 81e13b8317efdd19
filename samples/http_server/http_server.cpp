// http_server — an HTTP/1.1 keep-alive server on Tessera: a fiber per
// connection, requests parsed with http-parser (Debian's libhttp-parser-dev).
//
//   http_server --port 8080 --workers 1 [--idle-timeout 10]
//
// Routes: "/" answers "Hello, World!"; "/static/NAME" the file NAME of the
// --static directory (read through tessera::io::blocking, so a slow disk parks
// only the fiber; names with '/' or a leading '.' are refused with 404);
// anything else 404. Keep-alive and
// pipelined requests (answered in order), "Connection: close" honoured,
// malformed input answered with 400 and the connection closed — a request with
// both Content-Length and Transfer-Encoding, or two Content-Lengths, among it
// (no request smuggling). Request line and headers over --max-header-bytes
// (32 KiB, nginx's default) get 431, a body over --max-body-bytes (1 MiB) 413,
// and the connection is closed (after draining what the client still sends).
// A request must arrive whole within --idle-timeout seconds of its first byte,
// and a quiet keep-alive connection is closed after it: a slow client costs
// nothing but a parked fiber. --idle-timeout 0 turns the deadlines off. Prints
// "listening on HOST:PORT" once it accepts. SIGINT or SIGTERM stop it
// gracefully: the listener and the idle connections close at once, requests
// in flight are answered (with "Connection: close") and then closed.
#include <http_parser.h>
#include <tessera/net.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "../serve_main.h"

namespace {

constexpr std::string_view kHello = "Hello, World!";
std::string g_static_dir;  // --static: the directory behind /static/
std::size_t g_max_header_bytes = 32 * 1024;  // --max-header-bytes
std::size_t g_max_body_bytes = 1024 * 1024;  // --max-body-bytes

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

struct connection {
  std::string url;
  std::string out;  // responses to write, in request order (pipelining)
  bool close = false;
  bool in_request = false;
  std::size_t header_bytes = 0;  // request line and headers so far
  std::size_t body_bytes = 0;
  int refuse = 0;  // 431 or 413: the status the parser was stopped with
};

// A callback's verdict on a request over a limit: stop parsing, answer
// `status`. (-1: on_headers_complete takes 1 to mean "no body", not an error.)
int refuse(http_parser* p, int status) {
  static_cast<connection*>(p->data)->refuse = status;
  return -1;
}

int count_header_bytes(http_parser* p, std::size_t n) {
  auto* c = static_cast<connection*>(p->data);
  c->header_bytes += n;
  return c->header_bytes > g_max_header_bytes ? refuse(p, 431) : 0;
}

void respond(connection& c, http_parser* p) {
  const bool keep = http_should_keep_alive(p) != 0 &&
                    !tessera::samples::g_stopping.load(std::memory_order_relaxed);
  std::optional<std::string> file;
  if (c.url != "/") file = static_file(c.url);
  const bool ok = c.url == "/" || file.has_value();
  const std::string_view body =
      file ? std::string_view(*file) : ok ? kHello : std::string_view("Not Found");
  c.out += ok ? "HTTP/1.1 200 OK\r\n" : "HTTP/1.1 404 Not Found\r\n";
  c.out += file ? "Content-Type: application/octet-stream\r\nContent-Length: "
                : "Content-Type: text/plain\r\nContent-Length: ";
  c.out += std::to_string(body.size());
  c.out += keep ? "\r\n\r\n" : "\r\nConnection: close\r\n\r\n";
  c.out += body;
  if (!keep) c.close = true;
}

const http_parser_settings& settings() {
  static const http_parser_settings s = [] {
    http_parser_settings v{};
    v.on_message_begin = [](http_parser* p) {
      auto* c = static_cast<connection*>(p->data);
      c->url.clear();
      c->in_request = true;
      c->header_bytes = 0;
      c->body_bytes = 0;
      return 0;
    };
    v.on_url = [](http_parser* p, const char* at, std::size_t n) {
      static_cast<connection*>(p->data)->url.append(at, n);
      return count_header_bytes(p, n);
    };
    v.on_header_field = [](http_parser* p, const char*, std::size_t n) {
      return count_header_bytes(p, n);
    };
    v.on_header_value = [](http_parser* p, const char*, std::size_t n) {
      return count_header_bytes(p, n);
    };
    v.on_headers_complete = [](http_parser* p) {
      // A declared length over the limit is refused before its body arrives.
      const bool declared = (p->flags & F_CONTENTLENGTH) != 0;
      return declared && p->content_length > g_max_body_bytes ? refuse(p, 413) : 0;
    };
    v.on_body = [](http_parser* p, const char*, std::size_t n) {  // chunked bodies too
      auto* c = static_cast<connection*>(p->data);
      c->body_bytes += n;
      return c->body_bytes > g_max_body_bytes ? refuse(p, 413) : 0;
    };
    v.on_message_complete = [](http_parser* p) {
      auto* c = static_cast<connection*>(p->data);
      c->in_request = false;
      respond(*c, p);
      return c->close ? 1 : 0;  // stop parsing after a request that closes
    };
    return v;
  }();
  return s;
}

void serve(tessera::samples::connection& conn, std::chrono::seconds idle) {
  tessera::net::tcp_stream& s = conn.stream;
  (void)s.set_no_delay(true);
  connection c;
  http_parser parser;
  http_parser_init(&parser, HTTP_REQUEST);
  parser.data = &c;
  char buf[4096];  // an idle connection costs its fiber's touched stack: keep it small
  auto request_deadline = tessera::samples::idle_deadline(idle);
  for (;;) {
    std::error_code ec;
    // A request in progress has until its deadline; a quiet connection `idle`.
    const auto deadline = c.in_request ? request_deadline : tessera::samples::idle_deadline(idle);
    const std::size_t n = s.read_some(buf, sizeof buf, ec, deadline);
    if (ec || n == 0) return;  // timed out, reset, closed, stopped, or end of stream
    if (!c.in_request) {
      request_deadline = tessera::samples::idle_deadline(idle);
      if (!conn.begin_request()) return;  // the server stopped while we were idle
    }
    http_parser_execute(&parser, &settings(), buf, n);
    const bool bad = HTTP_PARSER_ERRNO(&parser) != HPE_OK && !c.close;
    if (c.refuse == 431) {
      c.out +=
          "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain\r\n"
          "Content-Length: 31\r\nConnection: close\r\n\r\nRequest Header Fields Too Large";
    } else if (c.refuse == 413) {
      c.out +=
          "HTTP/1.1 413 Content Too Large\r\nContent-Type: text/plain\r\nContent-Length: 17\r\n"
          "Connection: close\r\n\r\nContent Too Large";
    } else if (bad) {
      c.out +=
          "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n"
          "Connection: close\r\n\r\nBad Request";
    }
    if (!c.out.empty()) {
      s.write_all(c.out.data(), c.out.size(), ec, tessera::samples::idle_deadline(idle));
      c.out.clear();
      if (ec) return;
    }
    if (bad || c.close) {
      (void)s.shutdown(SHUT_WR);
      // A refused request may still be arriving. Closing with unread input
      // makes the kernel send a reset, which can reach the client before it
      // has read our answer; so read on, and drop, what it sends until it
      // closes too — at most 1 MiB or 2 s (nginx's lingering close).
      if (bad) {
        const auto linger = tessera::io::clock::now() + std::chrono::seconds(2);
        for (std::size_t drained = 0; drained < (std::size_t{1} << 20);) {
          const std::size_t got = s.read_some(buf, sizeof buf, ec, linger);
          if (ec || got == 0) break;
          drained += got;
        }
      }
      return;
    }
    // Between requests: idle again (a stop now closes us, and respond()
    // already answered with "Connection: close" if it came before).
    if (!c.in_request && !conn.end_request()) return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  return tessera::samples::serve_main(
      argc, argv, "http_server: HTTP/1.1 keep-alive server on Tessera fibers", 8080, 10, serve,
      [](CLI::App& app) {
        app.add_option("--static", g_static_dir, "Directory served under /static/")
            ->check(CLI::ExistingDirectory);
        app.add_option("--max-header-bytes", g_max_header_bytes,
                       "Request line and headers larger than this get 431")
            ->capture_default_str()
            ->check(CLI::PositiveNumber);
        app.add_option("--max-body-bytes", g_max_body_bytes, "Bodies larger than this get 413")
            ->capture_default_str();
      });
}
