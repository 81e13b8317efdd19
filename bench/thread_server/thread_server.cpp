// thread_server — servers written without a runtime, for bench/netbench.sh
// to measure beside Tessera, nginx and Go:
//   http, echo   the baseline people start from: a std::thread per connection
//                on blocking sockets; the same HTTP answers as
//                samples/http_server (parsed with http-parser), or a TCP echo.
//   epoll-echo   the ceiling of the readiness model: one thread spinning on
//                one edge-triggered epoll, a recv until EAGAIN and a send per
//                message, nothing else. What any runtime built on epoll adds
//                shows as the distance to it. Its sends block (the sockets
//                stay blocking, reads use MSG_DONTWAIT): fine for a client
//                that reads its echoes, not a server for anyone else.
//
//   thread_server --mode http|echo|epoll-echo --port P
//
// Prints "listening on 127.0.0.1:PORT" once it accepts. Runs until killed.
#include <arpa/inet.h>
#include <http_parser.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

bool write_all(int fd, const char* p, std::size_t n) {
  while (n != 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

void serve_echo(int fd) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0 || !write_all(fd, buf, static_cast<std::size_t>(n))) break;
  }
}

struct http_conn {
  std::string url, out;
  bool close = false;
};

void serve_http(int fd) {
  http_parser_settings settings{};
  settings.on_message_begin = [](http_parser* p) {
    static_cast<http_conn*>(p->data)->url.clear();
    return 0;
  };
  settings.on_url = [](http_parser* p, const char* at, std::size_t n) {
    static_cast<http_conn*>(p->data)->url.append(at, n);
    return 0;
  };
  settings.on_message_complete = [](http_parser* p) {
    auto* c = static_cast<http_conn*>(p->data);
    const bool keep = http_should_keep_alive(p) != 0;
    const bool ok = c->url == "/";
    const char* body = ok ? "Hello, World!" : "Not Found";
    c->out += ok ? "HTTP/1.1 200 OK\r\n" : "HTTP/1.1 404 Not Found\r\n";
    c->out += "Content-Type: text/plain\r\nContent-Length: " + std::to_string(std::strlen(body));
    c->out += keep ? "\r\n\r\n" : "\r\nConnection: close\r\n\r\n";
    c->out += body;
    if (!keep) c->close = true;
    return c->close ? 1 : 0;
  };
  http_conn c;
  http_parser parser;
  http_parser_init(&parser, HTTP_REQUEST);
  parser.data = &c;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    http_parser_execute(&parser, &settings, buf, static_cast<std::size_t>(n));
    const bool bad = HTTP_PARSER_ERRNO(&parser) != HPE_OK && !c.close;
    if (bad) c.out += "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    if (!c.out.empty() && !write_all(fd, c.out.data(), c.out.size())) break;
    c.out.clear();
    if (bad || c.close) break;
  }
}

// Runs until killed. Connections are closed on EOF or error; a closed
// descriptor leaves the epoll set by itself.
void serve_epoll_echo(int lfd) {
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = lfd;
  if (ep < 0 || ::epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) != 0) {
    std::perror("thread_server: epoll");
    std::exit(1);
  }
  const int one = 1;
  epoll_event events[256];
  char buf[65536];
  for (;;) {
    const int n = ::epoll_wait(ep, events, 256, 0);  // spins: never pays a wake-up
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == lfd) {
        for (int c; (c = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) {
          ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          epoll_event cev{};
          cev.events = EPOLLIN | EPOLLET;
          cev.data.fd = c;
          if (::epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev) != 0) ::close(c);
        }
        continue;
      }
      for (;;) {
        const ssize_t r = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (r > 0 && write_all(fd, buf, static_cast<std::size_t>(r))) continue;
        if (r != 0 && errno == EAGAIN) break;
        ::close(fd);
        break;
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"thread_server: servers without a runtime: a std::thread per connection on "
               "blocking sockets (a baseline), or one thread spinning on one epoll (a ceiling)"};
  std::string mode = "http";
  unsigned short port = 8084;
  app.add_option("--mode", mode, "http, echo, or epoll-echo (one thread, one epoll)")
      ->check(CLI::IsMember({"http", "echo", "epoll-echo"}));
  app.add_option("-p,--port", port, "Port on 127.0.0.1 (0: any free one)");
  CLI11_PARSE(app, argc, argv);
  ::signal(SIGPIPE, SIG_IGN);

  const int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(lfd, 4096) != 0) {
    std::perror("thread_server: bind/listen");
    return 1;
  }
  socklen_t len = sizeof addr;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::printf("listening on 127.0.0.1:%u\n", ntohs(addr.sin_port));
  std::fflush(stdout);
  if (mode == "epoll-echo") {
    ::fcntl(lfd, F_SETFL, O_NONBLOCK);
    serve_epoll_echo(lfd);
  }
  for (;;) {
    const int fd = ::accept(lfd, nullptr, nullptr);
    if (fd < 0) continue;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::thread([fd, http = mode == "http"] {
      if (http) {
        serve_http(fd);
      } else {
        serve_echo(fd);
      }
      ::close(fd);
    }).detach();
  }
}
