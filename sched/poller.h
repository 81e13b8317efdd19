// sched/poller.h — the I/O poller of a runtime (epoll, edge-triggered; or
// io_uring, poller_uring.cpp: readiness by multishot poll, or completion —
// receives into provided buffers, sends and accepts in the ring, uring_io.cpp),
// and the per-descriptor record fibers park on (Go's pollDesc). The
// completion backend's wake-ups go through the same readiness words: a
// receive's or accept's completion notifies the read word after queueing
// what it brought, and a sender waits for its send in the write word, so the
// protocol below (and its deadlines, close and cancellation) holds for both.
//
// poll_desc: one per descriptor that a fiber has waited on; type-stable (pooled,
// never freed), so a readiness event for a descriptor closed meanwhile lands on
// a live record and costs at most a spurious wake-up. Per direction (read,
// write) one word:
//
//   0          idle: nobody waits, no readiness pending
//   kReady     readiness arrived (or close): the next waiter consumes it
//   waiter*    that caller is parked (or about to park) until readiness
//
// Protocol (no lost readiness, no lost wake-up):
//   waiter    after EAGAIN: CAS 0 -> self; then re-checks `closing`; parks
//             (with its deadline). Woken or timed out, CAS self -> 0: if that
//             fails a notifier replaced self with kReady, which it consumes
//             (CAS kReady -> 0) and retries the system call. A word found at
//             kReady before parking is consumed at once (retry).
//   notifier  (epoll event, io_uring poll completion, or close)
//             exchange(kReady); an old value that is a waiter gets unpark()ed.
//             Edge-triggered epoll and multishot poll report each transition
//             once; the sticky kReady keeps it until consumed.
//   close     sets `closing` (seq_cst) before notifying both directions; a
//             waiter re-checks `closing` after publishing itself, so one of the
//             two sees the other (Dekker).
// tests/model/poll_desc.pml model-checks this with SPIN (waiter, poller,
// closer, timeouts), and catches a plain-store publish and a notifier that
// does not unpark.
// A second caller that finds another waiter in the word gets busy: one waiter
// per direction at a time (callers serialise reads and writes of one
// descriptor, as Go's fdMutex does).
//
// Integration with the idle protocol (idle.cpp): once a descriptor is
// registered, a worker about to sleep becomes the runtime's one poll sleeper
// if nobody is (poll_sleeper CAS) and waits in epoll_pwait2 (timeout: its
// sleep deadline, in nanoseconds) instead of on its futex; wake_if_sleeping()
// writes the eventfd for a worker that sleeps there. Busy workers poll without
// blocking every kIoPollTicks of the CPU clock (worker.cpp), so ready sockets
// are not starved while fibers keep running (cooperatively: a fiber that
// never parks holds its worker).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

#include "tessera/detail/basic_spin_lock.h"
#include "tessera/detail/deadline.h"
#include "tessera/park.h"
#include "tessera/runtime_options.h"

namespace tessera::sched {

class runtime_impl;
class poller;

struct poll_desc {
  static constexpr std::uintptr_t kReady = 1;

  int fd = -1;
  std::atomic<std::uintptr_t> rd{0};
  std::atomic<std::uintptr_t> wr{0};
  std::atomic<bool> closing{false};
  std::atomic<bool> cancelled{false};  // a stop request ends waits (io::cancel_on_stop)
  /// Sticky: the poller saw the peer's end of stream, a hang-up or an error
  /// (set before the readiness it came with). A short read then does not mean
  /// an empty queue: the end of stream may still wait there, with no edge to
  /// come (io::descriptor::recv_stream).
  std::atomic<bool> peer_closed{false};
  /// Whose poller has it (null: none). Changed under the registration lock;
  /// read without it only as a hint.
  std::atomic<runtime_impl*> registered{nullptr};
  /// Bumped at each registration, under the registration lock: io_uring tags
  /// its polls with it, so a completion of an earlier registration (the
  /// record is recycled) is told from the current one's.
  std::uint16_t registration = 0;
  /// A readiness poll is armed for it (epoll: whenever registered; the
  /// completion backend arms one only for a readiness wait). Under the
  /// registration lock.
  std::atomic<bool> polled{false};
  poll_desc* next_free = nullptr;

