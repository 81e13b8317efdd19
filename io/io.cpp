// Fiber-aware descriptors (tessera/io.h) over the poller's wait protocol
// (sched/poller.h), and the blocking() helper pool.
#include "tessera/io.h"

#include "simulated_network.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "poller.h"
#include "scheduler.h"

namespace tessera::io {
namespace {

class io_category : public std::error_category {
 public:
  const char* name() const noexcept override { return "tessera::io"; }
  std::string message(int v) const override {
    switch (static_cast<error>(v)) {
      case error::closed:
        return "use of a closed descriptor";
      case error::eof:
        return "end of stream before the whole buffer was read";
      case error::busy:
        return "another caller already waits on this descriptor in this direction";
    }
    return "unknown tessera::io error";
  }
  std::error_condition default_error_condition(int v) const noexcept override {
    switch (static_cast<error>(v)) {
      case error::closed:
        return std::errc::bad_file_descriptor;
      case error::busy:
        return std::errc::device_or_resource_busy;
      default:
        return {v, *this};
    }
  }
};

void ignore_sigpipe_once() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old {};
    if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
  });
}

[[noreturn]] void throw_io(const char* op, int fd, std::error_code ec) {
  throw std::system_error(
      ec, std::string("tessera::io::descriptor::") + op + " on descriptor " + std::to_string(fd));
}

}  // namespace

const std::error_category& category() noexcept {
  static const io_category c;
  return c;
}

struct descriptor::state {
  tessera::sched::poll_desc* desc;
  std::atomic<std::int64_t> read_deadline{clock::time_point::max().time_since_epoch().count()};
  std::atomic<std::int64_t> write_deadline{clock::time_point::max().time_since_epoch().count()};
  /// recv_stream: the last read came back short (the queue was empty then).
  /// Touched by the one reader at a time; atomic only so that misuse by two
  /// is a busy error, not a data race.
  std::atomic<bool> drained{false};
};

descriptor::descriptor(int fd) {
  if (fd < 0) {
    throw std::system_error(
        std::make_error_code(std::errc::bad_file_descriptor),
        "tessera::io::descriptor: descriptor " + std::to_string(fd) + " is not open");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    const int err = errno;
    ::close(fd);
    throw std::system_error(
        err, std::generic_category(),
        "tessera::io::descriptor: making descriptor " + std::to_string(fd) + " non-blocking");
  }
  ignore_sigpipe_once();
  desc_ = new state{tessera::sched::new_poll_desc(fd)};
}

descriptor::descriptor(descriptor&& o) noexcept : desc_(std::exchange(o.desc_, nullptr)) {}

descriptor& descriptor::operator=(descriptor&& o) noexcept {
  if (this != &o) {
    this->~descriptor();
    desc_ = std::exchange(o.desc_, nullptr);
  }
  return *this;
}

descriptor::~descriptor() {
  // Not close(): no shutdown here, so that close(2) below does what the
  // socket's options say (an abortive close with SO_LINGER 0 sends its RST).
  const int fd = release();
  if (fd >= 0) ::close(fd);
}

int descriptor::release() noexcept {
  if (desc_ == nullptr) return -1;
  if (!desc_->desc->closing.load(std::memory_order_acquire)) {
    tessera::sched::close_io(*desc_->desc);
  }
  const int fd = desc_->desc->fd;
  tessera::sched::free_poll_desc(desc_->desc);
  delete desc_;
  desc_ = nullptr;
  return fd;
}

int descriptor::native_handle() const noexcept {
  return desc_ != nullptr ? desc_->desc->fd : -1;
}

void descriptor::close() noexcept {
  if (desc_ == nullptr || desc_->desc->closing.load(std::memory_order_acquire)) return;
  tessera::sched::close_io(*desc_->desc);
  // The number stays open until the destructor (so no call in flight can hit
  // a reused number), but a socket's peer sees the end now, as after close(2).
  ::shutdown(desc_->desc->fd, SHUT_RDWR);
}

void descriptor::set_deadline(clock::time_point t) noexcept {
  set_read_deadline(t);
  set_write_deadline(t);
}
void descriptor::set_read_deadline(clock::time_point t) noexcept {
  if (desc_ != nullptr) desc_->read_deadline.store(t.time_since_epoch().count());
}
void descriptor::set_write_deadline(clock::time_point t) noexcept {
  if (desc_ != nullptr) desc_->write_deadline.store(t.time_since_epoch().count());
}

bool descriptor::closed() const noexcept {
  return desc_ == nullptr || desc_->desc->closing.load(std::memory_order_acquire);
}

