// tessera/io.h — fiber-aware descriptors: I/O that parks the calling fiber on
// EAGAIN instead of blocking its worker.
//
// Contract
// - Who may call: fibers and plain OS threads alike. A fiber that would block
//   parks until the runtime's poller reports the descriptor ready (or, on
//   the completion backend, its I/O complete); its worker runs other fibers
//   meanwhile. A plain thread
//   waits in poll(2). The first fiber that waits on a descriptor registers it
//   with its runtime's poller, for good (a descriptor used by fibers of two
//   runtimes is polled by the first one's).
// - One waiter per direction: at most one caller may wait to read and one to
//   write at a time (serialise them, as Go's net does internally); another
//   caller that would wait meanwhile gets io::error::busy.
// - Deadlines: every call has a steady_clock deadline form (`_until`) and a
//   duration form (`_for`); a descriptor also has Go-style read and write
//   deadlines (set_read_deadline, set_write_deadline, set_deadline) that apply
//   to every later call without one. A call never reports timed_out before
//   its deadline. std::errc::timed_out when it passes; nothing is lost: bytes
//   not transferred stay where they were.
// - close(): from any thread or fiber, wakes every caller waiting on the
//   descriptor with io::error::closed ("use of a closed descriptor") and makes
//   later calls fail the same way; a socket is shut down (its peer sees the
//   end). The descriptor number itself is released by the destructor, so it
//   cannot be reused under a call still in flight; destroying without close()
//   is a plain close(2) (with SO_LINGER 0: an abortive close, a reset).
// - Errors: `std::error_code&` overloads report; the others throw
//   std::system_error whose what() names the operation and the descriptor.
//   End of stream is a read of 0 bytes with no error (read_exactly reports
//   io::error::eof); a peer reset is std::errc::connection_reset.
// - The completion backend (io_backend::io_uring): a stream's first read
//   from a fiber (read_some, recv_stream, read, recv) arms a multishot
//   receive, and from then on the kernel moves arriving bytes into the
//   runtime's receive buffers whether or not a read waits; every later read
//   of the descriptor — on a fiber or a plain thread, by any of the read
//   calls — takes them first, in order (a plain thread's read waits for the
//   runtime's workers to reap them). Bytes it holds when its runtime is
//   destroyed are kept for the descriptor's next reads. What the descriptor
//   number reads directly misses them, and release() or close() drops them:
//   hand a socket to a foreign library (OpenSSL, libpq) before reading it
//   through these calls, as tls and pq do. Writes from fibers are send SQEs
//   in the ring: the caller parks until the kernel has taken the bytes and
//   no longer reads its buffer, and a deadline, close() or interrupt()
//   cancels the send and still waits for that.
// - SIGPIPE: the first descriptor made sets SIGPIPE to ignored (if it was at
//   its default), so a write to a closed pipe or socket fails with EPIPE
//   instead of killing the process.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <exception>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <type_traits>

#include "tessera/clock.h"

namespace tessera::io {

/// Errors of Tessera's descriptors, beside the system's errno values.
enum class error {
  closed = 1,  ///< the descriptor was closed (before or during the call)
  eof,         ///< read_exactly: the stream ended first
  busy,        ///< another caller already waits in this direction
};
const std::error_category& category() noexcept;
inline std::error_code make_error_code(error e) noexcept {
  return {static_cast<int>(e), category()};
}

/// tessera::steady_clock: the virtual clock inside a simulation.
using clock = tessera::steady_clock;

/// An owned, non-blocking file descriptor (socket, pipe, eventfd, ...).
class descriptor {
 public:
  descriptor() noexcept = default;
  /// Takes ownership of `fd` and makes it non-blocking. Throws
  /// std::system_error if fd < 0 or fcntl fails (fd is then closed).
  explicit descriptor(int fd);
  descriptor(descriptor&& o) noexcept;
  descriptor& operator=(descriptor&& o) noexcept;
  descriptor(const descriptor&) = delete;
  descriptor& operator=(const descriptor&) = delete;
  /// Wakes waiters as close() does, then close(2)s the descriptor.
  ~descriptor();

  bool is_open() const noexcept { return desc_ != nullptr; }
  int native_handle() const noexcept;
  /// Wakes every waiter with io::error::closed; later calls fail the same
  /// way. Idempotent; any thread or fiber.
  void close() noexcept;
  /// Gives the descriptor number up without closing it: wakes waiters as
  /// close() does, forgets the descriptor, and returns its number (-1 if none).
  /// For sockets another library owns and closes (libpq's, OpenSSL's).
  int release() noexcept;

  /// Go's SetDeadline / SetReadDeadline / SetWriteDeadline: the deadline of
  /// every later call that has none of its own. clock::time_point::max(): none.
  void set_deadline(clock::time_point t) noexcept;
  void set_read_deadline(clock::time_point t) noexcept;
  void set_write_deadline(clock::time_point t) noexcept;

  /// Waits until readable / writable (or the deadline, or close()).
  std::error_code wait_readable(clock::time_point deadline = clock::time_point::max());
  std::error_code wait_writable(clock::time_point deadline = clock::time_point::max());