  // ---- completion I/O (io_backend::io_uring; sched/uring_io.cpp) ----------
  /// The poller whose ring receives for it (set once, by the first
  /// completion read or accept; null: none). From then on every read goes
  /// through the ring's buffers, so that no byte is read out of order.
  std::atomic<poller*> rx_owner{nullptr};
  /// Guards the rx_ fields below and `accepted` (the reader, the reaper,
  /// close): held for one copy at most, never across a park.
  detail::basic_spin_lock<&detail::os_yield> rx_lock;
  /// A multishot receive (a listener's: accept) is in flight.
  bool rx_armed = false;
  /// Bumped at each arming and at close: a completion whose tag carries
  /// another value is stale (its buffer goes back to the ring, its accepted
  /// descriptor is closed).
  std::uint16_t rx_gen = 0;
  /// 0: open; 1: the end of stream arrived; < 0: -errno the receive ended with.
  std::int32_t rx_end = 0;
  /// Buffer ids received and not yet read, in order (-1: none), and the bytes
  /// of the first already read.
  std::int32_t rx_head = -1;
  std::int32_t rx_tail = -1;
  std::uint32_t rx_offset = 0;
  /// A listener's accepted descriptors not yet taken (allocated at its first
  /// completion accept).
  std::unique_ptr<std::deque<int>> accepted;
  /// Bytes received into a ring that ended (its runtime was destroyed)
  /// before they were read: read before anything else. Set under rx_lock.
  std::unique_ptr<std::string> rx_spill;
  std::atomic<bool> has_spill{false};
};

/// How a wait on a descriptor ended.
enum class io_wait : std::uint8_t { ready, timed_out, closed, busy, cancelled };

/// A fresh or recycled record for `fd` (process-wide pool).
poll_desc* new_poll_desc(int fd);
/// Returns a record to the pool. Precondition: the descriptor is closed and
/// unregistered; nobody waits on it.
void free_poll_desc(poll_desc* d) noexcept;

/// Parks the calling fiber (or, on a plain thread, polls the descriptor with
/// poll(2)) until `fd` is readable (`write` false) or writable, the deadline
/// passes (null: none) or the descriptor is closed.
io_wait wait_io(poll_desc& d, bool write, detail::deadline deadline);
/// The park half of wait_io, for a descriptor whose notifier is already in
/// place (a completion in flight): the readiness-word protocol alone, on a
/// fiber or a plain thread (which parks on its futex).
io_wait wait_word(poll_desc& d, bool write, detail::deadline deadline);

/// Drops a readiness that arrived with nobody waiting (kReady -> 0), before a
/// system call that will see the data it announced. Readiness that arrives
/// after it is kept, so a caller that then finds the queue drained may wait
/// without another system call (io::descriptor::recv_stream).
void consume_readiness(poll_desc& d, bool write) noexcept;
/// Marks both directions ready and wakes their waiters, after `closing` is set;
/// unregisters the descriptor from its poller.
void close_io(poll_desc& d) noexcept;
/// Sets `cancelled` and wakes both directions' waiters (the descriptor stays open).
void cancel_io(poll_desc& d) noexcept;
/// Readiness (or close) for one direction: sets kReady, unparks a waiter.
void notify_readiness(std::atomic<std::uintptr_t>& word) noexcept;
/// The lock that serialises registration, unregistration and a poller's end.
std::mutex& registration_lock() noexcept;

// ---- completion I/O (io_backend::io_uring; uring_io.cpp) ------------------
/// How a completion call ended: `wait` says why it stopped waiting; when it
/// is `ready`, `error` (an errno value, 0: none) or `value` (bytes; for
/// accept, the new descriptor) is the result.
struct completion_result {
  io_wait wait = io_wait::ready;
  int error = 0;
  std::int64_t value = 0;
};
/// The poller that runs completion I/O for the calling context, or null:
/// a fiber of a runtime whose backend is io_uring (or, for reads, any caller
/// once the descriptor reads through a ring: d.rx_owner).
poller* completion_poller(poll_desc& d, bool read) noexcept;
/// Reads up to `n` bytes of a stream (n == 0: waits until a read would not
/// wait): from the buffers its multishot
/// receive filled, parking until some arrive (the readiness word is the
/// wake-up); 0: end of stream. With the multishot receive not armed (never
/// yet, or the buffer ring ran dry) it calls recv(2) first, and arms the
/// receive once the socket is drained.
completion_result completion_recv(poller& p, poll_desc& d, void* buf, std::size_t n,
                                  detail::deadline deadline);
/// Sends up to `n` bytes as one send SQE (zero-copy above the runtime's
/// threshold), queued for the worker's next poll of the ring; parks until it
/// completes. A deadline, close() or interrupt() cancels it, and the caller
/// still waits for its completion: the kernel is done with `buf` on return.
completion_result completion_send(poller& p, poll_desc& d, const void* buf, std::size_t n,
                                  detail::deadline deadline);
/// Takes a descriptor accepted by the listener's multishot accept (non-
/// blocking, close-on-exec), parking until one comes.
completion_result completion_accept(poller& p, poll_desc& d, detail::deadline deadline);
/// Moves up to `n` bytes of d.rx_spill (see there) to `buf`; 0 if none.
std::size_t take_spill(poll_desc& d, void* buf, std::size_t n) noexcept;

/// The poller of one runtime: an epoll instance or an io_uring, created at its
/// first registration. The backend is resolved when the runtime is built.
class poller {
 public:
  /// Resolves `requested` (automatic: io_uring if it works here, see
  /// io_backend). Throws std::system_error if io_uring is required and the
  /// kernel refuses it.
  explicit poller(const runtime_options& opts);
  ~poller();
  poller(const poller&) = delete;
  poller& operator=(const poller&) = delete;