clock::time_point descriptor::effective(bool write, clock::time_point deadline) const noexcept {
  if (deadline != clock::time_point::max()) return deadline;
  const auto v = (write ? desc_->write_deadline : desc_->read_deadline).load();
  return clock::time_point(clock::duration(v));
}

bool descriptor::again(bool write, std::error_code& ec, clock::time_point deadline) {
  if (desc_->desc->closing.load(std::memory_order_acquire)) {
    ec = error::closed;  // whatever the shut-down descriptor said
    return false;
  }
  if (desc_->desc->cancelled.load(std::memory_order_acquire)) {
    ec = std::make_error_code(std::errc::operation_canceled);
    return false;
  }
  if (errno == EINTR) return true;
  if (errno != EAGAIN && errno != EWOULDBLOCK) {
    ec = std::error_code(errno, std::system_category());
    return false;
  }
  const auto d = effective(write, deadline);
  switch (tessera::sched::wait_io(
      *desc_->desc, write,
      d == clock::time_point::max() ? tessera::detail::deadline() : tessera::detail::deadline(d))) {
    case tessera::sched::io_wait::ready:
      return true;
    case tessera::sched::io_wait::timed_out:
      ec = std::make_error_code(std::errc::timed_out);
      return false;
    case tessera::sched::io_wait::closed:
      ec = error::closed;
      return false;
    case tessera::sched::io_wait::busy:
      ec = error::busy;
      return false;
    case tessera::sched::io_wait::cancelled:
      ec = std::make_error_code(std::errc::operation_canceled);
      return false;
  }
  return false;
}

namespace {
// The common shape of the transfer calls: refuse when closed, run `op`.
template <class Op>
std::size_t transfer(descriptor& d, bool closed, bool write, Op&& op, std::error_code& ec,
                     clock::time_point deadline) {
  ec.clear();
  if (closed) {
    ec = error::closed;
    return 0;
  }
  const ssize_t r = d.call(write, op, ec, deadline);
  return r < 0 ? 0 : static_cast<std::size_t>(r);
}
}  // namespace

namespace {
tessera::detail::deadline to_deadline(clock::time_point d) noexcept {
  return d == clock::time_point::max() ? tessera::detail::deadline() : tessera::detail::deadline(d);
}

// A completion call's outcome as the transfer calls report it.
std::size_t completed(const tessera::sched::completion_result& r, std::error_code& ec) {
  using tessera::sched::io_wait;
  switch (r.wait) {
    case io_wait::ready:
      if (r.error != 0) {
        ec = std::error_code(r.error, std::system_category());
        return 0;
      }
      return static_cast<std::size_t>(r.value);
    case io_wait::timed_out:
      ec = std::make_error_code(std::errc::timed_out);
      return 0;
    case io_wait::closed:
      ec = error::closed;
      return 0;
    case io_wait::busy:
      ec = error::busy;
      return 0;
    case io_wait::cancelled:
      ec = std::make_error_code(std::errc::operation_canceled);
      return 0;
  }
  return 0;
}
}  // namespace

// Reads of a descriptor whose bytes arrive through a ring's buffers
// (completion backend): the same path for every read call, so that none
// overtakes bytes already received. Null result: not such a descriptor.
std::optional<std::size_t> descriptor::read_received(void* buf, std::size_t n, std::error_code& ec,
                                                     clock::time_point deadline) {
  auto& d = *desc_->desc;
  if (const std::size_t got = tessera::sched::take_spill(d, buf, n); got > 0) return got;
  tessera::sched::poller* p = tessera::sched::completion_poller(d, true);
  if (p == nullptr) return std::nullopt;
  return completed(
      tessera::sched::completion_recv(*p, d, buf, n, to_deadline(effective(false, deadline))), ec);
}

