// sched/poller_uring.cpp — the io_uring backend of the poller (poller.h).
//
// Readiness, not completion: each registered descriptor gets one multishot
// IORING_OP_POLL_ADD (POLLIN | POLLOUT | POLLRDHUP), whose completions play
// the part of edge-triggered epoll events — the same notify on the same
// readiness words, so the wait protocol, its SPIN model and every caller are
// unchanged. A wake-up is a NOP submitted to the ring (user_data 0).
//
// Sharing the ring: submissions (register, unregister, re-arm) take sq_mu;
// reaping completions takes cq_mu — a blocking poll (the one poll sleeper)
// waits holding it, non-blocking polls only try it (whoever holds it delivers
// the events). Waiting uses io_uring_enter's extended argument (Linux 5.11),
// so a waiter never touches the submission queue. wake() submits a NOP, whose
// completion (user_data 0) ends the wait.
//
// A multishot poll ends by itself on an error, when the kernel cannot keep
// it, or when the thread that armed it exits (no IORING_CQE_F_MORE; io_uring
// cancels a thread's requests when it exits, and workers come and go with
// each run()). It is re-armed, by whoever reaps the completion, if the
// descriptor is still registered here *in the same registration*: each poll's
// user_data is the record's address with its registration number in the top
// 16 bits, and the check and the re-arm are one step under the registration
// lock, so neither a poll of an earlier registration of a recycled record nor
// one racing with unregistration is armed again (a poll left armed would keep
// a closed socket's file open). A completion for a descriptor unregistered
// meanwhile (its record is type-stable, maybe reused) is at most a spurious
// wake-up, as with epoll.
//
// Unregistering submits a poll_remove for the poll's tag; its own completion
// carries the same tag with the low bit set (records are 16-byte aligned).
// The kernel answers -EALREADY when the poll is completing at that moment (a
// wake-up's task work is pending): the multishot poll then stays armed, and
// with it the socket's file, so a closed socket would never send its FIN. The
// reaper submits the removal again until it is not EALREADY.
//
// The completion backend (io_backend::io_uring, uring_io.cpp) shares this
// ring and its reaper; its requests' completions are told apart by the kind
// in their user_data's low bits (uring.h). Its SQEs are queued without a
// system call and submitted by the next poll: a non-blocking poll submits
// and reaps in one io_uring_enter, and — the ring being made with
// IORING_SETUP_COOP_TASKRUN | TASKRUN_FLAG where the kernel has them — makes
// no system call at all when nothing is queued and the kernel has no task
// work for it.
#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <system_error>

#include "internal.h"
#include "uring.h"

