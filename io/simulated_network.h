// io/simulated_network.h — the seam through which tessera::net's sockets
// reach a simulation's network (internal: io/ and testing/ only).
//
// Inside a simulated runtime whose control carries a network, tcp_listener,
// tcp_stream and udp_socket keep their API and their io::descriptor, but the
// calls that name addresses (listen, accept, connect, bind, send_to,
// receive_from, the endpoints) go to the network instead of the kernel's IP
// stack. Each stream is one end of a Unix-domain socket pair, so reads,
// writes, readiness, deadlines and close() run the descriptor's usual code;
// the network carries bytes between the two connections' pairs.
#pragma once

#include <cstddef>
#include <system_error>

#include "tessera/io.h"
#include "tessera/net.h"

namespace tessera::io::detail {

class simulated_network {
 public:
  virtual ~simulated_network() = default;
  /// A listener at `at` (port 0: the network picks one); its descriptor is
  /// readable while a connection waits. `bound` gets the address. Throws
  /// std::system_error (address in use).
  virtual descriptor listen(const net::endpoint& at, net::endpoint& bound) = 0;
  /// The next connection to `listener` (made by listen), or an empty
  /// descriptor with `ec` set (closed, timed out, interrupted).
  virtual descriptor accept(descriptor& listener, std::error_code& ec,
                            clock::time_point deadline) = 0;
  /// A connection to `to`, or an empty descriptor with `ec` set
  /// (connection_refused, timed_out).
  virtual descriptor connect(const net::endpoint& to, std::error_code& ec,
                             clock::time_point deadline) = 0;
  /// A UDP socket at `at` (port 0: the network picks one).
  virtual descriptor bind_udp(const net::endpoint& at, net::endpoint& bound) = 0;
  virtual std::size_t send_to(descriptor& d, const void* buf, std::size_t n,
                              const net::endpoint& to, std::error_code& ec,
                              clock::time_point deadline) = 0;
  virtual std::size_t receive_from(descriptor& d, void* buf, std::size_t n, net::endpoint& from,
                                   std::error_code& ec, clock::time_point deadline) = 0;
  /// The addresses of a socket the network made (false: it made none with
  /// this descriptor number).
  virtual bool endpoints(int fd, net::endpoint* local, net::endpoint* remote) = 0;
};

/// The network of the simulation the caller runs in, or null (not in a
/// simulation, or one without a network).
simulated_network* current_network() noexcept;

}  // namespace tessera::io::detail