std::size_t descriptor::read(void* buf, std::size_t n, std::error_code& ec,
                             clock::time_point deadline) {
  ec.clear();
  if (closed()) {
    ec = error::closed;
    return 0;
  }
  if (desc_->desc->rx_owner.load(std::memory_order_acquire) != nullptr ||
      desc_->desc->has_spill.load(std::memory_order_acquire)) {
    if (auto got = read_received(buf, n, ec, deadline)) return *got;
  }
  const int fd = native_handle();
  return transfer(
      *this, closed(), false, [&] { return ::read(fd, buf, n); }, ec, deadline);
}
std::size_t descriptor::write(const void* buf, std::size_t n, std::error_code& ec,
                              clock::time_point deadline) {
  const int fd = native_handle();
  return transfer(
      *this, closed(), true, [&] { return ::write(fd, buf, n); }, ec, deadline);
}
std::size_t descriptor::readv(const iovec* iov, int count, std::error_code& ec,
                              clock::time_point deadline) {
  if (!closed() && (desc_->desc->rx_owner.load(std::memory_order_acquire) != nullptr ||
                    desc_->desc->has_spill.load(std::memory_order_acquire))) {
    // Into the first non-empty buffer: a short read, as readv may return.
    ec.clear();
    int i = 0;
    while (i < count && iov[i].iov_len == 0) ++i;
    if (i == count) return 0;
    if (auto got = read_received(iov[i].iov_base, iov[i].iov_len, ec, deadline)) return *got;
  }
  const int fd = native_handle();
  return transfer(
      *this, closed(), false, [&] { return ::readv(fd, iov, count); }, ec, deadline);
}
std::size_t descriptor::writev(const iovec* iov, int count, std::error_code& ec,
                               clock::time_point deadline) {
  const int fd = native_handle();
  return transfer(
      *this, closed(), true, [&] { return ::writev(fd, iov, count); }, ec, deadline);
}
std::size_t descriptor::recv(void* buf, std::size_t n, int flags, std::error_code& ec,
                             clock::time_point deadline) {
  if (flags == 0 && !closed() &&
      (desc_->desc->rx_owner.load(std::memory_order_acquire) != nullptr ||
       desc_->desc->has_spill.load(std::memory_order_acquire))) {
    ec.clear();
    if (auto got = read_received(buf, n, ec, deadline)) return *got;
  }
  const int fd = native_handle();
  return transfer(
      *this, closed(), false, [&] { return ::recv(fd, buf, n, flags); }, ec, deadline);
}
std::size_t descriptor::recv_stream(void* buf, std::size_t n, std::error_code& ec,
                                    clock::time_point deadline) {
  // Why it is safe to wait without trying: the read that came back short
  // dropped any readiness left before it (consume_readiness), so whatever
  // arrived after its drain has set the word again (edge-triggered epoll and
  // io_uring's multishot poll report every arrival after that point), and a
  // plain thread polls level-triggered anyway. The wait sees it or parks until
  // it comes. One thing a short read can leave behind with its edge already
  // spent: the peer's end of stream (or an error), which recv reports only on
  // the next call — so once the poller has seen one, every read tries first.
  // (tests: NetIn.ShortReadsWaitFirstAndLoseNothing, which hangs without it.)
  ec.clear();
  if (closed()) {
    ec = error::closed;
    return 0;
  }
  // The completion backend: the bytes come from the ring's buffers.
  if (n > 0) {
    if (auto got = read_received(buf, n, ec, deadline)) return *got;
  }
  if (n > 0 && desc_->drained.load(std::memory_order_relaxed) &&
      !desc_->desc->peer_closed.load(std::memory_order_relaxed)) {
    desc_->drained.store(false, std::memory_order_relaxed);
    ec = wait_ready(false, deadline);
    if (ec) return 0;
  }
  tessera::sched::consume_readiness(*desc_->desc, false);
  const int fd = native_handle();
  const ssize_t r = call(
      false, [&] { return ::recv(fd, buf, n, 0); }, ec, deadline);
  if (r < 0) return 0;
  if (r == 0 && n > 0 && closed()) {
    ec = error::closed;  // a close() racing the call shut the socket down under it
    return 0;
  }
  desc_->drained.store(r > 0 && static_cast<std::size_t>(r) < n, std::memory_order_relaxed);
  return static_cast<std::size_t>(r);
}
std::size_t descriptor::send(const void* buf, std::size_t n, int flags, std::error_code& ec,
                             clock::time_point deadline) {
  if (flags == 0 && n > 0 && !closed()) {
    if (tessera::sched::poller* p = tessera::sched::completion_poller(*desc_->desc, false)) {
      ec.clear();
      return completed(tessera::sched::completion_send(*p, *desc_->desc, buf, n,
                                                       to_deadline(effective(true, deadline))),
                       ec);
    }
  }
  const int fd = native_handle();
  return transfer(
      *this, closed(), true, [&] { return ::send(fd, buf, n, flags | MSG_NOSIGNAL); }, ec,
      deadline);
}

