// sched/uring_io.cpp — completion I/O on the io_uring backend (poller.h):
// receives into a provided-buffer ring, sends as SQEs batched with the next
// poll, multishot accept.
//
// Receive. A stream's first read_some sets rx_owner and from then on every
// read goes through here. While a multishot receive is armed, the kernel
// picks a buffer for each arrival and posts it; the reaper queues the buffer
// on the descriptor (rx_head..rx_tail, linked through buffer_ring::next) and
// notifies the read readiness word — the same word, and the same protocol,
// as a readiness wake-up (poller.h), so deadlines, close and interrupt end a
// wait exactly as they do there. The reader copies out under rx_lock and
// gives emptied buffers back. The receive ends by itself when the ring has
// no free buffer (-ENOBUFS), at the end of stream, on an error, or when the
// thread that armed it exits (io_uring cancels a thread's requests then); the
// bytes it did not take stay in the socket. With none armed, the reader calls
// recv(2) and arms a new one only when that finds the socket empty — so the
// order of bytes is the socket's, and a dry buffer ring costs a system call
// per read, never a byte.
//
// Send. An SQE with the caller's buffer, queued without a system call: the
// worker's next poll submits it with everything else queued — a busy
// worker's within kIoSubmitTicks; before a worker sleeps, or at once when
// another worker holds the poll, poller::flush does. The sender
// publishes itself in the write readiness word while the send is in flight,
// so close() and interrupt() wake it like any waiter; woken so, or at its
// deadline, it cancels the send and still waits for the send's completion
// before it returns — after return the kernel no longer touches the buffer.
// (tests/model/uring_op.pml checks this protocol, and catches a sender that
// returns at close without waiting.)
//
// Accept. A multishot accept queues the descriptors it accepts on the
// listener's record; at kAcceptQueueMax queued it is cancelled (the kernel's
// backlog holds the rest, as without it) and re-armed when the queue drains.
//
// Close. Unregistration cancels every request on the descriptor (by
// descriptor: poll, receive, accept, sends), bumps rx_gen so that completions
// still on their way are stale — a stale receive's buffer goes straight back
// to the ring, a stale accept's descriptor is closed — gives the unread
// buffers back and closes the unaccepted descriptors.
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "internal.h"
#include "uring.h"

