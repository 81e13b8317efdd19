// TCP over fiber-aware descriptors (tessera/net.h).
#include "tessera/net.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "scheduler.h"
#include "simulated_network.h"

namespace tessera::net {
namespace {

[[noreturn]] void fail(const std::string& what, std::error_code ec) {
  throw std::system_error(ec, "tessera::net::" + what);
}

std::error_code last_error() {
  return {errno, std::system_category()};
}

using io::detail::current_network;

// getsockname / getpeername of a descriptor, as an endpoint.
endpoint endpoint_of(const io::descriptor& d, int (*get)(int, sockaddr*, socklen_t*)) {
  endpoint e;
  if (auto* net = current_network()) {
    if (net->endpoints(d.native_handle(), get == ::getsockname ? &e : nullptr,
                       get == ::getsockname ? nullptr : &e)) {
      return e;
    }
  }
  e.size = sizeof e.storage;
  get(d.native_handle(), reinterpret_cast<sockaddr*>(&e.storage), &e.size);
  return e;
}

// Completes a non-blocking connect(2) of `fd` (owned by `d`) to `to`.
std::error_code connect_on(io::descriptor& d, const sockaddr* to, socklen_t size,
                           io::clock::time_point deadline) {
  const int fd = d.native_handle();
  if (::connect(fd, to, size) == 0) return {};
  if (errno != EINPROGRESS && errno != EAGAIN) return last_error();
  if (std::error_code ec = d.wait_writable(deadline)) return ec;
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  return err != 0 ? std::error_code(err, std::system_category()) : std::error_code{};
}

// Out of descriptors or kernel memory: the listener can do nothing until a
// connection closes somewhere, so accept backs off instead of failing.
bool out_of_resources(std::error_code ec) noexcept {
  // By address: libstdc++'s category classes are hidden, and UBSan's vptr
  // check rejects a member call (operator!=) on them.
  if (&ec.category() != &std::system_category()) return false;
  const int e = ec.value();
  return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
}

constexpr auto kAcceptBackoffFirst = std::chrono::milliseconds(5);
constexpr auto kAcceptBackoffMax = std::chrono::seconds(1);

// accept4 on a listening descriptor, parking until a connection comes.
// When the process (or system) is out of descriptors, it backs off as Go's
// http.Server does — 5 ms, doubling to 1 s — parked, so the fibers serving
// the connections already open run on and, closing theirs, make room. The
// pause is a wait for the listener to turn writable, which a listening
// socket never does: close() and interrupt() end it as they end any wait.
tcp_stream accept_on(io::descriptor& d, std::error_code& ec, io::clock::time_point deadline) {
  auto backoff = std::chrono::duration_cast<io::clock::duration>(kAcceptBackoffFirst);
  for (;;) {
    const int fd = d.accept(ec, deadline);
    if (fd >= 0) return tcp_stream(io::descriptor(fd));
    if (!out_of_resources(ec)) return {};
    const auto now = io::clock::now();
    if (deadline <= now) return {};  // ec says what stopped us
    const bool capped = deadline - now <= backoff;
    const std::error_code waited = d.wait_writable(capped ? deadline : now + backoff);
    // (Compared by category address and value, as out_of_resources does.)
    const bool timed_out =
        &waited.category() == &std::generic_category() && waited.value() == ETIMEDOUT;
    if (waited && !timed_out) {
      ec = waited;  // closed, or interrupted
      return {};
    }
    if (capped) {
      ec = std::make_error_code(std::errc::timed_out);
      return {};
    }
    backoff = std::min<io::clock::duration>(backoff * 2, kAcceptBackoffMax);
  }
}

// "host:port", "[v6]:port", ":port".
void split(std::string_view hp, std::string& host, std::string& port) {
  const auto colon = hp.rfind(':');
  if (colon == std::string_view::npos) {
    throw std::system_error(
        std::make_error_code(std::errc::invalid_argument),
        "tessera::net: address '" + std::string(hp) + "' has no port (want host:port)");
  }
  std::string_view h = hp.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  host.assign(h);
  port.assign(hp.substr(colon + 1));
}

}  // namespace

std::string endpoint::to_string() const {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (storage.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&storage);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    std::string out = buf;
    out += ':';
    out += std::to_string(ntohs(a->sin_port));
    return out;
  }
  const auto* a = reinterpret_cast<const sockaddr_in6*>(&storage);
  inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
  std::string out = "[";
  out += buf;
  out += "]:";
  out += std::to_string(ntohs(a->sin6_port));
  return out;
}

unsigned short endpoint::port() const noexcept {
  if (storage.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
}

endpoint resolve(std::string_view host_port, bool passive) {
  std::string host, port;
  split(host_port, host, port);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_UNSPEC;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  if (passive && host.empty()) hints.ai_family = AF_INET6;  // dual-stack wildcard
  addrinfo* res = nullptr;
  const int rc = io::blocking([&] {
    return getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res);
  });
  if (rc != 0) {
    throw std::system_error(
        std::make_error_code(std::errc::invalid_argument),
        "tessera::net::resolve '" + std::string(host_port) + "': " + gai_strerror(rc));
  }
  endpoint e;
  std::memcpy(&e.storage, res->ai_addr, res->ai_addrlen);
  e.size = res->ai_addrlen;
  freeaddrinfo(res);
  return e;
}

