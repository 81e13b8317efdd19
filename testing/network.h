// testing/network.h — the simulated network of one run (internal to the
// testing library; the contract is tessera/testing/simulation.h's).
//
// Every socket is one end of a Unix-domain socket pair whose other end the
// network keeps. For a TCP connection two fibers of the run ("pumps") carry
// the bytes between the two pairs, one per direction, each waiting out the
// seeded delay of every chunk it reads before writing it on: so a chunk's
// delay is virtual time, and the order of everything is the schedule's.
// A listener is a pair too: a byte per waiting connection makes the user's
// end readable, and a third fiber sees the user close it (end of stream on
// the network's end) and drops the connections that were never accepted.
// Datagrams go by a short-lived fiber each, which sleeps the delay and
// writes the datagram, prefixed with its sender's address, to the
// receiver's pair.
//
// A socket is known by its descriptor number and inode, so a number the
// user closed and the kernel gave out again is not taken for ours. All state
// is touched by the run's fibers only, which run on one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "simulated_network.h"
#include "tessera/event.h"
#include "tessera/testing/simulation.h"

namespace tessera::testing::detail {

class network final : public io::detail::simulated_network {
 public:
  network(const network_options& options, std::uint64_t seed);
  ~network() override;

  io::descriptor listen(const net::endpoint& at, net::endpoint& bound) override;
  io::descriptor accept(io::descriptor& listener, std::error_code& ec,
                        io::clock::time_point deadline) override;
  io::descriptor connect(const net::endpoint& to, std::error_code& ec,
                         io::clock::time_point deadline) override;
  io::descriptor bind_udp(const net::endpoint& at, net::endpoint& bound) override;
  std::size_t send_to(io::descriptor& d, const void* buf, std::size_t n, const net::endpoint& to,
                      std::error_code& ec, io::clock::time_point deadline) override;
  std::size_t receive_from(io::descriptor& d, void* buf, std::size_t n, net::endpoint& from,
                           std::error_code& ec, io::clock::time_point deadline) override;
  bool endpoints(int fd, net::endpoint* local, net::endpoint* remote) override;

  void partition(unsigned short a, unsigned short b);
  void heal();
  void reset(const net::tcp_stream& s);

 private:
  struct socket_id {
    int fd = -1;
    ino_t inode = 0;
    bool alive() const noexcept;
  };
  struct connection;
  struct pending {
    io::descriptor server_end;
    net::endpoint client;
    std::shared_ptr<connection> conn;
  };
  // A socket at a port: the user's end, ours, and its address.
  struct bound_socket {
    socket_id user;
    io::descriptor relay;
    net::endpoint address;
  };
  struct listener : bound_socket {
    std::deque<pending> backlog;
    bool open() const noexcept;
  };
  using udp_port = bound_socket;
  struct addresses {
    socket_id id;
    net::endpoint local, remote;
  };

  static socket_id id_of(int fd) noexcept;
  unsigned short take_port(unsigned short wanted, unsigned short& next, const char* what);
  /// A pair of `type` at `port`, entered in `table`; returns the user's end.
  template <class Entry>
  io::descriptor open_port(std::map<unsigned short, std::unique_ptr<Entry>>& table,
                           unsigned short port, int type, const char* what, net::endpoint& bound);
  bool port_in_use(unsigned short port) const;
  std::chrono::nanoseconds delay();
  bool chance(double p);
  bool cut(unsigned short a, unsigned short b) const;
  void pump(const std::shared_ptr<connection>& c, bool forward);
  void reset_connection(connection& c);
  void watch_listener(unsigned short port);

  network_options options_;
  std::uint64_t rng_;
  unsigned short next_listen_port_ = 10000, next_udp_port_ = 20000, next_client_port_ = 40000;
  std::map<unsigned short, std::unique_ptr<listener>> listeners_;
  std::map<unsigned short, std::unique_ptr<udp_port>> udp_;
  std::map<int, addresses> addresses_;  // by descriptor number, checked by inode
  std::vector<std::weak_ptr<connection>> connections_;
  std::set<std::pair<unsigned short, unsigned short>> cuts_;  // (low, high); 0: every port
  manual_reset_event healed_{true};
};

/// The network of the run the caller is in; std::logic_error if none.
network& current(const char* who);

}  // namespace tessera::testing::detail