std::error_code descriptor::wait_ready(bool write, clock::time_point deadline) {
  std::error_code ec;
  if (closed()) return error::closed;
  if (!write && desc_->desc->rx_owner.load(std::memory_order_acquire) != nullptr) {
    // Readable: bytes (or the end) wait in the ring's buffers.
    read_received(nullptr, 0, ec, deadline);
    return ec;
  }
  errno = EAGAIN;  // as after a call that would block: again() waits
  again(write, ec, deadline);
  return ec;
}
std::error_code descriptor::wait_readable(clock::time_point deadline) {
  return wait_ready(false, deadline);
}
std::error_code descriptor::wait_writable(clock::time_point deadline) {
  return wait_ready(true, deadline);
}

std::size_t descriptor::read(void* buf, std::size_t n) {
  std::error_code ec;
  const std::size_t r = read(buf, n, ec);
  if (ec) throw_io("read", native_handle(), ec);
  return r;
}
std::size_t descriptor::write(const void* buf, std::size_t n) {
  std::error_code ec;
  const std::size_t r = write(buf, n, ec);
  if (ec) throw_io("write", native_handle(), ec);
  return r;
}

int descriptor::accept(std::error_code& ec, clock::time_point deadline) {
  ec.clear();
  if (closed()) {
    ec = error::closed;
    return -1;
  }
  auto& d = *desc_->desc;
  if (tessera::sched::poller* p = tessera::sched::completion_poller(d, false)) {
    const auto r =
        tessera::sched::completion_accept(*p, d, to_deadline(effective(false, deadline)));
    if (r.wait != tessera::sched::io_wait::ready || r.error != EXDEV) {
      completed(r, ec);
      return ec ? -1 : static_cast<int>(r.value);
    }
  }
  const int fd = native_handle();
  const ssize_t r = call(
      false,
      [&] {
        return static_cast<ssize_t>(::accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      },
      ec, deadline);
  return static_cast<int>(r);
}

void descriptor::interrupt() noexcept {
  if (desc_ != nullptr) tessera::sched::cancel_io(*desc_->desc);
}
void descriptor::clear_interrupt() noexcept {
  if (desc_ != nullptr) desc_->desc->cancelled.store(false, std::memory_order_release);
}

// ---- blocking() -------------------------------------------------------------------
namespace {

unsigned configured_blocking_threads() noexcept {
  if (const char* v = std::getenv("TESSERA_BLOCKING_THREADS")) {
    const long n = std::strtol(v, nullptr, 10);
    if (n >= 1 && n <= 1024) return static_cast<unsigned>(n);
  }
  return 16;
}

struct blocking_job {
  void (*fn)(void*);
  void* ctx;
  waiter* who;
  std::atomic<bool> done{false};
};

// Helper threads, grown on demand up to the limit, living for the process.
class blocking_pool {
 public:
  void submit(blocking_job* j) {
    std::unique_lock lock(mu_);
    queue_.push_back(j);
    // Every queued job needs an idle thread of its own (idle ones that were
    // notified but have not woken yet still count as idle).
    if (queue_.size() > idle_ && threads_ < blocking_threads()) {
      ++threads_;
      std::thread([this] { loop(); }).detach();
    }
    lock.unlock();
    cv_.notify_one();
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [this] { return !queue_.empty(); });
      --idle_;
      blocking_job* j = queue_.front();
      queue_.pop_front();
      lock.unlock();
      j->fn(j->ctx);
      waiter* who = j->who;
      j->done.store(true, std::memory_order_release);  // j may die from here on
      unpark(who);                                     // type-stable: harmless if late
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<blocking_job*> queue_;
  unsigned threads_ = 0;
  unsigned idle_ = 0;
};

blocking_pool& pool() {
  static auto* p = new blocking_pool;  // leaked on purpose: detached threads use it
  return *p;
}

}  // namespace

unsigned blocking_threads() noexcept {
  static const unsigned n = configured_blocking_threads();
  return n;
}

namespace detail {
simulated_network* current_network() noexcept {
  tessera::sched::worker* w = tessera::sched::current_worker();
  return w != nullptr && w->rt.sim != nullptr ? w->rt.sim->network : nullptr;
}

bool on_fiber() noexcept {
  tessera::sched::worker* w = tessera::sched::current_worker();
  return w != nullptr && w->on_fiber();
}

void run_blocking(void (*job)(void*), void* ctx) {
  if (tessera::sched::current_worker()->rt.sim != nullptr) {
    job(ctx);  // a simulation has no helper threads: the call is one step of its fiber
    return;
  }
  blocking_job j{job, ctx, self()};
  pool().submit(&j);
  const wait_scope scope("io::blocking", &j);
  while (!j.done.load(std::memory_order_acquire)) park();
}
}  // namespace detail

}  // namespace tessera::io