namespace tessera::sched {

// An SQE, submitting what is queued first if the ring is full (the submit
// consumes the queue, so a slot is free after it). Null only if even that
// failed. Under sq_mu.
io_uring_sqe* try_get_sqe(io_uring& ring) noexcept {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  if (sqe == nullptr) {
    io_uring_submit(&ring);
    sqe = io_uring_get_sqe(&ring);
  }
  return sqe;
}

namespace {
constexpr unsigned kRingEntries = 256;
// Multishot receives post one completion per arrival: room for bursts (the
// kernel keeps what overflows, in order, until there is room).
constexpr unsigned kCompletionEntries = 4096;
constexpr unsigned kPollMask = POLLIN | POLLOUT | POLLRDHUP;

// As try_get_sqe(), but a full ring is an error.
io_uring_sqe* get_sqe(io_uring& ring) {
  io_uring_sqe* sqe = try_get_sqe(ring);
  if (sqe == nullptr) {
    throw std::system_error(EBUSY, std::generic_category(),
                            "tessera: io_uring submission queue full");
  }
  return sqe;
}

std::uint64_t tag_of(const poll_desc& d) noexcept {
  return make_tag(&d, kTagPoll, d.registration);
}

// Queues and submits a poll_remove of the poll tagged `tag`. Under sq_mu.
void remove_poll(io_uring& ring, std::uint64_t tag) noexcept {
  io_uring_sqe* sqe = try_get_sqe(ring);
  if (sqe == nullptr) return;  // cannot happen after a submit
  io_uring_prep_poll_remove(sqe, tag);
  io_uring_sqe_set_data64(sqe, (tag & ~kTagKindMask) | kTagPollRemove);
  io_uring_submit(&ring);
}

void arm(io_uring& ring, int fd, std::uint64_t tag, unsigned mask) {
#if TESSERA_TSAN
  // The kernel orders a submission before its completions, through memory
  // ThreadSanitizer does not see (the rings): say so, or the reaper's use of
  // the record races with its set-up.
  if (tag != 0) __tsan_release(address_of<void>(tag));
#endif
  io_uring_sqe* sqe = get_sqe(ring);
  io_uring_prep_poll_multishot(sqe, fd, mask);
  io_uring_sqe_set_data64(sqe, tag);
  const int r = io_uring_submit(&ring);
  if (r < 0)
    throw std::system_error(-r, std::generic_category(), "tessera: io_uring_submit (poll)");
}
}  // namespace

namespace {
// A multishot poll on an eventfd stays armed after it fires (IORING_CQE_F_MORE).
bool multishot_poll_works(io_uring& ring) noexcept {
  bool ok = false;
  const int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd < 0) return false;
  io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  io_uring_prep_poll_multishot(sqe, efd, POLLIN);
  io_uring_sqe_set_data(sqe, nullptr);
  const std::uint64_t one = 1;
  if (io_uring_submit(&ring) == 1 && ::write(efd, &one, sizeof one) == sizeof one) {
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec ts{1, 0};
    if (io_uring_wait_cqe_timeout(&ring, &cqe, &ts) == 0) {
      ok = cqe->res > 0 && (cqe->flags & IORING_CQE_F_MORE) != 0;
      io_uring_cqe_seen(&ring, cqe);
    }
  }
  ::close(efd);
  return ok;
}

// A multishot receive into a provided-buffer ring stays armed after it
// fills a buffer, and asynchronous cancel by descriptor is known.
bool multishot_receive_works(io_uring& ring) noexcept {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return false;
  constexpr unsigned kCount = 2;
  constexpr unsigned kSize = 64;
  alignas(4096) static char memory[kCount * kSize];
  void* r = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  bool ok = false;
  if (r != MAP_FAILED) {
    auto* br = static_cast<io_uring_buf_ring*>(r);
    io_uring_buf_ring_init(br);
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<std::uint64_t>(br);
    reg.ring_entries = kCount;
    reg.bgid = 7;
    if (io_uring_register_buf_ring(&ring, &reg, 0) == 0) {
      for (unsigned i = 0; i < kCount; ++i) {
        io_uring_buf_ring_add(br, memory + i * kSize, kSize, static_cast<unsigned short>(i),
                              io_uring_buf_ring_mask(kCount), static_cast<int>(i));
      }
      io_uring_buf_ring_advance(br, kCount);
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      io_uring_prep_recv_multishot(sqe, sv[0], nullptr, 0, 0);
      sqe->flags |= IOSQE_BUFFER_SELECT;
      sqe->buf_group = 7;
      io_uring_sqe_set_data64(sqe, 1);
      if (io_uring_submit(&ring) == 1 && ::write(sv[1], "x", 1) == 1) {
        io_uring_cqe* cqe = nullptr;
        __kernel_timespec ts{1, 0};
        if (io_uring_wait_cqe_timeout(&ring, &cqe, &ts) == 0) {
          ok = cqe->res == 1 && (cqe->flags & IORING_CQE_F_MORE) != 0 &&
               (cqe->flags & IORING_CQE_F_BUFFER) != 0;
          io_uring_cqe_seen(&ring, cqe);
        }
      }
      sqe = io_uring_get_sqe(&ring);
      io_uring_prep_cancel_fd(sqe, sv[0], IORING_ASYNC_CANCEL_ALL);
      io_uring_sqe_set_data64(sqe, 2);
      io_uring_submit(&ring);
      for (int seen = 0; seen < 2;) {  // the cancel's, and the receive's last
        io_uring_cqe* cqe = nullptr;
        __kernel_timespec ts{1, 0};
        if (io_uring_wait_cqe_timeout(&ring, &cqe, &ts) != 0) {
          ok = false;
          break;
        }
        if (cqe->user_data == 2 && cqe->res < 0) ok = false;  // no cancel by descriptor
        if (cqe->user_data == 2 || (cqe->flags & IORING_CQE_F_MORE) == 0) ++seen;
        io_uring_cqe_seen(&ring, cqe);
      }
      io_uring_unregister_buf_ring(&ring, 7);
    }
    ::munmap(r, 4096);
  }
  ::close(sv[0]);
  ::close(sv[1]);
  return ok;
}
}  // namespace

