// TLS streams (tessera/tls.h) on OpenSSL 3.
//
// OpenSSL reads and writes the socket itself (SSL_set_fd); the socket is
// non-blocking, so a call that needs the network returns WANT_READ or
// WANT_WRITE and we park on that direction through the tcp_stream's
// io::descriptor, then call again — the pattern OpenSSL documents for
// non-blocking sockets. The readiness the poller reports is edge-triggered:
// a wait follows a call that found the socket dry, so no edge is missed.
#include "tessera/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cstring>
#include <stdexcept>
#include <utility>

namespace tessera::tls {
namespace {

class tls_category : public std::error_category {
 public:
  const char* name() const noexcept override { return "tessera::tls"; }
  std::string message(int v) const override {
    switch (static_cast<error>(v)) {
      case error::handshake:
        return "TLS handshake failed";
      case error::verification:
        return "the peer's certificate was not verified";
      case error::protocol:
        return "TLS protocol error";
      case error::truncated:
        return "the peer closed the TLS stream without close_notify";
    }
    return "unknown tessera::tls error";
  }
};

/// OpenSSL's error queue as text (emptied), or `fallback`.
std::string drain_errors(const char* fallback) {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? fallback : out;
}

[[noreturn]] void throw_openssl(const std::string& what) {
  throw std::runtime_error("tessera::tls::" + what + ": " + drain_errors("unknown OpenSSL error"));
}

}  // namespace

const std::error_category& category() noexcept {
  static const tls_category c;
  return c;
}

// ---- context ----------------------------------------------------------------------
context::context(SSL_CTX* ctx) : ctx_(ctx, SSL_CTX_free) {
  if (ctx == nullptr) throw_openssl("context");
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // Partial writes are our business (write_all), and a retried write may
  // come from a moved buffer (our strings grow).
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}

context context::client() {
  context c(SSL_CTX_new(TLS_client_method()));
  SSL_CTX_set_verify(c.native_handle(), SSL_VERIFY_PEER, nullptr);
  if (SSL_CTX_set_default_verify_paths(c.native_handle()) != 1) {
    throw_openssl("context::client: loading the system's CA certificates");
  }
  return c;
}

context context::server(const std::string& cert_chain_file, const std::string& private_key_file) {
  context c(SSL_CTX_new(TLS_server_method()));
  if (SSL_CTX_use_certificate_chain_file(c.native_handle(), cert_chain_file.c_str()) != 1) {
    throw_openssl("context::server: certificate chain '" + cert_chain_file + "'");
  }
  if (SSL_CTX_use_PrivateKey_file(c.native_handle(), private_key_file.c_str(), SSL_FILETYPE_PEM) !=
      1) {
    throw_openssl("context::server: private key '" + private_key_file + "'");
  }
  if (SSL_CTX_check_private_key(c.native_handle()) != 1) {
    throw_openssl("context::server: the key '" + private_key_file + "' does not match '" +
                  cert_chain_file + "'");
  }
  return c;
}

void context::load_verify_file(const std::string& pem_file) {
  if (SSL_CTX_load_verify_locations(ctx_.get(), pem_file.c_str(), nullptr) != 1) {
    throw_openssl("context::load_verify_file: '" + pem_file + "'");
  }
}

void context::set_verify(bool on) {
  SSL_CTX_set_verify(ctx_.get(), on ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
}

void context::set_ciphersuites(const std::string& suites) {
  if (SSL_CTX_set_ciphersuites(ctx_.get(), suites.c_str()) != 1) {
    throw_openssl("context::set_ciphersuites: '" + suites + "'");
  }
}

void context::set_alpn(std::vector<std::string> protocols) {
  auto wire = std::make_shared<std::vector<unsigned char>>();
  for (const auto& p : protocols) {
    if (p.empty() || p.size() > 255) {
      throw std::invalid_argument("tessera::tls::context::set_alpn: protocol name '" + p +
                                  "' must be 1 to 255 bytes");
    }
    wire->push_back(static_cast<unsigned char>(p.size()));
    wire->insert(wire->end(), p.begin(), p.end());
  }
  alpn_ = wire;
  // Client: what it offers. Server: the callback picks from the same list.
  if (SSL_CTX_set_alpn_protos(ctx_.get(), wire->data(), static_cast<unsigned>(wire->size())) != 0) {
    throw_openssl("context::set_alpn");
  }
  SSL_CTX_set_alpn_select_cb(
      ctx_.get(),
      [](SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
         unsigned inlen, void* arg) -> int {
        const auto* ours = static_cast<const std::vector<unsigned char>*>(arg);
        unsigned char* chosen = nullptr;
        if (SSL_select_next_proto(&chosen, outlen, ours->data(),
                                  static_cast<unsigned>(ours->size()), in,
                                  inlen) != OPENSSL_NPN_NEGOTIATED) {
          return SSL_TLSEXT_ERR_NOACK;
        }
        *out = chosen;
        return SSL_TLSEXT_ERR_OK;
      },
      wire.get());
}

// ---- tls_stream -------------------------------------------------------------------
tls_stream::tls_stream(tls_stream&& o) noexcept
    : ssl_(std::exchange(o.ssl_, nullptr)),
      s_(std::move(o.s_)),
      last_error_(std::move(o.last_error_)) {}

tls_stream& tls_stream::operator=(tls_stream&& o) noexcept {
  if (this != &o) {
    if (ssl_ != nullptr) SSL_free(ssl_);
    ssl_ = std::exchange(o.ssl_, nullptr);
    s_ = std::move(o.s_);
    last_error_ = std::move(o.last_error_);
  }
  return *this;
}

tls_stream::~tls_stream() {
  if (ssl_ != nullptr) SSL_free(ssl_);  // the socket is the tcp_stream's to close
}

template <class Op>
int tls_stream::drive(Op&& op, error failure, std::error_code& ec, io::clock::time_point deadline) {
  ec.clear();
  if (ssl_ == nullptr) {
    ec = io::error::closed;
    return -1;
  }
  for (;;) {
    ERR_clear_error();
    errno = 0;
    const int r = op();
    if (r > 0) return r;
    const int why = SSL_get_error(ssl_, r);
    switch (why) {
      case SSL_ERROR_WANT_READ:
      case SSL_ERROR_WANT_WRITE: {
        auto& d = s_.descriptor();
        ec = why == SSL_ERROR_WANT_READ ? d.wait_readable(deadline) : d.wait_writable(deadline);
        if (ec) return -1;
        continue;
      }
      case SSL_ERROR_ZERO_RETURN:  // close_notify: the end of the stream
        return 0;
      case SSL_ERROR_SYSCALL:
        if (errno != 0) {
          ec = std::error_code(errno, std::system_category());
          last_error_ = ec.message();
        } else {
          ec = error::truncated;
          last_error_ = "unexpected end of file";
        }
        return -1;
      default: {
        const long verify = SSL_get_verify_result(ssl_);
        if (failure == error::handshake && verify != X509_V_OK) {
          ec = error::verification;
          last_error_ = X509_verify_cert_error_string(verify);
          ERR_clear_error();
          return -1;
        }
        const unsigned long e = ERR_peek_error();
        if (ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
          ec = error::truncated;
        } else {
          ec = failure;
        }
        last_error_ = drain_errors("TLS failure");
        // A closed descriptor makes OpenSSL fail too: say so instead.
        if (!s_.descriptor().is_open()) ec = io::error::closed;
        return -1;
      }
    }
  }
}

tls_stream tls_stream::handshake(const context& ctx, net::tcp_stream s, bool client,
                                 std::string_view server_name, std::error_code& ec,
                                 io::clock::time_point deadline) {
  SSL* ssl = SSL_new(ctx.native_handle());
  if (ssl == nullptr) throw_openssl("tls_stream: SSL_new");
  const int fd = s.descriptor().native_handle();
  tls_stream t(ssl, std::move(s));
  if (SSL_set_fd(ssl, fd) != 1) throw_openssl("tls_stream: SSL_set_fd");
  if (client) {
    const std::string name(server_name);
    if (!name.empty()) {
      SSL_set_tlsext_host_name(ssl, name.c_str());  // SNI
      if (SSL_set1_host(ssl, name.c_str()) != 1) throw_openssl("tls_stream::connect: host name");
    }
    SSL_set_connect_state(ssl);
  } else {
    SSL_set_accept_state(ssl);
  }
  t.drive([&] { return SSL_do_handshake(ssl); }, error::handshake, ec, deadline);
  return t;
}

tls_stream tls_stream::connect(const context& ctx, net::tcp_stream s, std::string_view server_name,
                               std::error_code& ec, io::clock::time_point deadline) {
  return handshake(ctx, std::move(s), true, server_name, ec, deadline);
}

tls_stream tls_stream::accept(const context& ctx, net::tcp_stream s, std::error_code& ec,
                              io::clock::time_point deadline) {
  return handshake(ctx, std::move(s), false, {}, ec, deadline);
}

namespace {
[[noreturn]] void throw_tls(const char* op, std::error_code ec, const std::string& detail) {
  std::string what = std::string("tessera::tls::tls_stream::") + op;
  if (!detail.empty() && detail != ec.message()) what += " (" + detail + ")";
  throw std::system_error(ec, what);
}
}  // namespace

tls_stream tls_stream::connect(const context& ctx, net::tcp_stream s, std::string_view server_name,
                               std::chrono::milliseconds timeout) {
  std::error_code ec;
  auto t = connect(ctx, std::move(s), server_name, ec, io::clock::now() + timeout);
  if (ec) throw_tls("connect", ec, t.last_error());
  return t;
}

tls_stream tls_stream::accept(const context& ctx, net::tcp_stream s,
                              std::chrono::milliseconds timeout) {
  std::error_code ec;
  auto t = accept(ctx, std::move(s), ec, io::clock::now() + timeout);
  if (ec) throw_tls("accept", ec, t.last_error());
  return t;
}

std::size_t tls_stream::read_some(void* buf, std::size_t n, std::error_code& ec,
                                  io::clock::time_point deadline) {
  std::size_t got = 0;
  const int r =
      drive([&] { return SSL_read_ex(ssl_, buf, n, &got); }, error::protocol, ec, deadline);
  return r > 0 ? got : 0;
}

std::size_t tls_stream::read_some(void* buf, std::size_t n) {
  std::error_code ec;
  const std::size_t got = read_some(buf, n, ec);
  if (ec) throw_tls("read_some", ec, last_error_);
  return got;
}

std::size_t tls_stream::write_some(const void* buf, std::size_t n, std::error_code& ec,
                                   io::clock::time_point deadline) {
  std::size_t put = 0;
  const int r =
      drive([&] { return SSL_write_ex(ssl_, buf, n, &put); }, error::protocol, ec, deadline);
  return r > 0 ? put : 0;
}

std::size_t tls_stream::read_exactly(void* buf, std::size_t n, std::error_code& ec,
                                     io::clock::time_point deadline) {
  std::size_t done = 0;
  while (done < n) {
    const std::size_t got = read_some(static_cast<char*>(buf) + done, n - done, ec, deadline);
    if (ec) return done;
    if (got == 0) {
      ec = io::error::eof;
      return done;
    }
    done += got;
  }
  return done;
}

void tls_stream::read_exactly(void* buf, std::size_t n) {
  std::error_code ec;
  read_exactly(buf, n, ec);
  if (ec) throw_tls("read_exactly", ec, last_error_);
}

std::size_t tls_stream::write_all(const void* buf, std::size_t n, std::error_code& ec,
                                  io::clock::time_point deadline) {
  std::size_t done = 0;
  while (done < n) {
    done += write_some(static_cast<const char*>(buf) + done, n - done, ec, deadline);
    if (ec) return done;
  }
  return done;
}

void tls_stream::write_all(const void* buf, std::size_t n) {
  std::error_code ec;
  write_all(buf, n, ec);
  if (ec) throw_tls("write_all", ec, last_error_);
}

std::error_code tls_stream::shutdown(io::clock::time_point deadline) {
  std::error_code ec;
  // 0: close_notify sent, the peer's not yet received — all we wait for.
  drive([&] { return SSL_shutdown(ssl_) >= 0 ? 1 : -1; }, error::protocol, ec, deadline);
  return ec;
}

std::string tls_stream::alpn_protocol() const {
  const unsigned char* p = nullptr;
  unsigned n = 0;
  if (ssl_ != nullptr) SSL_get0_alpn_selected(ssl_, &p, &n);
  return p != nullptr ? std::string(reinterpret_cast<const char*>(p), n) : std::string();
}

std::string tls_stream::server_name() const {
  const char* n = ssl_ != nullptr ? SSL_get_servername(ssl_, TLSEXT_NAMETYPE_host_name) : nullptr;
  return n != nullptr ? n : "";
}

}  // namespace tessera::tls