namespace tessera::sched {
namespace {

constexpr std::size_t kAcceptQueueMax = 64;
constexpr std::uint16_t kBufferGroup = 0;

using rx_guard = std::lock_guard<detail::basic_spin_lock<&detail::os_yield>>;

// Makes and registers the buffer ring; on failure reads fall back to recv(2).
void make_buffers(poller::uring& u, unsigned count, std::size_t size) noexcept {
  buffer_ring& b = u.buffers;
  b.count = count;
  b.size = size;
  b.ring_bytes = count * sizeof(io_uring_buf);
  b.memory_bytes = count * size;
  void* r =
      ::mmap(nullptr, b.ring_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  void* m = ::mmap(nullptr, b.memory_bytes, PROT_READ | PROT_WRITE,
                   MAP_ANONYMOUS | MAP_PRIVATE | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED || m == MAP_FAILED) {
    u.buffers_error = errno;
    if (r != MAP_FAILED) ::munmap(r, b.ring_bytes);
    if (m != MAP_FAILED) ::munmap(m, b.memory_bytes);
    return;
  }
  b.ring = static_cast<io_uring_buf_ring*>(r);
  b.memory = static_cast<char*>(m);
  io_uring_buf_ring_init(b.ring);
  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<std::uint64_t>(b.ring);
  reg.ring_entries = count;
  reg.bgid = kBufferGroup;
  const int rc = io_uring_register_buf_ring(&u.ring, &reg, 0);
  if (rc != 0) {
    u.buffers_error = -rc;
    ::munmap(r, b.ring_bytes);
    ::munmap(m, b.memory_bytes);
    b.ring = nullptr;
    b.memory = nullptr;
    return;
  }
  b.next.assign(count, -1);
  b.len.assign(count, 0);
  const int mask = io_uring_buf_ring_mask(count);
  for (unsigned i = 0; i < count; ++i) {
    io_uring_buf_ring_add(b.ring, b.data(static_cast<std::int32_t>(i)), static_cast<unsigned>(size),
                          static_cast<unsigned short>(i), mask, static_cast<int>(i));
  }
  io_uring_buf_ring_advance(b.ring, static_cast<int>(count));
}

bool buffers_ready(poller& p, poller::uring& u) noexcept {
  std::call_once(u.buffers_once,
                 [&] { make_buffers(u, p.options().io_buffers, p.options().io_buffer_size); });
  return u.buffers.ring != nullptr;
}

// Queues an SQE built by `prep`, for the next poll to submit. Under nothing;
// takes sq_mu. False if the ring refused even after a submit.
template <class Prep>
bool queue_sqe(poller::uring& u, Prep&& prep, bool submit_now = false) noexcept {
  std::lock_guard sq(u.sq_mu);
  io_uring_sqe* sqe = try_get_sqe(u.ring);
  if (sqe == nullptr) return false;
  prep(sqe);
  if (submit_now) {
    io_uring_submit(&u.ring);
    u.queued.store(0, std::memory_order_relaxed);
  } else {
    u.queued.fetch_add(1, std::memory_order_relaxed);
  }
  return true;
}

// Copies up to n bytes out of d's queued buffers and gives the emptied ones
// back, a batch at a time. Under rx_lock.
std::size_t copy_out(buffer_ring& b, poll_desc& d, char* out, std::size_t n) {
  constexpr unsigned kBatch = 16;
  std::int32_t freed[kBatch];
  unsigned nfreed = 0;
  std::size_t got = 0;
  while (got < n && d.rx_head >= 0) {
    const std::int32_t bid = d.rx_head;
    const std::uint32_t avail = b.len[bid] - d.rx_offset;
    const std::size_t take = std::min<std::size_t>(avail, n - got);
    std::memcpy(out + got, b.data(bid) + d.rx_offset, take);
    got += take;
    d.rx_offset += static_cast<std::uint32_t>(take);
    if (d.rx_offset == b.len[bid]) {
      d.rx_head = b.next[bid];
      if (d.rx_head < 0) d.rx_tail = -1;
      d.rx_offset = 0;
      freed[nfreed++] = bid;
      if (nfreed == kBatch) {
        b.give_back(freed, nfreed);
        nfreed = 0;
      }
    }
  }
  b.give_back(freed, nfreed);
  return got;
}

io_wait stop_reason(const poll_desc& d) noexcept {
  if (d.closing.load(std::memory_order_acquire)) return io_wait::closed;
  if (d.cancelled.load(std::memory_order_acquire)) return io_wait::cancelled;
  return io_wait::ready;
}

// One recv(2) into buf, again if interrupted: true when `res` is the call's
// answer (bytes, the end, an error, or the close that shut the socket down
// under it), false when the socket is empty.
bool plain_recv(poll_desc& d, void* buf, std::size_t n, completion_result& res) noexcept {
  ssize_t r;
  do {
    r = ::recv(d.fd, buf, n, 0);
  } while (r < 0 && errno == EINTR);
  if (r > 0) {
    res.value = r;
    return true;
  }
  const int err = r == 0 ? 0 : errno;
  if (err == EAGAIN || err == EWOULDBLOCK) return false;
  // The end, or an error — unless a close() shut the socket down under us
  // meanwhile: then that is the answer.
  if ((res.wait = stop_reason(d)) == io_wait::ready) res.error = err;
  return true;
}

// Arms a multishot receive (or accept) unless one is armed. Lock order:
// sq_mu, then rx_lock (forget_completions, under sq_mu, takes rx_lock).
void arm(poller::uring& u, poll_desc& d, bool accept) noexcept {
  std::lock_guard sq(u.sq_mu);
  std::uint64_t tag;
  {
    const rx_guard rx(d.rx_lock);
    if (d.rx_armed || d.closing.load(std::memory_order_acquire)) return;
    d.rx_armed = true;
    ++d.rx_gen;
    tag = make_tag(&d, accept ? kTagAccept : kTagRecv, d.rx_gen);
  }
#if TESSERA_TSAN
  __tsan_release(&d);  // the kernel orders the submission before its completions
#endif
  io_uring_sqe* sqe = try_get_sqe(u.ring);
  if (sqe == nullptr) {
    const rx_guard rx(d.rx_lock);
    d.rx_armed = false;
    return;
  }
  if (accept) {
    io_uring_prep_multishot_accept(sqe, d.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  } else {
    io_uring_prep_recv_multishot(sqe, d.fd, nullptr, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = kBufferGroup;
  }
  io_uring_sqe_set_data64(sqe, tag);
  u.queued.fetch_add(1, std::memory_order_relaxed);
}

// Makes `p` the descriptor's completion owner (registering it with the
// caller's runtime, without a readiness poll, if it is not registered)
// unless it has one. False if another poller has it.
bool own(poller& p, poll_desc& d) {
  if (d.rx_owner.load(std::memory_order_acquire) == nullptr) {
    if (d.closing.load(std::memory_order_acquire)) return false;  // unregistered for good
    if (d.registered.load(std::memory_order_acquire) == nullptr) {
      if (worker* w = current_worker(); w != nullptr && &w->rt.io == &p) {
        poller::register_desc(d, w->rt, false);
      }
    }
    std::lock_guard lock(registration_lock());
    runtime_impl* rt = d.registered.load(std::memory_order_relaxed);
    if (d.rx_owner.load(std::memory_order_relaxed) == nullptr && rt != nullptr && &rt->io == &p) {
      d.rx_owner.store(&p, std::memory_order_release);
    }
  }
  return d.rx_owner.load(std::memory_order_acquire) == &p;
}

}  // namespace

void buffer_ring::give_back(const std::int32_t* bids, unsigned n) noexcept {
  if (n == 0) return;
  std::lock_guard lock(mu);
  const int mask = io_uring_buf_ring_mask(count);
  for (unsigned i = 0; i < n; ++i) {
#if TESSERA_TSAN
    // The kernel hands a buffer out again only after this: the reader that
    // gave it back and the reaper that next fills it are ordered through it.
    __tsan_release(&len[static_cast<std::size_t>(bids[i])]);
#endif
    io_uring_buf_ring_add(ring, data(bids[i]), static_cast<unsigned>(size),
                          static_cast<unsigned short>(bids[i]), mask, static_cast<int>(i));
  }
  io_uring_buf_ring_advance(ring, static_cast<int>(n));
  lent.fetch_sub(n, std::memory_order_relaxed);
}

poller* completion_poller(poll_desc& d, bool read) noexcept {
  if (read) {
    if (poller* p = d.rx_owner.load(std::memory_order_acquire)) return p;
  }
  worker* w = current_worker();
  if (w == nullptr || !w->on_fiber() || w->rt.io.backend() != io_backend::io_uring) {
    return nullptr;
  }
  return &w->rt.io;
}

completion_result completion_recv(poller& p, poll_desc& d, void* buf, std::size_t n,
                                  detail::deadline deadline) {
  completion_result res;
  // Closed (or interrupted) before we start: say so, before anything could
  // register the descriptor again or read what its shutdown left.
  if ((res.wait = stop_reason(d)) != io_wait::ready) return res;
  poller::uring* u = p.ring();
  if (u == nullptr || !own(p, d) || !buffers_ready(p, *u)) {
    // No ring here (or its buffers could not be made): a plain receive.
    if (n == 0) {
      res.wait = wait_io(d, false, deadline);
      return res;
    }
    while (!plain_recv(d, buf, n, res)) {
      if ((res.wait = wait_io(d, false, deadline)) != io_wait::ready) return res;
    }
    return res;
  }
  buffer_ring& b = u->buffers;
  for (;;) {
    consume_readiness(d, false);
    bool armed;
    {
      const rx_guard rx(d.rx_lock);
      if (n == 0 && (d.rx_head >= 0 || d.rx_end != 0)) return res;  // readable
      const std::size_t got = copy_out(b, d, static_cast<char*>(buf), n);
      if (got > 0) {
        res.value = static_cast<std::int64_t>(got);
      } else if (d.rx_end != 0) {
        if (d.rx_end < 0) {
          res.error = -d.rx_end;  // sticky, as recv(2) after a reset
          if (const io_wait why = stop_reason(d); why != io_wait::ready) {
            res.error = 0;  // the close's doing: say closed
            res.wait = why;
          }
        }
        res.value = 0;
      }
      if (got > 0 || d.rx_end != 0) return res;
      armed = d.rx_armed;
    }
    if ((res.wait = stop_reason(d)) != io_wait::ready) return res;
    if (!armed) {
      // (n == 0, a wait for readability: straight to arming, then waiting.)
      if (n > 0 && plain_recv(d, buf, n, res)) return res;
      arm(*u, d, false);
      continue;  // bytes may have come meanwhile: look before waiting
    }
    if ((res.wait = wait_word(d, false, deadline)) != io_wait::ready) return res;
  }
}

completion_result completion_send(poller& p, poll_desc& d, const void* buf, std::size_t n,
                                  detail::deadline deadline) {
  completion_result res;
  poller::uring* u = p.ring();
  // Publish ourselves as the write direction's waiter: close() and
  // interrupt() wake us through it. A readiness left there is dropped (the
  // send does not need it).
  auto& word = d.wr;
  waiter* me = self();
  const auto mine = reinterpret_cast<std::uintptr_t>(me);
  for (;;) {
    std::uintptr_t s = word.load(std::memory_order_acquire);
    if (s == poll_desc::kReady) {
      word.compare_exchange_strong(s, 0, std::memory_order_acq_rel);
      continue;
    }
    if (s != 0) {
      res.wait = io_wait::busy;
      return res;
    }
    if (word.compare_exchange_strong(s, mine, std::memory_order_seq_cst)) break;
  }
  uring_op op;
  op.who = me;
  const std::size_t zc = p.options().send_zc_threshold;
  op.zero_copy = zc != 0 && n >= zc;
  const std::uint64_t tag = make_tag(&op, kTagOp, 0);
#if TESSERA_TSAN
  __tsan_release(&op);  // the kernel orders the submission before its completion
#endif
  bool queued = false;
  if (stop_reason(d) == io_wait::ready) {
    queued = queue_sqe(*u, [&](io_uring_sqe* sqe) {
      if (op.zero_copy) {
        io_uring_prep_send_zc(sqe, d.fd, buf, n, MSG_NOSIGNAL, 0);
      } else {
        io_uring_prep_send(sqe, d.fd, buf, n, MSG_NOSIGNAL);
      }
      io_uring_sqe_set_data64(sqe, tag);
    });
  }
  const wait_scope scope("socket write", &d, d.fd);
  bool cancel_sent = false;
  bool timed_out = false;
  while (queued && !op.done.load(std::memory_order_acquire)) {
    // A notifier (close, interrupt) replaced us with kReady: publish
    // ourselves again, then look at why (seq_cst: the closer sets `closing`
    // before it notifies; one of us sees the other).
    std::uintptr_t s = poll_desc::kReady;
    word.compare_exchange_strong(s, mine, std::memory_order_seq_cst);
    const bool stop = stop_reason(d) != io_wait::ready;
    if ((stop || timed_out || deadline.passed()) && !cancel_sent) {
      cancel_sent = true;
      queue_sqe(
          *u,
          [&](io_uring_sqe* sqe) {
            io_uring_prep_cancel64(sqe, tag, 0);
            io_uring_sqe_set_data64(sqe, kTagIgnore);
          },
          true);
      continue;
    }
    if (cancel_sent || !deadline.has_value()) {
      park();
    } else if (!park_until(*deadline)) {
      timed_out = true;
    }
  }
  // Leave the word: a notifier may have put kReady in our place.
  std::uintptr_t cur = mine;
  if (!word.compare_exchange_strong(cur, 0, std::memory_order_acq_rel)) {
    word.compare_exchange_strong(cur, 0, std::memory_order_acq_rel);
  }
  if (!queued) {
    res.wait = stop_reason(d);
    if (res.wait == io_wait::ready) res.error = EBUSY;  // the ring refused the SQE
    return res;
  }
  if (op.result >= 0) {
    res.value = op.result;  // bytes sent, even if a cancel came too late
    return res;
  }
  // Failed: after close() or interrupt(), whatever the shut-down socket
  // said, that is the answer (as on the readiness path).
  res.wait = stop_reason(d);
  if (res.wait != io_wait::ready) return res;
  if (op.result == -ECANCELED || op.result == -EINTR) {
    res.wait = io_wait::timed_out;
    return res;
  }
  res.error = static_cast<int>(-op.result);
  return res;
}

completion_result completion_accept(poller& p, poll_desc& d, detail::deadline deadline) {
  completion_result res;
  if ((res.wait = stop_reason(d)) != io_wait::ready) return res;
  poller::uring* u = p.ring();
  if (!own(p, d)) {
    res.error = EXDEV;  // another runtime's listener: the caller accepts by accept4
    return res;
  }
  for (;;) {
    consume_readiness(d, false);
    bool armed;
    {
      const rx_guard rx(d.rx_lock);
      if (d.accepted && !d.accepted->empty()) {
        res.value = d.accepted->front();
        d.accepted->pop_front();
        return res;
      }
      if (d.rx_end < 0) {  // out of descriptors, say: the caller backs off
        res.error = -d.rx_end;
        d.rx_end = 0;
        return res;
      }
      armed = d.rx_armed;
    }
    if ((res.wait = stop_reason(d)) != io_wait::ready) return res;
    if (!armed) {
      arm(*u, d, true);
      p.flush();  // a listener's first accept: do not wait for a poll
    }
    if ((res.wait = wait_word(d, false, deadline)) != io_wait::ready) return res;
  }
}

std::size_t take_spill(poll_desc& d, void* buf, std::size_t n) noexcept {
  if (!d.has_spill.load(std::memory_order_acquire)) return 0;
  const rx_guard rx(d.rx_lock);
  if (!d.rx_spill) return 0;
  const std::size_t got = std::min(n, d.rx_spill->size());
  std::memcpy(buf, d.rx_spill->data(), got);
  d.rx_spill->erase(0, got);
  if (d.rx_spill->empty()) {
    d.rx_spill.reset();
    d.has_spill.store(false, std::memory_order_release);
  }
  return got;
}

// ---- the reaper's side ------------------------------------------------------------
namespace {
// What a completion's tag points to: a type-stable descriptor record or a
// sender's operation, set up before the submission.
template <class T>
T* completed_object(std::uint64_t tag) noexcept {
  auto* p = address_of<T>(tag);
#if TESSERA_TSAN
  __tsan_acquire(p);  // the kernel orders the submission before its completions
#endif
  return p;
}
}  // namespace

void complete_recv(poller::uring& u, std::uint64_t tag, const io_uring_cqe& cqe) noexcept {
  auto* d = completed_object<poll_desc>(tag);
  const bool more = (cqe.flags & IORING_CQE_F_MORE) != 0;
  const bool has_buffer = (cqe.flags & IORING_CQE_F_BUFFER) != 0;
  const auto bid = static_cast<std::int32_t>(cqe.flags >> IORING_CQE_BUFFER_SHIFT);
  buffer_ring& b = u.buffers;
  if (has_buffer) b.lent.fetch_add(1, std::memory_order_relaxed);
  {
    const rx_guard rx(d->rx_lock);
    if (d->rx_gen != gen_of(tag) || !d->rx_armed) {
      // Stale: the descriptor was closed (and maybe reused) meanwhile.
      if (has_buffer) b.give_back(&bid, 1);
      return;
    }
    if (cqe.res > 0 && has_buffer) {
#if TESSERA_TSAN
      __tsan_acquire(&b.len[static_cast<std::size_t>(bid)]);  // see buffer_ring::give_back
#endif
      b.len[bid] = static_cast<std::uint32_t>(cqe.res);
      b.next[bid] = -1;
      if (d->rx_tail >= 0) {
        b.next[d->rx_tail] = bid;
      } else {
        d->rx_head = bid;
      }
      d->rx_tail = bid;
    } else if (has_buffer) {
      b.give_back(&bid, 1);
    }
    if (cqe.res == -ENOBUFS) b.ran_dry.fetch_add(1, std::memory_order_relaxed);
    if (cqe.res == 0) {
      d->rx_end = 1;
    } else if (cqe.res < 0 && cqe.res != -ENOBUFS && cqe.res != -ECANCELED && cqe.res != -EINTR) {
      d->rx_end = cqe.res;
    }
    if (!more) d->rx_armed = false;
  }
  notify_readiness(d->rd);
}

void complete_accept(poller::uring& u, std::uint64_t tag, const io_uring_cqe& cqe) noexcept {
  auto* d = completed_object<poll_desc>(tag);
  const bool more = (cqe.flags & IORING_CQE_F_MORE) != 0;
  bool full = false;
  {
    const rx_guard rx(d->rx_lock);
    if (d->rx_gen != gen_of(tag) || !d->rx_armed) {
      if (cqe.res >= 0) ::close(cqe.res);  // accepted for a listener closed meanwhile
      return;
    }
    if (cqe.res >= 0) {
      if (!d->accepted) d->accepted = std::make_unique<std::deque<int>>();
      d->accepted->push_back(cqe.res);
      full = more && d->accepted->size() >= kAcceptQueueMax;
    } else if (cqe.res != -ECANCELED && cqe.res != -EINTR) {
      d->rx_end = cqe.res;
    }
    if (!more) d->rx_armed = false;
  }
  if (full) {
    // Enough queued: let the kernel's backlog hold the rest. The accept's
    // last completion (-ECANCELED, or one more descriptor) clears rx_armed.
    std::lock_guard sq(u.sq_mu);
    if (io_uring_sqe* sqe = try_get_sqe(u.ring)) {
      io_uring_prep_cancel64(sqe, tag, 0);
      io_uring_sqe_set_data64(sqe, kTagIgnore);
      u.queued.fetch_add(1, std::memory_order_relaxed);
    }
  }
  notify_readiness(d->rd);
}

void complete_op(std::uint64_t tag, const io_uring_cqe& cqe) noexcept {
  auto* op = completed_object<uring_op>(tag);
  if ((cqe.flags & IORING_CQE_F_NOTIF) == 0) op->result = cqe.res;
  // A zero-copy send completes twice: its result (with F_MORE), then the
  // notification that the kernel is done with the buffer.
  if ((cqe.flags & IORING_CQE_F_MORE) != 0) return;
  waiter* who = op->who;
  op->done.store(true, std::memory_order_release);  // op may die from here on
  unpark(who);                                      // type-stable: harmless if late
}

void forget_completions(poller::uring& u, poll_desc& d) noexcept {
  if (io_uring_sqe* sqe = try_get_sqe(u.ring)) {
    io_uring_prep_cancel_fd(sqe, d.fd, IORING_ASYNC_CANCEL_ALL);
    io_uring_sqe_set_data64(sqe, kTagIgnore);
    io_uring_submit(&u.ring);
    u.queued.store(0, std::memory_order_relaxed);
  }
  std::vector<std::int32_t> freed;
  {
    const rx_guard rx(d.rx_lock);
    ++d.rx_gen;
    d.rx_armed = false;
    for (std::int32_t bid = d.rx_head; bid >= 0; bid = u.buffers.next[bid]) freed.push_back(bid);
    d.rx_head = d.rx_tail = -1;
    d.rx_offset = 0;
    if (d.accepted) {
      for (int fd : *d.accepted) ::close(fd);
      d.accepted->clear();
    }
  }
  u.buffers.give_back(freed.data(), static_cast<unsigned>(freed.size()));
}

void destroy_buffers(poller::uring& u) noexcept {
  buffer_ring& b = u.buffers;
  if (b.ring != nullptr) ::munmap(b.ring, b.ring_bytes);
  if (b.memory != nullptr) ::munmap(b.memory, b.memory_bytes);
  b.ring = nullptr;
  b.memory = nullptr;
}

}  // namespace tessera::sched