bool poller::uring_works(bool completion) noexcept {
  // Once per process and kind: a ring can be made, and does what the backend needs.
  static const bool poll_works = [] {
    io_uring ring{};
    if (io_uring_queue_init(4, &ring, 0) != 0) return false;
    const bool ok = multishot_poll_works(ring);
    io_uring_queue_exit(&ring);
    return ok;
  }();
  if (!completion || !poll_works) return poll_works;
  static const bool receive_works = [] {
    io_uring ring{};
    if (io_uring_queue_init(8, &ring, 0) != 0) return false;
    const bool ok = multishot_receive_works(ring);
    io_uring_queue_exit(&ring);
    return ok;
  }();
  return receive_works;
}

io_backend poller::automatic_backend() noexcept {
  // Measured on this project's benchmark machine (docs/benchmarks.md,
  // "Completion or readiness"): see there for the figures behind the pick.
  return io_backend::epoll;
}

void poller::uring_init() {
  auto* u = new uring;
  io_uring_params params{};
  params.flags = IORING_SETUP_CQSIZE | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
  params.cq_entries = kCompletionEntries;
  int r = io_uring_queue_init_params(kRingEntries, &u->ring, &params);
  if (r == -EINVAL) {  // a kernel before 5.19: without the task-run flags
    params = {};
    params.flags = IORING_SETUP_CQSIZE;
    params.cq_entries = kCompletionEntries;
    r = io_uring_queue_init_params(kRingEntries, &u->ring, &params);
  } else if (r == 0) {
    u->taskrun_flag = true;
  }
  if (r != 0) {
    delete u;
    throw std::system_error(-r, std::generic_category(), "tessera: io_uring_queue_init");
  }
  uring_.store(u, std::memory_order_release);
  active_.store(true, std::memory_order_release);
}

poller::uring* poller::ring() {
  init();
  return uring_.load(std::memory_order_acquire);
}

