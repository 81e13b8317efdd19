// testing/network.cpp — the simulated network (network.h says how it works).
#include "network.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "splitmix64.h"
#include "tessera/runtime.h"

namespace tessera::testing::detail {
namespace {

net::endpoint loopback(unsigned short port) {
  net::endpoint e;
  auto* a = reinterpret_cast<sockaddr_in*>(&e.storage);
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a->sin_port = htons(port);
  e.size = sizeof(sockaddr_in);
  return e;
}

// A socket pair, both ends non-blocking and close-on-exec; throws.
std::pair<int, int> socket_pair(int type, const char* what) {
  int fds[2];
  if (::socketpair(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) {
    throw std::system_error(errno, std::system_category(),
                            std::string("tessera::testing: simulated ") + what + ": socketpair");
  }
  return {fds[0], fds[1]};
}

// Runs `f` on a fiber of its own that nobody joins.
template <class F>
void start(F&& f) {
  fiber(std::forward<F>(f)).detach();
}

}  // namespace

struct network::connection {
  io::descriptor client_relay, server_relay;  // the network's ends of the two pairs
  socket_id client, server;                   // the users' ends
  unsigned short client_port = 0, server_port = 0;
  bool reset = false;
};

network::network(const network_options& options, std::uint64_t seed)
    : options_(options), rng_(seed ^ 0x6e657477'6f726b00ULL) {
  if (options.min_delay.count() < 0 || options.max_delay < options.min_delay) {
    throw std::invalid_argument(
        "tessera::testing: network delays must satisfy 0 <= min_delay <= max_delay");
  }
  if (!(options.drop >= 0 && options.drop <= 1) || !(options.reset >= 0 && options.reset <= 1)) {
    throw std::invalid_argument(
        "tessera::testing: network drop and reset are probabilities (0 to 1)");
  }
}

network::~network() = default;

bool network::socket_id::alive() const noexcept {
  struct stat st {};
  return fd >= 0 && ::fstat(fd, &st) == 0 && st.st_ino == inode;
}

network::socket_id network::id_of(int fd) noexcept {
  struct stat st {};
  ::fstat(fd, &st);
  return {fd, st.st_ino};
}

bool network::listener::open() const noexcept {
  // The user's close() shuts its end down at once (the number stays open
  // until its destructor): end of stream on ours.
  char byte;
  return user.alive() && ::recv(relay.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) != 0;
}

bool network::port_in_use(unsigned short port) const {
  if (auto it = listeners_.find(port); it != listeners_.end() && it->second->open()) return true;
  if (auto it = udp_.find(port); it != udp_.end() && it->second->user.alive()) return true;
  return false;
}

unsigned short network::take_port(unsigned short wanted, unsigned short& next, const char* what) {
  if (wanted != 0) {
    if (port_in_use(wanted)) {
      throw std::system_error(std::make_error_code(std::errc::address_in_use),
                              std::string("tessera::testing: simulated ") + what + " on port " +
                                  std::to_string(wanted));
    }
    return wanted;
  }
  while (port_in_use(next)) ++next;
  return next++;
}

std::chrono::nanoseconds network::delay() {
  const auto span = options_.max_delay - options_.min_delay;
  if (span.count() == 0) return options_.min_delay;
  return options_.min_delay +
         std::chrono::nanoseconds(static_cast<std::int64_t>(
             splitmix64(rng_) % (static_cast<std::uint64_t>(span.count()) + 1)));
}

bool network::chance(double p) {
  if (p <= 0) return false;
  return static_cast<double>(splitmix64(rng_) >> 11) * 0x1p-53 < p;
}

bool network::cut(unsigned short a, unsigned short b) const {
  for (const auto& [x, y] : cuts_) {
    const bool a_x = x == 0 || x == a, b_y = y == 0 || y == b;
    const bool a_y = y == 0 || y == a, b_x = x == 0 || x == b;
    if ((a_x && b_y) || (a_y && b_x)) return true;
  }
  return false;
}

void network::partition(unsigned short a, unsigned short b) {
  cuts_.insert({std::min(a, b), std::max(a, b)});
  healed_.reset();
}

void network::heal() {
  cuts_.clear();
  healed_.set();
}

template <class Entry>
io::descriptor network::open_port(std::map<unsigned short, std::unique_ptr<Entry>>& table,
                                  unsigned short port, int type, const char* what,
                                  net::endpoint& bound) {
  const auto [user, relay] = socket_pair(type, what);
  io::descriptor user_end(user);
  auto e = std::make_unique<Entry>();
  e->user = id_of(user);
  e->relay = io::descriptor(relay);
  e->address = loopback(port);
  bound = e->address;
  addresses_[user] = {e->user, e->address, {}};
  table[port] = std::move(e);
  return user_end;
}

// ---- TCP ------------------------------------------------------------------------------
io::descriptor network::listen(const net::endpoint& at, net::endpoint& bound) {
  const unsigned short port = take_port(at.port(), next_listen_port_, "listen");
  io::descriptor user_end = open_port(listeners_, port, SOCK_STREAM, "listen", bound);
  watch_listener(port);
  return user_end;
}

// The user's end of a listener closes: its end of stream reaches the
// network's end. The connections nobody accepted are dropped with it.
void network::watch_listener(unsigned short port) {
  listener* l = listeners_.at(port).get();
  start([this, port, l] {
    char byte;
    std::error_code ec;
    while (l->relay.read(&byte, 1, ec) != 0 && !ec) {
    }
    auto it = listeners_.find(port);
    if (it != listeners_.end() && it->second.get() == l) listeners_.erase(it);
  });
}

io::descriptor network::accept(io::descriptor& listener_end, std::error_code& ec,
                               io::clock::time_point deadline) {
  for (;;) {
    listener* l = nullptr;
    for (auto& [port, entry] : listeners_) {
      if (entry->user.fd == listener_end.native_handle() && entry->open()) l = entry.get();
    }
    if (l == nullptr) {
      ec = listener_end.is_open() ? std::make_error_code(std::errc::bad_file_descriptor)
                                  : make_error_code(io::error::closed);
      return {};
    }
    if (!l->backlog.empty()) {
      pending p = std::move(l->backlog.front());
      l->backlog.pop_front();
      char byte;
      [[maybe_unused]] const ssize_t r = ::recv(l->user.fd, &byte, 1, MSG_DONTWAIT);
      const int fd = p.server_end.native_handle();
      addresses_[fd] = {id_of(fd), l->address, p.client};
      return std::move(p.server_end);
    }
    if ((ec = listener_end.wait_readable(deadline))) return {};
  }
}

io::descriptor network::connect(const net::endpoint& to, std::error_code& ec,
                                io::clock::time_point deadline) {
  const unsigned short port = to.port();
  const unsigned short client_port = next_client_port_++;
  // A cut port drops the handshake; TCP retries it, 1 s then doubling.
  auto backoff = std::chrono::duration_cast<io::clock::duration>(std::chrono::seconds(1));
  while (cut(client_port, port)) {
    const auto now = io::clock::now();
    if (now >= deadline) {
      ec = std::make_error_code(std::errc::timed_out);
      return {};
    }
    healed_.wait_for(std::min<io::clock::duration>(deadline - now, backoff));
    backoff *= 2;
  }
  const auto it = listeners_.find(port);
  if (it == listeners_.end() || !it->second->open()) {
    ec = std::make_error_code(std::errc::connection_refused);
    return {};
  }
  this_fiber::sleep_for(delay());  // the handshake's round trip, roughly
  listener& l = *it->second;
  if (!l.open()) {
    ec = std::make_error_code(std::errc::connection_refused);
    return {};
  }
  const auto [c_user, c_relay] = socket_pair(SOCK_STREAM, "connect");
  io::descriptor client_end(c_user);
  const auto [s_user, s_relay] = socket_pair(SOCK_STREAM, "connect");
  io::descriptor server_end(s_user);
  auto c = std::make_shared<connection>();
  c->client_relay = io::descriptor(c_relay);
  c->server_relay = io::descriptor(s_relay);
  c->client = id_of(c_user);
  c->server = id_of(s_user);
  c->client_port = client_port;
  c->server_port = port;
  connections_.push_back(c);
  const net::endpoint client_address = loopback(client_port);
  addresses_[c_user] = {c->client, client_address, l.address};
  l.backlog.push_back({std::move(server_end), client_address, c});
  const char byte = 0;
  [[maybe_unused]] const ssize_t r = ::send(l.relay.native_handle(), &byte, 1, MSG_NOSIGNAL);
  start([this, c] { pump(c, true); });
  start([this, c] { pump(c, false); });
  return client_end;
}

void network::pump(const std::shared_ptr<connection>& c, bool forward) {
  io::descriptor& from = forward ? c->client_relay : c->server_relay;
  io::descriptor& to = forward ? c->server_relay : c->client_relay;
  std::vector<char> buf(16 * 1024);
  for (;;) {
    std::error_code ec;
    const std::size_t n = from.read(buf.data(), buf.size(), ec);
    if (ec || c->reset) return;
    if (n == 0) {  // the sender shut down or closed: pass the end of stream on
      ::shutdown(to.native_handle(), SHUT_WR);
      return;
    }
    this_fiber::sleep_for(delay());
    if (cut(c->client_port, c->server_port)) {
      const auto give_up = io::clock::now() + options_.partition_timeout;
      while (cut(c->client_port, c->server_port) && io::clock::now() < give_up && !c->reset) {
        healed_.wait_for(give_up - io::clock::now());
      }
      if (cut(c->client_port, c->server_port)) {
        reset_connection(*c);
        return;
      }
    }
    if (c->reset) return;
    if (chance(options_.reset)) {
      reset_connection(*c);
      return;
    }
    std::size_t done = 0;
    while (done < n && !ec) done += to.write(buf.data() + done, n - done, ec);
    if (ec) {  // the receiver closed: as TCP answers data to a closed socket
      if (!c->reset) reset_connection(*c);
      return;
    }
  }
}

// Both users' ends fail with ECONNRESET: a Unix-domain stream socket closed
// with unread bytes in its receive queue resets its peer. The byte is sent
// from the user's end (checked to be the same socket still), so it sits
// unread in ours as we close it. Our ends are released first (not close():
// that only shuts down until the destructor, which the peer reads as an end
// of stream): the pumps wake with an error and can no longer read the byte.
void network::reset_connection(connection& c) {
  if (c.reset) return;
  c.reset = true;
  const int relays[2] = {c.client_relay.release(), c.server_relay.release()};
  const char byte = 0;
  for (socket_id* user : {&c.client, &c.server}) {
    if (user->alive()) {
      [[maybe_unused]] const ssize_t r = ::send(user->fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
  }
  for (const int fd : relays) {
    if (fd >= 0) ::close(fd);
  }
}

void network::reset(const net::tcp_stream& s) {
  const int fd = const_cast<net::tcp_stream&>(s).descriptor().native_handle();
  for (const auto& weak : connections_) {
    if (auto c = weak.lock()) {
      if ((c->client.fd == fd && c->client.alive()) || (c->server.fd == fd && c->server.alive())) {
        reset_connection(*c);
        return;
      }
    }
  }
  throw std::logic_error(
      "tessera::testing::reset: the stream is not a connection of this run's "
      "simulated network (or it has ended)");
}

bool network::endpoints(int fd, net::endpoint* local, net::endpoint* remote) {
  const auto it = addresses_.find(fd);
  if (it == addresses_.end() || !it->second.id.alive()) return false;
  if (local != nullptr) *local = it->second.local;
  if (remote != nullptr) *remote = it->second.remote;
  return true;
}

// ---- UDP ------------------------------------------------------------------------------
io::descriptor network::bind_udp(const net::endpoint& at, net::endpoint& bound) {
  const unsigned short port = take_port(at.port(), next_udp_port_, "bind");
  return open_port(udp_, port, SOCK_DGRAM, "bind", bound);
}

std::size_t network::send_to(io::descriptor& d, const void* buf, std::size_t n,
                             const net::endpoint& to, std::error_code& ec, io::clock::time_point) {
  const auto from = addresses_.find(d.native_handle());
  if (from == addresses_.end() || !from->second.id.alive()) {
    ec = std::make_error_code(std::errc::bad_file_descriptor);
    return 0;
  }
  const unsigned short src = from->second.local.port(), dst = to.port();
  if (chance(options_.drop) || cut(src, dst)) return n;  // lost on the way
  // The datagram as it arrives: the sender's address, then the bytes.
  std::vector<char> datagram(sizeof(net::endpoint) + n);
  std::memcpy(datagram.data(), &from->second.local, sizeof(net::endpoint));
  std::memcpy(datagram.data() + sizeof(net::endpoint), buf, n);
  const auto wait = delay();
  start([this, dst, wait, datagram = std::move(datagram)] {
    this_fiber::sleep_for(wait);
    const auto it = udp_.find(dst);
    if (it == udp_.end() || !it->second->user.alive()) return;  // nobody there: lost
    [[maybe_unused]] const ssize_t r = ::send(it->second->relay.native_handle(), datagram.data(),
                                              datagram.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  });
  return n;
}

std::size_t network::receive_from(io::descriptor& d, void* buf, std::size_t n, net::endpoint& from,
                                  std::error_code& ec, io::clock::time_point deadline) {
  iovec iov[2] = {{&from, sizeof from}, {buf, n}};
  const std::size_t r = d.readv(iov, 2, ec, deadline);
  if (ec) return 0;
  return r > sizeof from ? r - sizeof from : 0;
}

// ---- the public calls -------------------------------------------------------------
network& current(const char* who) {
  auto* n = dynamic_cast<network*>(io::detail::current_network());
  if (n == nullptr) {
    throw std::logic_error(std::string(who) + ": not inside a simulated run");
  }
  return *n;
}

}  // namespace tessera::testing::detail

namespace tessera::testing {

void partition(unsigned short port_a, unsigned short port_b) {
  detail::current("tessera::testing::partition").partition(port_a, port_b);
}
void heal() {
  detail::current("tessera::testing::heal").heal();
}
void reset(net::tcp_stream& stream) {
  detail::current("tessera::testing::reset").reset(stream);
}

}  // namespace tessera::testing
