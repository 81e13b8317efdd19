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
#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <system_error>

#include "internal.h"
#include "poller.h"

namespace tessera::sched {

struct poller::uring {
  io_uring ring{};
  std::mutex sq_mu;
  std::mutex cq_mu;
};

namespace {
constexpr unsigned kRingEntries = 256;
constexpr unsigned kPollMask = POLLIN | POLLOUT | POLLRDHUP;

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

// As try_get_sqe(), but a full ring is an error.
io_uring_sqe* get_sqe(io_uring& ring) {
  io_uring_sqe* sqe = try_get_sqe(ring);
  if (sqe == nullptr) {
    throw std::system_error(EBUSY, std::generic_category(),
                            "tessera: io_uring submission queue full");
  }
  return sqe;
}

// A registered descriptor's poll is tagged with the record's address (user
// space: below 2^47 on x86-64 and AArch64's 48-bit layouts) and, in the top
// 16 bits, its registration number.
constexpr int kRegistrationShift = 48;
constexpr std::uint64_t kAddressMask = (std::uint64_t{1} << kRegistrationShift) - 1;

/// The low bit of a poll_remove's user_data; the rest is the removed poll's tag.
constexpr std::uint64_t kRemoveBit = 1;

std::uint64_t tag_of(const poll_desc& d) noexcept {
  return reinterpret_cast<std::uint64_t>(&d) |
         (std::uint64_t{d.registration} << kRegistrationShift);
}

// Queues and submits a poll_remove of the poll tagged `tag`. Under sq_mu.
void remove_poll(io_uring& ring, std::uint64_t tag) noexcept {
  io_uring_sqe* sqe = try_get_sqe(ring);
  if (sqe == nullptr) return;  // cannot happen after a submit
  io_uring_prep_poll_remove(sqe, tag);
  io_uring_sqe_set_data64(sqe, tag | kRemoveBit);
  io_uring_submit(&ring);
}

void arm(io_uring& ring, int fd, std::uint64_t tag, unsigned mask) {
#if TESSERA_TSAN
  // The kernel orders a submission before its completions, through memory
  // ThreadSanitizer does not see (the rings): say so, or the reaper's use of
  // the record races with its set-up.
  if (tag != 0) __tsan_release(reinterpret_cast<void*>(tag & kAddressMask));
#endif
  io_uring_sqe* sqe = get_sqe(ring);
  io_uring_prep_poll_multishot(sqe, fd, mask);
  io_uring_sqe_set_data64(sqe, tag);
  const int r = io_uring_submit(&ring);
  if (r < 0)
    throw std::system_error(-r, std::generic_category(), "tessera: io_uring_submit (poll)");
}
}  // namespace

bool poller::uring_works() noexcept {
  // Once per process: a ring can be made, and a multishot poll on an eventfd
  // stays armed after it fires (IORING_CQE_F_MORE).
  static const bool works = [] {
    io_uring ring{};
    if (io_uring_queue_init(4, &ring, 0) != 0) return false;
    bool ok = false;
    const int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (efd >= 0) {
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
    }
    io_uring_queue_exit(&ring);
    return ok;
  }();
  return works;
}

void poller::uring_init() {
  auto* u = new uring;
  const int r = io_uring_queue_init(kRingEntries, &u->ring, 0);
  if (r != 0) {
    delete u;
    throw std::system_error(-r, std::generic_category(), "tessera: io_uring_queue_init");
  }
  uring_ = u;
}

// A NOP's completion is posted by the submitting thread itself, during the
// submit, and wakes whoever waits for completions. (An eventfd polled through
// the ring would not do: a poll's completion runs as task work of the thread
// that armed it, and when that thread is a worker that has just exited at the
// end of a run, the poll sleeper was never woken to see it.)
void poller::uring_wake() noexcept {
  uring* u = uring_;
  if (u == nullptr) return;
  std::lock_guard sq(u->sq_mu);
  io_uring_sqe* sqe = try_get_sqe(u->ring);
  if (sqe == nullptr) return;  // cannot happen after a submit
  io_uring_prep_nop(sqe);
  io_uring_sqe_set_data64(sqe, 0);
  io_uring_submit(&u->ring);
}

void poller::uring_add(poll_desc& d) {
  if ((reinterpret_cast<std::uint64_t>(&d) & (~kAddressMask | kRemoveBit)) != 0) {
    throw std::system_error(
        EFAULT, std::generic_category(),
        "tessera: io_uring poller: descriptor record above 2^48 or not aligned");
  }
  std::lock_guard lock(uring_->sq_mu);
  arm(uring_->ring, d.fd, tag_of(d), kPollMask);
}

// Under cq_mu, from uring_poll: a poll of `d` in registration `registration`
// ended without our poll_remove. Lock order: cq_mu, registration lock, sq_mu
// (register/unregister take the last two in the same order).
void poller::uring_rearm(poll_desc& d, std::uint16_t registration) noexcept {
  std::lock_guard reg(registration_lock());
  runtime_impl* rt = d.registered.load(std::memory_order_relaxed);
  if (rt == nullptr || &rt->io != this || d.registration != registration) return;
  std::lock_guard sq(uring_->sq_mu);
  try {
    arm(uring_->ring, d.fd, tag_of(d), kPollMask);
  } catch (...) {  // NOLINT(bugprone-empty-catch): its waiters were just notified
  }
}

void poller::uring_remove(poll_desc& d) noexcept {
  if (uring_ == nullptr) return;
  std::lock_guard lock(uring_->sq_mu);
  remove_poll(uring_->ring, tag_of(d));
}

int poller::uring_poll(std::chrono::nanoseconds timeout) noexcept {
  uring* u = uring_;
  if (u == nullptr) return 0;
  std::unique_lock lock(u->cq_mu, std::defer_lock);
  if (timeout.count() == 0) {
    if (!lock.try_lock()) return 0;  // someone else is delivering
  } else {
    lock.lock();
  }
  io_uring_cqe* cqe = nullptr;
  if (timeout.count() == 0) {
    // Enter the kernel so that it runs the completions it has queued as task
    // work: without it a peek at the ring saw readiness late (HTTP at 100
    // connections ran at a third of the epoll backend's rate).
    io_uring_get_events(&u->ring);
  } else {
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
    const bool more = (cqe->flags & IORING_CQE_F_MORE) != 0;
    if ((tag & kRemoveBit) != 0) {  // a poll_remove's own completion
      if (cqe->res == -EALREADY) {  // the poll was completing: it may stay armed
        std::lock_guard sq(u->sq_mu);
        remove_poll(u->ring, tag & ~kRemoveBit);
      }
      continue;
    }
    if (tag == 0) continue;  // a wake-up (uring_wake's NOP)
    auto* d = reinterpret_cast<poll_desc*>(tag & kAddressMask);
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
    if (!more) uring_rearm(*d, static_cast<std::uint16_t>(tag >> kRegistrationShift));
  }
  io_uring_cq_advance(&u->ring, seen);
  return ready;
}

void poller::uring_destroy() noexcept {
  if (uring_ == nullptr) return;
  io_uring_queue_exit(&uring_->ring);
  delete uring_;
  uring_ = nullptr;
}

}  // namespace tessera::sched