  /// read(2)/write(2)/readv/writev/recv/send that park on EAGAIN. Return the
  /// bytes transferred (0 from a read: end of stream), or 0 with `ec` set.
  std::size_t read(void* buf, std::size_t n, std::error_code& ec,
                   clock::time_point deadline = clock::time_point::max());
  std::size_t write(const void* buf, std::size_t n, std::error_code& ec,
                    clock::time_point deadline = clock::time_point::max());
  std::size_t readv(const iovec* iov, int count, std::error_code& ec,
                    clock::time_point deadline = clock::time_point::max());
  std::size_t writev(const iovec* iov, int count, std::error_code& ec,
                     clock::time_point deadline = clock::time_point::max());
  std::size_t recv(void* buf, std::size_t n, int flags, std::error_code& ec,
                   clock::time_point deadline = clock::time_point::max());
  /// recv(2) on a stream socket (TCP, Unix-domain stream), skipping the call
  /// that would find nothing: after a read that returned fewer bytes than
  /// asked (the receive queue was empty then), the next one first waits for
  /// readiness — in a request/response exchange, one system call less per
  /// message. Precondition: a SOCK_STREAM descriptor (a short datagram says
  /// nothing about the queue). Otherwise as recv(buf, n, 0, ec, deadline).
  std::size_t recv_stream(void* buf, std::size_t n, std::error_code& ec,
                          clock::time_point deadline = clock::time_point::max());
  /// send(2) with MSG_NOSIGNAL added.
  std::size_t send(const void* buf, std::size_t n, int flags, std::error_code& ec,
                   clock::time_point deadline = clock::time_point::max());
  /// accept4(2) on a listening socket: a new descriptor number (non-
  /// blocking, close-on-exec) for the caller to own, or -1 with `ec` set.
  int accept(std::error_code& ec, clock::time_point deadline = clock::time_point::max());

  /// Throwing forms: std::system_error naming the operation and descriptor.
  std::size_t read(void* buf, std::size_t n);
  std::size_t write(const void* buf, std::size_t n);

  /// Ends every wait on this descriptor, now and until clear_interrupt(), with
  /// std::errc::operation_canceled; the descriptor stays open. What
  /// cancel_on_stop calls on a stop request.
  void interrupt() noexcept;
  void clear_interrupt() noexcept;

  /// The low level for other calls: runs `op` (a non-blocking system call
  /// returning -1 with errno on failure) until it does not fail with EAGAIN,
  /// parking in between. `write` picks the direction waited for.
  template <class Op>
  ssize_t call(bool write, Op&& op, std::error_code& ec, clock::time_point deadline) {
    for (;;) {
      const ssize_t r = op();
      if (r >= 0) return r;
      if (!again(write, ec, deadline)) return -1;
    }
  }

 private:
  /// After a failed call: EINTR or EAGAIN → wait and return true (retry);
  /// otherwise set `ec` and return false.
  bool again(bool write, std::error_code& ec, clock::time_point deadline);
  clock::time_point effective(bool write, clock::time_point deadline) const noexcept;
  std::error_code wait_ready(bool write, clock::time_point deadline);
  std::optional<std::size_t> read_received(void* buf, std::size_t n, std::error_code& ec,
                                           clock::time_point deadline);
  bool closed() const noexcept;
  struct state;
  state* desc_ = nullptr;
};

/// Cancellation, as Go's contexts: while a cancel_on_stop lives, a stop request
/// on its token ends every wait on the descriptor (the current one, and later
/// ones) with std::errc::operation_canceled. The descriptor stays open and its
/// data where it was; destroying the guard lets waits run again.
///
///   io::cancel_on_stop guard(stream.descriptor(), stop_token);
///   stream.read_some(buf, n, ec);   // ec == operation_canceled after a stop
class cancel_on_stop {
 public:
  cancel_on_stop(descriptor& d, std::stop_token token) : d_(d), cb_(std::move(token), waker{&d}) {}
  ~cancel_on_stop() { d_.clear_interrupt(); }
  cancel_on_stop(const cancel_on_stop&) = delete;
  cancel_on_stop& operator=(const cancel_on_stop&) = delete;

 private:
  struct waker {
    descriptor* d;
    void operator()() const noexcept { d->interrupt(); }
  };
  descriptor& d_;
  std::stop_callback<waker> cb_;
};

/// Runs `f()` where it may block: on a plain thread it just calls f; on a
/// fiber it runs f on one of a bounded pool of helper threads while the fiber
/// parks (its worker runs other fibers), then returns f's value or rethrows
/// its exception. For calls that cannot be made non-blocking: file I/O,
/// getaddrinfo, foreign libraries. The pool grows on demand to
/// blocking_threads() threads (default 16, TESSERA_BLOCKING_THREADS in the
/// environment changes it); further calls queue, in order.
template <class F>
auto blocking(F&& f) -> decltype(f());

/// The helper-pool size blocking() grows to.
unsigned blocking_threads() noexcept;

namespace detail {
/// Runs `job(ctx)` on the helper pool and parks until it has run. Called on a fiber.
void run_blocking(void (*job)(void*), void* ctx);
bool on_fiber() noexcept;
}  // namespace detail

template <class F>
auto blocking(F&& f) -> decltype(f()) {
  using R = decltype(f());
  if (!detail::on_fiber()) return f();
  struct ctx_t {
    std::remove_reference_t<F>* fn = nullptr;
    std::conditional_t<std::is_void_v<R>, bool, std::optional<R>> value{};
    std::exception_ptr error{};
  } ctx;
  ctx.fn = &f;
  detail::run_blocking(
      [](void* p) {
        auto* c = static_cast<ctx_t*>(p);
        try {
          if constexpr (std::is_void_v<R>) {
            (*c->fn)();
          } else {
            c->value.emplace((*c->fn)());
          }
        } catch (...) {
          c->error = std::current_exception();
        }
      },
      &ctx);
  if (ctx.error != nullptr) std::rethrow_exception(ctx.error);
  if constexpr (!std::is_void_v<R>) return std::move(*ctx.value);
}

}  // namespace tessera::io

template <>
struct std::is_error_code_enum<tessera::io::error> : std::true_type {};
