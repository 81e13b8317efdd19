// redis_client — the pattern for a client library whose protocol can be used
// without its I/O: hiredis (Debian libhiredis-dev) formats commands and parses
// replies; Tessera's tcp_stream moves the bytes, so a fiber waiting for Redis
// parks and the socket has Tessera's deadlines, close and cancellation.
// (tessera::pq shows the other pattern: a library that does its own I/O on a
// non-blocking socket, waited on through io::descriptor.)
//
//   redis_client --addr 127.0.0.1:6379 --fibers 100 --ops 1000
//
// Each fiber pipelines `ops` INCRs of one counter (all sent, then all
// replies read: one round trip per batch), then SETs and GETs a key of its
// own holding binary data; the program checks every reply and the counter's
// total, prints "ok: counter N, M keys", and exits 0 — or names what differed
// and exits 1. Replies of type error (wrong type, unknown command) throw.
#include <hiredis/hiredis.h>
#include <tessera/net.h>
#include <tessera/runtime.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

using reply_ptr = std::unique_ptr<redisReply, decltype(&freeReplyObject)>;

/// One connection to Redis; one caller at a time (as a tcp_stream).
class redis_connection {
 public:
  explicit redis_connection(const std::string& addr)
      : s_(tessera::net::tcp_stream::connect(addr)), reader_(redisReaderCreate(), redisReaderFree) {
    if (!reader_) throw std::bad_alloc();
    (void)s_.set_no_delay(true);
  }

  /// Queues a command (sent with the next reply() call), binary-safe.
  void append(std::initializer_list<std::string_view> args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (auto a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    char* cmd = nullptr;
    const int n =
        redisFormatCommandArgv(&cmd, static_cast<int>(argv.size()), argv.data(), lens.data());
    if (n < 0) throw std::bad_alloc();
    out_.append(cmd, static_cast<std::size_t>(n));
    redisFreeCommand(cmd);
  }

  /// Sends what is queued, then returns the next reply, parking until it
  /// arrives (or `deadline`: std::system_error, timed out).
  reply_ptr reply(tessera::io::clock::time_point deadline = tessera::io::clock::time_point::max()) {
    if (!out_.empty()) {
      s_.write_all(out_.data(), out_.size(), ec_, deadline);
      out_.clear();
      if (ec_) throw std::system_error(ec_, "redis: sending");
    }
    for (;;) {
      void* r = nullptr;
      if (redisReaderGetReply(reader_.get(), &r) != REDIS_OK) {
        throw std::runtime_error(std::string("redis: protocol error: ") + reader_->errstr);
      }
      if (r != nullptr) {
        reply_ptr p(static_cast<redisReply*>(r), freeReplyObject);
        if (p->type == REDIS_REPLY_ERROR) {
          throw std::runtime_error("redis: " + std::string(p->str, p->len));
        }
        return p;
      }
      char buf[16384];
      const std::size_t n = s_.read_some(buf, sizeof buf, ec_, deadline);
      if (ec_) throw std::system_error(ec_, "redis: receiving");
      if (n == 0) throw std::runtime_error("redis: the server closed the connection");
      redisReaderFeed(reader_.get(), buf, n);
    }
  }

 private:
  tessera::net::tcp_stream s_;
  std::unique_ptr<redisReader, decltype(&redisReaderFree)> reader_;
  std::string out_;
  std::error_code ec_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"redis_client: hiredis's protocol over Tessera's sockets"};
  std::string addr = "127.0.0.1:6379";
  int fibers = 100, ops = 1000;
  app.add_option("--addr", addr, "Redis host:port")->capture_default_str();
  app.add_option("--fibers", fibers, "Concurrent fibers, a connection each")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--ops", ops, "INCRs per fiber, pipelined")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  tessera::runtime rt({.workers = 2});
  std::atomic<int> wrong{0};
  long long total = -1;
  rt.run([&] {
    {
      redis_connection c(addr);
      c.append({"DEL", "tessera:counter"});
      (void)c.reply();
    }
    std::vector<tessera::fiber> fs;
    for (int f = 0; f < fibers; ++f) {
      fs.emplace_back([&, f] {
        try {
          redis_connection c(addr);
          for (int i = 0; i < ops; ++i) c.append({"INCR", "tessera:counter"});
          for (int i = 0; i < ops; ++i) {
            if (c.reply()->type != REDIS_REPLY_INTEGER) wrong.fetch_add(1);
          }
          // Binary data, a NUL and CR LF among it, comes back unchanged.
          const std::string key = "tessera:key:" + std::to_string(f);
          const std::string value = "fiber " + std::to_string(f) + std::string("\0\r\n", 3) + key;
          c.append({"SET", key, value});
          c.append({"GET", key});
          (void)c.reply();
          const auto got = c.reply();
          if (got->type != REDIS_REPLY_STRING || std::string(got->str, got->len) != value) {
            wrong.fetch_add(1);
          }
        } catch (const std::exception& e) {
          std::fprintf(stderr, "fiber %d: %s\n", f, e.what());
          wrong.fetch_add(1);
        }
      });
    }
    for (auto& f : fs) f.join();
    redis_connection c(addr);
    c.append({"GET", "tessera:counter"});
    const auto r = c.reply();
    total = r->type == REDIS_REPLY_STRING ? std::stoll(std::string(r->str, r->len)) : -1;
  });
  const long long want = static_cast<long long>(fibers) * ops;
  if (wrong.load() != 0 || total != want) {
    std::printf("FAIL: %d wrong replies; counter %lld, want %lld\n", wrong.load(), total, want);
    return 1;
  }
  std::printf("ok: counter %lld, %d keys\n", total, fibers);
  return 0;
}
