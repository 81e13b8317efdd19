// samples/http_serve.h — what the HTTP samples share: an HTTP/1.1 connection
// loop on http-parser (Debian libhttp-parser-dev) over any stream with
// tcp_stream's calls (tcp_stream, tls::tls_stream).
//
// Keep-alive and pipelined requests (answered in order, written together);
// "Connection: close" honoured; malformed input answered with 400 and the
// connection closed — a request with both Content-Length and
// Transfer-Encoding, or two Content-Lengths, among it (no request smuggling).
// A request line and headers over limits.max_header_bytes get 431, a body
// over limits.max_body_bytes 413, and the connection is closed after draining
// what the client still sends. A request must arrive whole within `idle` of
// its first byte, and a quiet keep-alive connection is closed after `idle`.
#pragma once

#include <http_parser.h>
#include <tessera/net.h>

#include <chrono>
#include <ctime>
#include <functional>
#include <string>
#include <string_view>

#include "serve_main.h"

namespace tessera::samples {

struct http_limits {
  std::size_t max_header_bytes = 32 * 1024;  ///< nginx's default
  std::size_t max_body_bytes = 1024 * 1024;
};
inline http_limits g_http_limits;  // set from the command line (add_http_options)

inline void add_http_options(CLI::App& app) {
  app.add_option("--max-header-bytes", g_http_limits.max_header_bytes,
                 "Request line and headers larger than this get 431")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-body-bytes", g_http_limits.max_body_bytes,
                 "Bodies larger than this get 413")
      ->capture_default_str();
}

/// One request as the handler sees it.
struct http_request {
  std::string_view url;  ///< path and query, as sent
  bool keep_alive;       ///< false: the response must say "Connection: close"
};