// ---- tcp_stream ---------------------------------------------------------------------
tcp_stream tcp_stream::connect(const endpoint& to, std::error_code& ec,
                               io::clock::time_point deadline) {
  ec.clear();
  if (auto* net = current_network()) return tcp_stream(net->connect(to, ec, deadline));
  const int fd =
      ::socket(to.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
  if (fd < 0) {
    ec = last_error();
    return {};
  }
  io::descriptor d(fd);
  if ((ec = connect_on(d, reinterpret_cast<const sockaddr*>(&to.storage), to.size, deadline))) {
    return {};
  }
  return tcp_stream(std::move(d));
}

tcp_stream tcp_stream::connect(std::string_view host_port, std::chrono::milliseconds timeout) {
  const endpoint to = resolve(host_port);
  std::error_code ec;
  tcp_stream s = connect(to, ec, io::clock::now() + timeout);
  if (ec) fail("connect to " + to.to_string(), ec);
  return s;
}

std::size_t tcp_stream::read_some(void* buf, std::size_t n, std::error_code& ec,
                                  io::clock::time_point deadline) {
  return d_.recv_stream(buf, n, ec, deadline);
}
std::size_t tcp_stream::write_some(const void* buf, std::size_t n, std::error_code& ec,
                                   io::clock::time_point deadline) {
  return d_.send(buf, n, 0, ec, deadline);
}

std::size_t tcp_stream::read_exactly(void* buf, std::size_t n, std::error_code& ec,
                                     io::clock::time_point deadline) {
  std::size_t done = 0;
  ec.clear();
  while (done < n) {
    const std::size_t r = read_some(static_cast<char*>(buf) + done, n - done, ec, deadline);
    if (ec) return done;
    if (r == 0) {
      ec = io::error::eof;
      return done;
    }
    done += r;
  }
  return done;
}

std::size_t tcp_stream::write_all(const void* buf, std::size_t n, std::error_code& ec,
                                  io::clock::time_point deadline) {
  std::size_t done = 0;
  ec.clear();
  while (done < n) {
    done += write_some(static_cast<const char*>(buf) + done, n - done, ec, deadline);
    if (ec) return done;
  }
  return done;
}

std::size_t tcp_stream::read_some(void* buf, std::size_t n) {
  std::error_code ec;
  const std::size_t r = read_some(buf, n, ec);
  if (ec) fail("tcp_stream::read_some from " + remote_endpoint().to_string(), ec);
  return r;
}
std::size_t tcp_stream::write_some(const void* buf, std::size_t n) {
  std::error_code ec;
  const std::size_t r = write_some(buf, n, ec);
  if (ec) fail("tcp_stream::write_some to " + remote_endpoint().to_string(), ec);
  return r;
}
void tcp_stream::read_exactly(void* buf, std::size_t n) {
  std::error_code ec;
  read_exactly(buf, n, ec);
  if (ec) fail("tcp_stream::read_exactly from " + remote_endpoint().to_string(), ec);
}
void tcp_stream::write_all(const void* buf, std::size_t n) {
  std::error_code ec;
  write_all(buf, n, ec);
  if (ec) fail("tcp_stream::write_all to " + remote_endpoint().to_string(), ec);
}

std::error_code tcp_stream::shutdown(int how) noexcept {
  return ::shutdown(d_.native_handle(), how) == 0 ? std::error_code{} : last_error();
}

std::error_code tcp_stream::set_no_delay(bool on) noexcept {
  if (current_network() != nullptr) return {};  // a simulated stream never batches
  const int v = on ? 1 : 0;
  return ::setsockopt(d_.native_handle(), IPPROTO_TCP, TCP_NODELAY, &v, sizeof v) == 0
             ? std::error_code{}
             : last_error();
}

endpoint tcp_stream::local_endpoint() const {
  return endpoint_of(d_, ::getsockname);
}
endpoint tcp_stream::remote_endpoint() const {
  return endpoint_of(d_, ::getpeername);
}

// ---- tcp_listener ---------------------------------------------------------------------
tcp_listener tcp_listener::listen(std::string_view host_port, listen_options opts) {
  const endpoint at = resolve(host_port, true);
  if (auto* net = current_network()) {
    tcp_listener l;
    endpoint bound;
    l.d_ = net->listen(at, bound);
    l.name_ = bound.to_string();
    return l;
  }
  const std::string name = at.to_string();
  const int fd =
      ::socket(at.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
  if (fd < 0) fail("listen on " + name + ": socket", last_error());
  tcp_listener l;
  l.d_ = io::descriptor(fd);
  l.name_ = name;
  const int one = 1, zero = 0;
  if (opts.reuse_address) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (opts.reuse_port && ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
    fail("listen on " + name + ": SO_REUSEPORT", last_error());
  }
  if (at.storage.ss_family == AF_INET6) {
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);  // accept IPv4 too
  }
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&at.storage), at.size) != 0) {
    fail("listen on " + name + ": bind", last_error());
  }
  if (::listen(fd, opts.backlog) != 0) fail("listen on " + name, last_error());
  return l;
}