void poller::flush() noexcept {
  uring* u = uring_.load(std::memory_order_acquire);
  if (u == nullptr || u->queued.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard sq(u->sq_mu);
  if (u->queued.load(std::memory_order_relaxed) == 0) return;
  io_uring_submit(&u->ring);
  u->queued.store(0, std::memory_order_relaxed);
}

std::uint32_t poller::buffers_in_use() const noexcept {
  const uring* u = uring_.load(std::memory_order_acquire);
  return u != nullptr ? u->buffers.lent.load(std::memory_order_relaxed) : 0;
}

std::uint64_t poller::buffers_ran_dry() const noexcept {
  const uring* u = uring_.load(std::memory_order_acquire);
  return u != nullptr ? u->buffers.ran_dry.load(std::memory_order_relaxed) : 0;
}

bool poller::cheap_poll() const noexcept {
  const uring* u = uring_.load(std::memory_order_acquire);
  return u != nullptr && u->taskrun_flag;
}

bool poller::has_queued() const noexcept {
  const uring* u = uring_.load(std::memory_order_acquire);
  return u != nullptr && u->queued.load(std::memory_order_relaxed) != 0;
}

// A NOP's completion is posted by the submitting thread itself, during the
// submit, and wakes whoever waits for completions. (An eventfd polled through
// the ring would not do: a poll's completion runs as task work of the thread
// that armed it, and when that thread is a worker that has just exited at the
// end of a run, the poll sleeper was never woken to see it.)
void poller::uring_wake() noexcept {
  uring* u = uring_.load(std::memory_order_acquire);
  if (u == nullptr) return;
  std::lock_guard sq(u->sq_mu);
  io_uring_sqe* sqe = try_get_sqe(u->ring);
  if (sqe == nullptr) return;  // cannot happen after a submit
  io_uring_prep_nop(sqe);
  io_uring_sqe_set_data64(sqe, 0);
  io_uring_submit(&u->ring);  // with whatever else was queued
  u->queued.store(0, std::memory_order_relaxed);
}

void poller::uring_add(poll_desc& d) {
  if ((reinterpret_cast<std::uint64_t>(&d) & ~kAddressMask) != 0) {
    throw std::system_error(
        EFAULT, std::generic_category(),
        "tessera: io_uring poller: descriptor record above 2^48 or not aligned");
  }
  uring* u = uring_.load(std::memory_order_acquire);
  std::lock_guard lock(u->sq_mu);
  arm(u->ring, d.fd, tag_of(d), kPollMask);
}

// Under cq_mu, from uring_poll: a poll of `d` in registration `registration`
// ended without our poll_remove. Lock order: cq_mu, registration lock, sq_mu
// (register/unregister take the last two in the same order).
void poller::uring_rearm(poll_desc& d, std::uint16_t registration) noexcept {
  std::lock_guard reg(registration_lock());
  runtime_impl* rt = d.registered.load(std::memory_order_relaxed);
  if (rt == nullptr || &rt->io != this || d.registration != registration ||
      !d.polled.load(std::memory_order_relaxed)) {
    return;
  }
  uring* u = uring_.load(std::memory_order_acquire);
  std::lock_guard sq(u->sq_mu);
  try {
    arm(u->ring, d.fd, tag_of(d), kPollMask);
  } catch (...) {  // NOLINT(bugprone-empty-catch): its waiters were just notified
  }
}

void poller::uring_remove(poll_desc& d) noexcept {
  uring* u = uring_.load(std::memory_order_acquire);
  if (u == nullptr) return;
  std::lock_guard lock(u->sq_mu);
  if (d.rx_owner.load(std::memory_order_acquire) == this) {
    forget_completions(*u, d);  // cancels the poll too (everything on the descriptor)
  } else if (d.polled.load(std::memory_order_relaxed)) {
    remove_poll(u->ring, tag_of(d));
  }
}

// At the poller's end, under the registration lock: what d's ring received
// and nobody read moves to d.rx_spill (the buffers go with the ring), and d
// forgets the ring.
void poller::uring_forget(poll_desc& d) noexcept {
  if (d.rx_owner.load(std::memory_order_acquire) != this) return;
  buffer_ring& b = uring_.load(std::memory_order_acquire)->buffers;
  {
    std::lock_guard rx(d.rx_lock);
    std::string spill;
    if (d.rx_spill) spill = std::move(*d.rx_spill);
    for (std::int32_t bid = d.rx_head; bid >= 0; bid = b.next[bid]) {
      const std::uint32_t from = bid == d.rx_head ? d.rx_offset : 0;
      spill.append(b.data(bid) + from, b.len[bid] - from);
    }
    d.rx_head = d.rx_tail = -1;
    d.rx_offset = 0;
    d.rx_armed = false;
    ++d.rx_gen;
    if (d.accepted) {
      for (int fd : *d.accepted) ::close(fd);
      d.accepted->clear();
    }
    if (!spill.empty()) {
      d.rx_spill = std::make_unique<std::string>(std::move(spill));
      d.has_spill.store(true, std::memory_order_release);
    }
  }
  d.rx_owner.store(nullptr, std::memory_order_release);
}

int poller::uring_poll(std::chrono::nanoseconds timeout) noexcept {
  uring* u = uring_.load(std::memory_order_acquire);
  if (u == nullptr) return 0;
  std::unique_lock lock(u->cq_mu, std::defer_lock);
  if (timeout.count() == 0) {
    if (!lock.try_lock()) {  // someone else is delivering (maybe blocked in a wait):
      flush();               // what we queued must not wait for it
      return 0;
    }
  } else {
    lock.lock();
  }
  io_uring_cqe* cqe = nullptr;
  if (timeout.count() == 0) {
    // Submit what is queued and let the kernel run the completions it has
    // queued as task work (without it a peek at the ring saw readiness
    // late: HTTP at 100 connections ran at a third of epoll's rate) — one
    // system call, and none when there is nothing to submit and the kernel
    // says it has no task work (IORING_SQ_TASKRUN).
    const bool queued = u->queued.load(std::memory_order_relaxed) != 0;
    const bool taskrun =
        !u->taskrun_flag || (IO_URING_READ_ONCE(*u->ring.sq.kflags) & IORING_SQ_TASKRUN) != 0;
    if (queued) {
      std::lock_guard sq(u->sq_mu);
      io_uring_submit_and_get_events(&u->ring);
      u->queued.store(0, std::memory_order_relaxed);
    } else if (taskrun) {
      io_uring_get_events(&u->ring);
    }
  } else {
    flush();  // not under sq_mu while we wait: submitters and wake() need it
    if (timeout.count() < 0) {
      io_uring_wait_cqe(&u->ring, &cqe);
    } else {
      __kernel_timespec ts{timeout.count() / 1'000'000'000, timeout.count() % 1'000'000'000};
      io_uring_wait_cqe_timeout(&u->ring, &cqe, &ts);
    }
  }
  int ready = 0;
  unsigned head = 0, seen = 0;
  io_uring_for_each_cqe(&u->ring, head, cqe) {
    ++seen;
    const std::uint64_t tag = io_uring_cqe_get_data64(cqe);
    if (tag == 0) continue;  // a wake-up (uring_wake's NOP)
    switch (kind_of(tag)) {
      case kTagPoll:
        break;
      case kTagPollRemove:
        if (cqe->res == -EALREADY) {  // the poll was completing: it may stay armed
          std::lock_guard sq(u->sq_mu);
          remove_poll(u->ring, tag & ~kTagKindMask);
        }
        continue;
      case kTagRecv:
        complete_recv(*u, tag, *cqe);
        ++ready;
        continue;
      case kTagAccept:
        complete_accept(*u, tag, *cqe);
        ++ready;
        continue;
      case kTagOp:
        complete_op(tag, *cqe);
        ++ready;
        continue;
      default:  // a cancel's own completion
        continue;
    }
    const bool more = (cqe->flags & IORING_CQE_F_MORE) != 0;
    auto* d = address_of<poll_desc>(tag);
#if TESSERA_TSAN
    __tsan_acquire(d);  // see arm()
#endif
    const int res = cqe->res;
    const unsigned ev = res > 0 ? static_cast<unsigned>(res) : 0;
    // relaxed: published by the readiness exchange that follows.
    if ((ev & (POLLRDHUP | POLLHUP | POLLERR)) != 0)
      d->peer_closed.store(true, std::memory_order_relaxed);
    if (res < 0 || (ev & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) != 0) notify_readiness(d->rd);
    if (res < 0 || (ev & (POLLOUT | POLLHUP | POLLERR)) != 0) notify_readiness(d->wr);
    ++ready;
    if (!more) uring_rearm(*d, gen_of(tag));
  }
  io_uring_cq_advance(&u->ring, seen);
  return ready;
}

void poller::uring_destroy() noexcept {
  uring* u = uring_.exchange(nullptr, std::memory_order_acq_rel);
  if (u == nullptr) return;
  io_uring_queue_exit(&u->ring);
  destroy_buffers(*u);
  delete u;
}

}  // namespace tessera::sched
