// tessera/tls.h — TLS streams over tessera::net::tcp_stream, on OpenSSL 3
// (Debian libssl-dev). Optional target tessera::tls.
//
// Contract
// - The same as tcp_stream (tessera/net.h): fibers park, plain threads poll;
//   one reader and one writer at a time (a TLS read may need to write, and a
//   write to read — OpenSSL's WANT_READ / WANT_WRITE — and each waits on the
//   direction OpenSSL asks for); every call has a steady_clock deadline form,
//   and the socket's Go-style deadlines apply; close() wakes every waiter with
//   io::error::closed; SIGPIPE never kills the process.
// - Errors: `std::error_code&` forms report, the others throw
//   std::system_error naming the operation and OpenSSL's reason. TLS failures
//   are tls::error values (handshake, verification, protocol, truncated);
//   last_error() gives OpenSSL's text for the last one (for verification, the
//   certificate problem, e.g. "certificate has expired"). A peer that closes
//   without close_notify makes a read report tls::error::truncated (a clean
//   close_notify is end of stream: a read of 0 bytes).
// - Clients verify by default: context::client() trusts the system's CA store
//   (or the files given to load_verify_file) and connect() checks the
//   certificate's name against `server_name`, which is also sent as SNI.
//   set_verify(false) turns checking off (for tests only).
// - Servers: context::server(cert, key) loads a PEM chain and key (throws
//   std::runtime_error naming the file and OpenSSL's reason). ALPN: the
//   client offers protocols in order, the server picks the first of its own
//   list the client offered (none shared: the handshake goes on without).
// - shutdown() sends close_notify (SSL_shutdown) and does not wait for the
//   peer's; close() closes the socket.
// - Thread safety: a context may be shared by any number of streams and
//   threads once configured; a stream by one reader and one writer.
#pragma once

#include <tessera/net.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

using SSL_CTX = struct ssl_ctx_st;
using SSL = struct ssl_st;

namespace tessera::tls {

/// TLS failures (their category is tls::category()).
enum class error {
  handshake = 1,  ///< the handshake failed (no shared cipher, bad message, …)
  verification,   ///< the peer's certificate was not trusted or not for that name
  protocol,       ///< a TLS protocol error after the handshake
  truncated,      ///< the peer closed without close_notify
};
const std::error_category& category() noexcept;
inline std::error_code make_error_code(error e) noexcept {
  return {static_cast<int>(e), category()};
}

/// Settings shared by streams: certificates, trust, ALPN (an SSL_CTX).
class context {
 public:
  /// A client context: TLS 1.2+, verification on against the system's CAs.
  static context client();
  /// A server context with the PEM certificate chain and private key.
  static context server(const std::string& cert_chain_file, const std::string& private_key_file);

  /// Trusts the CA certificates in the PEM file (clients; adds to the system's).
  void load_verify_file(const std::string& pem_file);
  /// Verification of the peer's certificate (clients: on by default).
  void set_verify(bool on);
  /// The TLS 1.3 cipher suites, in OpenSSL's syntax
  /// ("TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256"); throws
  /// std::runtime_error naming the string if OpenSSL takes none of it.
  void set_ciphersuites(const std::string& suites);
  /// ALPN protocols, most preferred first ("h2", "http/1.1").
  void set_alpn(std::vector<std::string> protocols);

  SSL_CTX* native_handle() const noexcept { return ctx_.get(); }

 private:
  struct impl;
  explicit context(SSL_CTX* ctx);
  std::shared_ptr<SSL_CTX> ctx_;
  std::shared_ptr<std::vector<unsigned char>> alpn_;  // wire format, for the server's callback
};

/// A TLS connection over a TCP stream.
class [[nodiscard]] tls_stream {
 public:
  tls_stream() noexcept = default;
  tls_stream(tls_stream&&) noexcept;
  tls_stream& operator=(tls_stream&&) noexcept;
  ~tls_stream();

  /// Client: handshakes over `s`, sending `server_name` as SNI and checking
  /// the certificate against it (when the context verifies).
  static tls_stream connect(const context& ctx, net::tcp_stream s, std::string_view server_name,
                            std::error_code& ec,
                            io::clock::time_point deadline = io::clock::time_point::max());
  static tls_stream connect(const context& ctx, net::tcp_stream s, std::string_view server_name,
                            std::chrono::milliseconds timeout = std::chrono::seconds(30));
  /// Server: handshakes over an accepted `s`.
  static tls_stream accept(const context& ctx, net::tcp_stream s, std::error_code& ec,
                           io::clock::time_point deadline = io::clock::time_point::max());
  static tls_stream accept(const context& ctx, net::tcp_stream s,
                           std::chrono::milliseconds timeout = std::chrono::seconds(30));

  /// As tcp_stream's: at least 1 byte, or 0 at the end (close_notify).
  std::size_t read_some(void* buf, std::size_t n, std::error_code& ec,
                        io::clock::time_point deadline = io::clock::time_point::max());
  std::size_t read_some(void* buf, std::size_t n);
  std::size_t write_some(const void* buf, std::size_t n, std::error_code& ec,
                         io::clock::time_point deadline = io::clock::time_point::max());
  std::size_t read_exactly(void* buf, std::size_t n, std::error_code& ec,
                           io::clock::time_point deadline = io::clock::time_point::max());
  void read_exactly(void* buf, std::size_t n);
  std::size_t write_all(const void* buf, std::size_t n, std::error_code& ec,
                        io::clock::time_point deadline = io::clock::time_point::max());
  void write_all(const void* buf, std::size_t n);

  /// Sends close_notify; the stream can still be read.
  std::error_code shutdown(io::clock::time_point deadline = io::clock::time_point::max());
  void close() noexcept { s_.close(); }

  /// The ALPN protocol agreed on ("" if none).
  std::string alpn_protocol() const;
  /// Server side: the SNI name the client sent ("" if none).
  std::string server_name() const;
  /// OpenSSL's text for the last failure reported by this stream.
  const std::string& last_error() const noexcept { return last_error_; }
  net::tcp_stream& next_layer() noexcept { return s_; }
  SSL* native_handle() const noexcept { return ssl_; }

 private:
  tls_stream(SSL* ssl, net::tcp_stream s) noexcept : ssl_(ssl), s_(std::move(s)) {}
  static tls_stream handshake(const context& ctx, net::tcp_stream s, bool client,
                              std::string_view server_name, std::error_code& ec,
                              io::clock::time_point deadline);
  /// Runs an SSL call until it succeeds or fails for good, parking on
  /// WANT_READ / WANT_WRITE. Returns its result (> 0) or ≤ 0 with ec set.
  template <class Op>
  int drive(Op&& op, error failure, std::error_code& ec, io::clock::time_point deadline);
  SSL* ssl_ = nullptr;
  net::tcp_stream s_;
  std::string last_error_;
};

}  // namespace tessera::tls

template <>
struct std::is_error_code_enum<tessera::tls::error> : std::true_type {};