tcp_stream tcp_listener::accept(std::error_code& ec, io::clock::time_point deadline) {
  if (auto* net = current_network()) {
    ec.clear();
    return tcp_stream(net->accept(d_, ec, deadline));
  }
  return accept_on(d_, ec, deadline);
}

tcp_stream tcp_listener::accept() {
  std::error_code ec;
  tcp_stream s = accept(ec);
  if (ec) fail("tcp_listener::accept on " + name_, ec);
  return s;
}

endpoint tcp_listener::local_endpoint() const {
  return endpoint_of(d_, ::getsockname);
}

// ---- Unix-domain streams ------------------------------------------------------------
namespace {
sockaddr_un unix_address(const std::string& path, const char* op) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof a.sun_path) {
    throw std::system_error(std::make_error_code(std::errc::filename_too_long),
                            std::string("tessera::net::") + op + ": path '" + path +
                                "' is empty or longer than " +
                                std::to_string(sizeof a.sun_path - 1) + " bytes");
  }
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}
}  // namespace

unix_listener unix_listener::listen(const std::string& path, int backlog) {
  const sockaddr_un a = unix_address(path, "unix_listener::listen");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("unix_listener::listen on " + path + ": socket", last_error());
  unix_listener l;
  l.d_ = io::descriptor(fd);
  l.path_ = path;
  ::unlink(path.c_str());  // a stale socket file from an earlier run
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    fail("unix_listener::listen on " + path + ": bind", last_error());
  }
  if (::listen(fd, backlog) != 0) fail("unix_listener::listen on " + path, last_error());
  return l;
}

tcp_stream unix_listener::accept(std::error_code& ec, io::clock::time_point deadline) {
  return accept_on(d_, ec, deadline);
}

tcp_stream unix_listener::accept() {
  std::error_code ec;
  tcp_stream s = accept(ec);
  if (ec) fail("unix_listener::accept on " + path_, ec);
  return s;
}

tcp_stream unix_connect(const std::string& path, std::error_code& ec,
                        io::clock::time_point deadline) {
  ec.clear();
  const sockaddr_un a = unix_address(path, "unix_connect");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ec = last_error();
    return {};
  }
  io::descriptor d(fd);
  if ((ec = connect_on(d, reinterpret_cast<const sockaddr*>(&a), sizeof a, deadline))) return {};
  return tcp_stream(std::move(d));
}

tcp_stream unix_connect(const std::string& path) {
  std::error_code ec;
  tcp_stream s = unix_connect(path, ec);
  if (ec) fail("unix_connect to " + path, ec);
  return s;
}

// ---- UDP ----------------------------------------------------------------------------
udp_socket udp_socket::bind(std::string_view host_port) {
  endpoint at = resolve(host_port, true);
  if (auto* net = current_network()) {
    udp_socket u;
    endpoint bound;
    u.d_ = net->bind_udp(at, bound);
    return u;
  }
  const std::string name = at.to_string();
  const int fd = ::socket(at.storage.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("udp_socket::bind on " + name + ": socket", last_error());
  udp_socket u;
  u.d_ = io::descriptor(fd);
  if (at.storage.ss_family == AF_INET6) {
    const int zero = 0;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  }
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&at.storage), at.size) != 0) {
    fail("udp_socket::bind on " + name, last_error());
  }
  return u;
}

std::size_t udp_socket::send_to(const void* buf, std::size_t n, const endpoint& to,
                                std::error_code& ec, io::clock::time_point deadline) {
  ec.clear();
  if (auto* net = current_network()) return net->send_to(d_, buf, n, to, ec, deadline);
  const int fd = d_.native_handle();
  const ssize_t r = d_.call(
      true,
      [&] {
        return ::sendto(fd, buf, n, MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&to.storage),
                        to.size);
      },
      ec, deadline);
  return r < 0 ? 0 : static_cast<std::size_t>(r);
}

std::size_t udp_socket::receive_from(void* buf, std::size_t n, endpoint& from, std::error_code& ec,
                                     io::clock::time_point deadline) {
  ec.clear();
  if (auto* net = current_network()) return net->receive_from(d_, buf, n, from, ec, deadline);
  const int fd = d_.native_handle();
  const ssize_t r = d_.call(
      false,
      [&] {
        from.size = sizeof from.storage;
        return ::recvfrom(fd, buf, n, 0, reinterpret_cast<sockaddr*>(&from.storage), &from.size);
      },
      ec, deadline);
  return r < 0 ? 0 : static_cast<std::size_t>(r);
}

endpoint udp_socket::local_endpoint() const {
  return endpoint_of(d_, ::getsockname);
}

}  // namespace tessera::net