/// "Date: …\r\n" (RFC 9110's IMF-fixdate) for this second, cached per thread.
inline const std::string& date_header() {
  thread_local std::time_t cached = 0;
  thread_local std::string header;
  const std::time_t now = std::time(nullptr);
  if (now != cached) {
    cached = now;
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[64];
    const std::size_t n =
        std::strftime(buf, sizeof buf, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
    header.assign(buf, n);
  }
  return header;
}

/// Appends a whole response to `out`: status line, Server and Date (as
/// nginx sends them), the headers given, a Content-Length and, when
/// !keep_alive, "Connection: close".
inline void append_response(std::string& out, std::string_view status, std::string_view headers,
                            std::string_view body, bool keep_alive) {
  out += "HTTP/1.1 ";
  out += status;
  out += "\r\nServer: tessera\r\n";
  out += date_header();
  out += headers;
  out += "Content-Length: ";
  out += std::to_string(body.size());
  out += keep_alive ? "\r\n\r\n" : "\r\nConnection: close\r\n\r\n";
  out += body;
}

namespace detail {

struct http_connection {
  std::string url;
  std::string out;  // responses to write, in request order (pipelining)
  bool close = false;
  bool in_request = false;
  std::size_t header_bytes = 0;  // request line and headers so far
  std::size_t body_bytes = 0;
  int refuse = 0;  // 431 or 413: the status the parser was stopped with
  const std::function<void(const http_request&, std::string&)>* handle = nullptr;
};

// A callback's verdict on a request over a limit: stop parsing, answer
// `status`. (-1: on_headers_complete takes 1 to mean "no body", not an error.)
inline int refuse(http_parser* p, int status) {
  static_cast<http_connection*>(p->data)->refuse = status;
  return -1;
}

inline int count_header_bytes(http_parser* p, std::size_t n) {
  auto* c = static_cast<http_connection*>(p->data);
  c->header_bytes += n;
  return c->header_bytes > g_http_limits.max_header_bytes ? refuse(p, 431) : 0;
}

inline const http_parser_settings& http_settings() {
  static const http_parser_settings s = [] {
    http_parser_settings v{};
    v.on_message_begin = [](http_parser* p) {
      auto* c = static_cast<http_connection*>(p->data);
      c->url.clear();
      c->in_request = true;
      c->header_bytes = 0;
      c->body_bytes = 0;
      return 0;
    };
    v.on_url = [](http_parser* p, const char* at, std::size_t n) {
      static_cast<http_connection*>(p->data)->url.append(at, n);
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
      return declared && p->content_length > g_http_limits.max_body_bytes ? refuse(p, 413) : 0;
    };
    v.on_body = [](http_parser* p, const char*, std::size_t n) {  // chunked bodies too
      auto* c = static_cast<http_connection*>(p->data);
      c->body_bytes += n;
      return c->body_bytes > g_http_limits.max_body_bytes ? refuse(p, 413) : 0;
    };
    v.on_message_complete = [](http_parser* p) {
      auto* c = static_cast<http_connection*>(p->data);
      c->in_request = false;
      const bool keep =
          http_should_keep_alive(p) != 0 && !g_stopping.load(std::memory_order_relaxed);
      (*c->handle)(http_request{c->url, keep}, c->out);
      if (!keep) c->close = true;
      return c->close ? 1 : 0;  // stop parsing after a request that closes
    };
    return v;
  }();
  return s;
}

// The end of our side of a stream: FIN for TCP, close_notify for TLS.
inline void end_stream(tessera::net::tcp_stream& s) {
  (void)s.shutdown(SHUT_WR);
}
template <class Stream>
void end_stream(Stream& s) {
  (void)s.shutdown(tessera::io::clock::now() + std::chrono::seconds(1));
}

}  // namespace detail

/// Serves HTTP/1.1 on `s` (the stream of `conn`, or a TLS stream over it)
/// until the client goes, a deadline passes or the server stops. `handle(req,
/// out)` appends the response to each request to `out` (append_response).
template <class Stream>
void serve_http(connection& conn, Stream& s, std::chrono::seconds idle,
                const std::function<void(const http_request&, std::string&)>& handle) {
  detail::http_connection c;
  c.handle = &handle;
  http_parser parser;
  http_parser_init(&parser, HTTP_REQUEST);
  parser.data = &c;
  char buf[4096];  // an idle connection costs its fiber's touched stack: keep it small
  auto request_deadline = idle_deadline(idle);
  for (;;) {
    std::error_code ec;
    // A request in progress has until its deadline; a quiet connection `idle`.
    const auto deadline = c.in_request ? request_deadline : idle_deadline(idle);
    const std::size_t n = s.read_some(buf, sizeof buf, ec, deadline);
    if (ec || n == 0) return;  // timed out, reset, closed, stopped, or end of stream
    if (!c.in_request) {
      request_deadline = idle_deadline(idle);
      if (!conn.begin_request()) return;  // the server stopped while we were idle
    }
    http_parser_execute(&parser, &detail::http_settings(), buf, n);
    const bool bad = HTTP_PARSER_ERRNO(&parser) != HPE_OK && !c.close;
    if (c.refuse == 431) {
      append_response(c.out, "431 Request Header Fields Too Large", "Content-Type: text/plain\r\n",
                      "Request Header Fields Too Large", false);
    } else if (c.refuse == 413) {
      append_response(c.out, "413 Content Too Large", "Content-Type: text/plain\r\n",
                      "Content Too Large", false);
    } else if (bad) {
      append_response(c.out, "400 Bad Request", "Content-Type: text/plain\r\n", "Bad Request",
                      false);
    }
    if (!c.out.empty()) {
      s.write_all(c.out.data(), c.out.size(), ec, idle_deadline(idle));
      c.out.clear();
      if (ec) return;
    }
    if (bad || c.close) {
      detail::end_stream(s);
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
    // Between requests: idle again (a stop now closes us, and the handler
    // already answered with "Connection: close" if it came before).
    if (!c.in_request && !conn.end_request()) return;
  }
}

}  // namespace tessera::samples
