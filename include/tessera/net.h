// tessera/net.h — sockets over fiber-aware descriptors, modelled on Go's net
// package with the Networking TS / Asio names: tcp_listener (listen, accept)
// and tcp_stream (connect, read_some, write_some, read_exactly, write_all,
// shutdown, close); Unix-domain stream sockets (unix_listener, unix_connect:
// the same stream type); udp_socket (bind, send_to, receive_from).
//
// Contract: everything in tessera/io.h holds (fibers park, plain threads
// poll; one waiter per direction; deadlines never early; close() wakes
// waiters with io::error::closed; SIGPIPE never kills the process). Addresses
// are "host:port" strings: "127.0.0.1:8080", "[::1]:8080", "localhost:0",
// ":8080" (every address, IPv6 and IPv4). Names are resolved with
// getaddrinfo through io::blocking(), so a fiber resolving parks. Errors: the
// `std::error_code&` forms report; the others throw std::system_error whose
// what() names the operation and the endpoint ("tessera::net::connect to
// 127.0.0.1:1: Connection refused").
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>

#include "tessera/io.h"

namespace tessera::net {

/// A socket address (IPv4 or IPv6).
struct endpoint {
  sockaddr_storage storage{};
  socklen_t size = 0;
  /// "1.2.3.4:80" or "[::1]:80".
  std::string to_string() const;
  unsigned short port() const noexcept;
};

/// Resolves "host:port" (numeric or a name; empty host: the wildcard for
/// listening, loopback for connecting). Throws std::system_error on failure.
endpoint resolve(std::string_view host_port, bool passive = false);

struct listen_options {
  int backlog = 1024;         ///< listen(2)'s backlog
  bool reuse_address = true;  ///< SO_REUSEADDR
  bool reuse_port = false;    ///< SO_REUSEPORT: several listeners on one port
};

/// A connected TCP stream.
class [[nodiscard]] tcp_stream {
 public:
  tcp_stream() noexcept = default;
  explicit tcp_stream(io::descriptor d) noexcept : d_(std::move(d)) {}

  /// Connects to `host_port`, giving up after `timeout` (std::errc::timed_out).
  static tcp_stream connect(std::string_view host_port,
                            std::chrono::milliseconds timeout = std::chrono::seconds(30));
  static tcp_stream connect(const endpoint& to, std::error_code& ec,
                            io::clock::time_point deadline = io::clock::time_point::max());

  /// Reads what is there (at least 1 byte, or 0 at end of stream).
  std::size_t read_some(void* buf, std::size_t n, std::error_code& ec,
                        io::clock::time_point deadline = io::clock::time_point::max());
  std::size_t read_some(void* buf, std::size_t n);
  /// Writes at least 1 byte (a partial write under back-pressure).
  std::size_t write_some(const void* buf, std::size_t n, std::error_code& ec,
                         io::clock::time_point deadline = io::clock::time_point::max());
  std::size_t write_some(const void* buf, std::size_t n);
  /// Reads exactly n bytes; io::error::eof if the stream ends first (the
  /// bytes read so far are in buf; the count is returned).
  std::size_t read_exactly(void* buf, std::size_t n, std::error_code& ec,
                           io::clock::time_point deadline = io::clock::time_point::max());
  void read_exactly(void* buf, std::size_t n);
  /// Writes all n bytes (or fails; the count written so far is returned).
  std::size_t write_all(const void* buf, std::size_t n, std::error_code& ec,
                        io::clock::time_point deadline = io::clock::time_point::max());
  void write_all(const void* buf, std::size_t n);

  /// shutdown(2): SHUT_RD, SHUT_WR or SHUT_RDWR.
  std::error_code shutdown(int how) noexcept;
  /// Wakes waiters with io::error::closed (see io::descriptor::close).
  void close() noexcept { d_.close(); }
  std::error_code set_no_delay(bool on) noexcept;
  endpoint local_endpoint() const;
  endpoint remote_endpoint() const;
  io::descriptor& descriptor() noexcept { return d_; }

 private:
  io::descriptor d_;
};

/// A listening TCP socket.
class [[nodiscard]] tcp_listener {
 public:
  tcp_listener() noexcept = default;
  /// Binds and listens on `host_port` (":0" picks a free port; see
  /// local_endpoint()). Throws std::system_error naming the address.
  static tcp_listener listen(std::string_view host_port, listen_options opts = {});

  /// Waits for a connection (accept4, non-blocking, close-on-exec). Out of
  /// descriptors or kernel memory (EMFILE, ENFILE, ENOBUFS, ENOMEM), it does
  /// not fail but parks and retries — after 5 ms, doubling to 1 s, as Go's
  /// http.Server — so a server's other fibers run on and free descriptors;
  /// the deadline, close() and io::cancel_on_stop still end the wait. Errors
  /// in `ec`: io::error::closed, std::errc::timed_out, operation_canceled,
  /// or accept4's; the throwing form throws them as std::system_error.
  tcp_stream accept(std::error_code& ec,
                    io::clock::time_point deadline = io::clock::time_point::max());
  tcp_stream accept();
  endpoint local_endpoint() const;
  /// Wakes a blocked accept with io::error::closed.
  void close() noexcept { d_.close(); }
  io::descriptor& descriptor() noexcept { return d_; }

 private:
  io::descriptor d_;
  std::string name_;
};

/// A listening Unix-domain stream socket; accept() gives streams with every
/// tcp_stream operation (TCP_NODELAY aside).
class [[nodiscard]] unix_listener {
 public:
  unix_listener() noexcept = default;
  /// Binds `path` (a file it creates; an existing socket file is replaced)
  /// and listens. Throws std::system_error naming the path.
  static unix_listener listen(const std::string& path, int backlog = 1024);
  /// As tcp_listener::accept, backing off when out of descriptors.
  tcp_stream accept(std::error_code& ec,
                    io::clock::time_point deadline = io::clock::time_point::max());
  tcp_stream accept();
  void close() noexcept { d_.close(); }

 private:
  io::descriptor d_;
  std::string path_;
};

/// Connects to the Unix-domain stream socket at `path`.
tcp_stream unix_connect(const std::string& path, std::error_code& ec,
                        io::clock::time_point deadline = io::clock::time_point::max());
tcp_stream unix_connect(const std::string& path);

/// A UDP socket: datagrams, each sent and received whole.
class [[nodiscard]] udp_socket {
 public:
  udp_socket() noexcept = default;
  /// Binds "host:port" (":0" or "127.0.0.1:0": a free port). Throws
  /// std::system_error naming the address.
  static udp_socket bind(std::string_view host_port);
  /// Sends one datagram to `to`; returns its size.
  std::size_t send_to(const void* buf, std::size_t n, const endpoint& to, std::error_code& ec,
                      io::clock::time_point deadline = io::clock::time_point::max());
  /// Receives one datagram (truncated to n bytes) and who sent it.
  std::size_t receive_from(void* buf, std::size_t n, endpoint& from, std::error_code& ec,
                           io::clock::time_point deadline = io::clock::time_point::max());
  endpoint local_endpoint() const;
  void close() noexcept { d_.close(); }
  io::descriptor& descriptor() noexcept { return d_; }

 private:
  io::descriptor d_;
};

}  // namespace tessera::net