  /// Registers `d` with `owner`'s poller, unless it is registered already,
  /// and arms its readiness poll (edge-triggered, in and out) unless
  /// `arm_poll` is false or it is armed already. Throws std::system_error.
  static void register_desc(poll_desc& d, runtime_impl& owner, bool arm_poll = true);
  /// Unregisters `d` from whatever poller has it.
  static void unregister_desc(poll_desc& d) noexcept;
  /// Whether any descriptor was ever registered (then workers sleep in epoll).
  bool active() const noexcept { return active_.load(std::memory_order_acquire); }
  /// Waits up to `timeout` (negative: for ever, 0: not at all) for readiness
  /// and delivers it (unparking waiters). Returns the number of descriptors
  /// ready. The timeout keeps its nanoseconds (epoll_pwait2, io_uring's
  /// timespec); only a kernel without epoll_pwait2 (before 5.11) rounds it up
  /// to whole milliseconds.
  int poll(std::chrono::nanoseconds timeout) noexcept;
  /// Makes a poll() in progress (or the next) return.
  void wake() noexcept;
  /// Submits the SQEs queued since the last poll (completion backend), so
  /// that they do not wait for a poll that may not come: before a worker
  /// sleeps on its futex.
  void flush() noexcept;
  /// The completion backend's receive buffers lent out now, and how often
  /// a receive found none (runtime::statistics).
  std::uint32_t buffers_in_use() const noexcept;
  std::uint64_t buffers_ran_dry() const noexcept;
  /// Whether SQEs wait to be submitted (a hint).
  bool has_queued() const noexcept;
  /// Whether a non-blocking poll costs no system call while nothing is
  /// ready (an io_uring made with IORING_SETUP_TASKRUN_FLAG).
  bool cheap_poll() const noexcept;
  /// Whether the backend is one of io_uring's.
  bool uses_uring() const noexcept;
  /// What io_backend::automatic resolves to here.
  static io_backend automatic_backend() noexcept;
  /// The backend in use: epoll, io_uring or io_uring_poll.
  io_backend backend() const noexcept { return backend_; }
  /// How describe() names it.
  const char* backend_name() const noexcept;

  /// The one worker allowed to block in poll() at a time.
  std::atomic<bool> poll_sleeper{false};
  /// Serialises polls: non-blocking ones of busy workers, and the poll
  /// sleeper's from its last look at its sleep word to the end of its wait
  /// (so no other poll delivers the wake-up meant for it meanwhile).
  std::atomic<bool> polling{false};

  /// io_uring (sched/uring.h): the ring, its locks and its receive buffers;
  /// null with epoll.
  struct uring;
  /// The ring, made if it is not yet (throws std::system_error if the
  /// kernel refuses). Precondition: uses_uring().
  uring* ring();
  const runtime_options& options() const noexcept { return opts_; }

 private:
  void init();
  void add(poll_desc& d);
  void remove(poll_desc& d) noexcept;
  static bool uring_works(bool completion) noexcept;
  void uring_init();
  void uring_add(poll_desc& d);
  void uring_remove(poll_desc& d) noexcept;
  void uring_rearm(poll_desc& d, std::uint16_t registration) noexcept;
  void uring_wake() noexcept;
  int uring_poll(std::chrono::nanoseconds timeout) noexcept;
  void uring_destroy() noexcept;
  void uring_forget(poll_desc& d) noexcept;
  friend void notify_readiness(std::atomic<std::uintptr_t>& word) noexcept;

  io_backend backend_;
  runtime_options opts_;
  std::atomic<uring*> uring_{nullptr};  // set once, by init()
  std::once_flag once_;
  std::unordered_set<poll_desc*> descs_;  // registered here; under the registration lock
  int epfd_ = -1;
  int eventfd_ = -1;
  std::atomic<bool> active_{false};
};

}  // namespace tessera::sched
