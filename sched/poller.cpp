// sched/poller.cpp — epoll poller and the descriptor wait protocol (poller.h).
#include "poller.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "internal.h"

namespace tessera::sched {
namespace {

// Pool of type-stable records: never freed, so a late event is harmless.
struct desc_pool {
  std::mutex mu;
  poll_desc* free = nullptr;
};
desc_pool& descs() {
  static auto* p = new desc_pool;  // leaked on purpose: records outlive everything
  return *p;
}

// A plain thread waits in poll(2), in slices, so that a close() from another
// thread (which poll does not see) ends the wait within one slice.
constexpr auto kThreadPollSlice = std::chrono::milliseconds(20);

io_wait thread_wait(poll_desc& d, bool write, detail::deadline deadline) {
  pollfd p{d.fd, static_cast<short>(write ? POLLOUT : POLLIN), 0};
  for (;;) {
    if (d.closing.load(std::memory_order_acquire)) return io_wait::closed;
    if (d.cancelled.load(std::memory_order_acquire)) return io_wait::cancelled;
    auto slice = kThreadPollSlice;
    if (deadline.has_value()) {
      const auto left = *deadline - steady::now();
      if (left <= left.zero()) return io_wait::timed_out;
      if (left < slice) slice = std::chrono::ceil<std::chrono::milliseconds>(left);
    }
    const int r = ::poll(&p, 1, static_cast<int>(slice.count()));
    // close() shuts a socket down, which wakes poll: report the close, not
    // what the shut-down socket would say.
    if (d.closing.load(std::memory_order_acquire)) return io_wait::closed;
    if (d.cancelled.load(std::memory_order_acquire)) return io_wait::cancelled;
    if (r > 0) return io_wait::ready;  // readable/writable, or an error the call will report
    if (r < 0 && errno != EINTR) return io_wait::ready;  // let the system call report it
  }
}

}  // namespace

// Readiness (or close) for one direction: see the protocol in poller.h.
void notify_readiness(std::atomic<std::uintptr_t>& word) noexcept {
  const std::uintptr_t old = word.exchange(poll_desc::kReady, std::memory_order_acq_rel);
  if (old > poll_desc::kReady) unpark(reinterpret_cast<waiter*>(old));
}
namespace {
void notify(std::atomic<std::uintptr_t>& word) noexcept {
  notify_readiness(word);
}
}  // namespace

// Registration, unregistration and a poller's end are serialised by one lock:
// a descriptor may outlive the runtime it was registered with.
std::mutex& registration_lock() noexcept {
  static auto* m = new std::mutex;  // leaked on purpose: used by late destructors
  return *m;
}

poll_desc* new_poll_desc(int fd) {
  poll_desc* d = nullptr;
  {
    auto& pool = descs();
    std::lock_guard lock(pool.mu);
    if (pool.free != nullptr) {
      d = pool.free;
      pool.free = d->next_free;
    }
  }
  if (d == nullptr) d = new poll_desc;  // never deleted: type-stable by design
  d->fd = fd;
  d->rd.store(0, std::memory_order_relaxed);
  d->wr.store(0, std::memory_order_relaxed);
  d->closing.store(false, std::memory_order_relaxed);
  d->cancelled.store(false, std::memory_order_relaxed);
  d->peer_closed.store(false, std::memory_order_relaxed);
  d->registered.store(nullptr, std::memory_order_relaxed);
  d->polled.store(false, std::memory_order_relaxed);
  d->next_free = nullptr;
  d->rx_owner.store(nullptr, std::memory_order_relaxed);
  {
    // Under its lock: a stale completion may be looking at the record (and
    // finds rx_armed false, which close left it).
    std::lock_guard rx(d->rx_lock);
    d->rx_armed = false;
    d->rx_end = 0;
    d->rx_head = d->rx_tail = -1;
    d->rx_offset = 0;
    d->rx_spill.reset();
  }
  return d;
}

void free_poll_desc(poll_desc* d) noexcept {
  auto& pool = descs();
  std::lock_guard lock(pool.mu);
  d->fd = -1;
  d->next_free = pool.free;
  pool.free = d;
}

io_wait wait_io(poll_desc& d, bool write, detail::deadline deadline) {
  worker* w = current_worker();
  if (w == nullptr || !w->on_fiber()) {
    const wait_scope scope(write ? "socket write" : "socket read", &d, d.fd);
    return thread_wait(d, write, deadline);
  }
  // A fiber: register with this runtime's poller the first time (and, where
  // the completion backend registered it without one, arm its poll).
  if (d.registered.load(std::memory_order_acquire) == nullptr ||
      !d.polled.load(std::memory_order_acquire)) {
    poller::register_desc(d, w->rt);
  }
  return wait_word(d, write, deadline);
}

io_wait wait_word(poll_desc& d, bool write, detail::deadline deadline) {
  const wait_scope scope(write ? "socket write" : "socket read", &d, d.fd);
  auto& word = write ? d.wr : d.rd;
  if (d.cancelled.load(std::memory_order_acquire)) return io_wait::cancelled;
  waiter* me = self();
  const auto mine = reinterpret_cast<std::uintptr_t>(me);
  for (;;) {
    std::uintptr_t s = word.load(std::memory_order_acquire);
    if (s == poll_desc::kReady) {
      if (word.compare_exchange_strong(s, 0, std::memory_order_acq_rel)) {
        return d.closing.load(std::memory_order_acquire) ? io_wait::closed : io_wait::ready;
      }
      continue;
    }
    if (s != 0) return io_wait::busy;  // another caller waits in this direction
    if (!word.compare_exchange_strong(s, mine, std::memory_order_seq_cst)) continue;
    // Published: a close from now on will notify us; one before, we see here.
    bool timed_out = false;
    if (!d.closing.load(std::memory_order_seq_cst) &&
        !d.cancelled.load(std::memory_order_seq_cst)) {
      if (!deadline.has_value()) {
        park();
      } else {
        timed_out = !park_until(*deadline);
      }
    }
    std::uintptr_t cur = mine;
    if (word.compare_exchange_strong(cur, 0, std::memory_order_acq_rel)) {
      // Nobody notified us: a spurious wake-up, a timeout, or the close we saw.
      if (d.closing.load(std::memory_order_acquire)) return io_wait::closed;
      if (d.cancelled.load(std::memory_order_acquire)) return io_wait::cancelled;
      if (timed_out || deadline.passed()) {
        return io_wait::timed_out;
      }
      continue;
    }
    // A notifier put kReady in our place: consume it (it may have unparked us
    // after we stopped waiting: that permit is a harmless spurious wake-up).
    word.compare_exchange_strong(cur, 0, std::memory_order_acq_rel);
    if (d.closing.load(std::memory_order_acquire)) return io_wait::closed;
    return d.cancelled.load(std::memory_order_acquire) ? io_wait::cancelled : io_wait::ready;
  }
}

void consume_readiness(poll_desc& d, bool write) noexcept {
  auto& word = write ? d.wr : d.rd;
  std::uintptr_t ready = poll_desc::kReady;
  // acquire: pairs with the notifier's exchange, as the waiter's consume does.
  if (word.load(std::memory_order_relaxed) == ready) {
    word.compare_exchange_strong(ready, 0, std::memory_order_acquire, std::memory_order_relaxed);
  }
}

void cancel_io(poll_desc& d) noexcept {
  d.cancelled.store(true, std::memory_order_seq_cst);
  notify(d.rd);
  notify(d.wr);
}

void close_io(poll_desc& d) noexcept {
  d.closing.store(true, std::memory_order_seq_cst);
  poller::unregister_desc(d);
  notify(d.rd);
  notify(d.wr);
}

// ---- poller ---------------------------------------------------------------------
namespace {
io_backend from_environment(io_backend requested) {
  if (requested != io_backend::automatic) return requested;
  const char* env = std::getenv("TESSERA_IO_BACKEND");
  if (env == nullptr || *env == '\0') return requested;
  const std::string v(env);
  if (v == "epoll") return io_backend::epoll;
  if (v == "io_uring") return io_backend::io_uring;
  if (v == "io_uring_poll") return io_backend::io_uring_poll;
  throw std::invalid_argument("tessera::runtime: TESSERA_IO_BACKEND='" + v +
                              "' is not 'epoll', 'io_uring' or 'io_uring_poll'");
}
}  // namespace

poller::poller(const runtime_options& opts) : backend_(from_environment(opts.io)), opts_(opts) {
  // automatic means the backend that measured faster here (io_backend).
  if (backend_ == io_backend::automatic) {
    backend_ = automatic_backend();
  } else if (backend_ == io_backend::io_uring_poll && !uring_works(false)) {
    throw std::system_error(ENOSYS, std::generic_category(),
                            "tessera::runtime: io_backend::io_uring_poll was asked for, but this "
                            "kernel refuses io_uring or its multishot poll (Linux 5.13)");
  } else if (backend_ == io_backend::io_uring && !uring_works(true)) {
    throw std::system_error(ENOSYS, std::generic_category(),
                            "tessera::runtime: io_backend::io_uring was asked for, but this kernel "
                            "refuses io_uring, its multishot receive or provided-buffer rings "
                            "(Linux 6.0)");
  }
}

const char* poller::backend_name() const noexcept {
  switch (backend_) {
    case io_backend::io_uring:
      return "io_uring (completion: multishot receive into provided buffers, batched sends, "
             "multishot accept)";
    case io_backend::io_uring_poll:
      return "io_uring (multishot poll)";
    default:
      return "epoll (edge-triggered)";
  }
}

bool poller::uses_uring() const noexcept {
  return backend_ == io_backend::io_uring || backend_ == io_backend::io_uring_poll;
}

poller::~poller() {
  {
    std::lock_guard lock(registration_lock());
    for (poll_desc* d : descs_) {
      if (uring_.load(std::memory_order_acquire) != nullptr) uring_forget(*d);
      d->registered.store(nullptr, std::memory_order_release);
    }
  }
  uring_destroy();
  if (epfd_ >= 0) ::close(epfd_);
  if (eventfd_ >= 0) ::close(eventfd_);
}

void poller::init() {
  if (uses_uring()) {
    std::call_once(once_, [this] { uring_init(); });
    return;
  }
  std::call_once(once_, [this] {
    epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0)
      throw std::system_error(errno, std::generic_category(), "tessera: epoll_create1");
    eventfd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (eventfd_ < 0) throw std::system_error(errno, std::generic_category(), "tessera: eventfd");
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ev.data.ptr = nullptr;  // the wake-up eventfd
    if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, eventfd_, &ev) != 0) {
      throw std::system_error(errno, std::generic_category(), "tessera: epoll_ctl(eventfd)");
    }
  });
}

void poller::register_desc(poll_desc& d, runtime_impl& owner, bool arm_poll) {
  std::lock_guard lock(registration_lock());
  runtime_impl* rt = d.registered.load(std::memory_order_relaxed);
  if (rt == nullptr) {
    ++d.registration;
    owner.io.init();
    owner.io.descs_.insert(&d);
    d.polled.store(false, std::memory_order_relaxed);
    d.registered.store(&owner, std::memory_order_release);
    rt = &owner;
    owner.io.active_.store(true, std::memory_order_release);
  }
  // Only epoll and poll-mode io_uring register for readiness at once; the
  // completion backend arms a poll at the first readiness wait.
  if (!d.polled.load(std::memory_order_relaxed) &&
      (arm_poll || rt->io.backend_ != io_backend::io_uring)) {
    rt->io.add(d);
    d.polled.store(true, std::memory_order_release);
  }
}

void poller::unregister_desc(poll_desc& d) noexcept {
  std::lock_guard lock(registration_lock());
  runtime_impl* rt = d.registered.load(std::memory_order_relaxed);
  if (rt == nullptr) return;
  rt->io.remove(d);
  rt->io.descs_.erase(&d);
  d.polled.store(false, std::memory_order_relaxed);
  d.registered.store(nullptr, std::memory_order_release);
}

void poller::add(poll_desc& d) {
  if (uses_uring()) {
    uring_add(d);
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.ptr = &d;
#if TESSERA_TSAN
  // The kernel orders a registration before its events, and ThreadSanitizer
  // knows it only for the epoll calls it intercepts (not epoll_pwait2): say
  // so, or the poller's use of the record races with its set-up.
  __tsan_release(&d);
#endif
  if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, d.fd, &ev) != 0) {
    throw std::system_error(
        errno, std::generic_category(),
        "tessera: registering descriptor " + std::to_string(d.fd) + " with the poller (epoll_ctl)");
  }
}

void poller::remove(poll_desc& d) noexcept {
  if (uses_uring()) {
    uring_remove(d);
    return;
  }
  if (epfd_ >= 0 && d.polled.load(std::memory_order_relaxed))
    ::epoll_ctl(epfd_, EPOLL_CTL_DEL, d.fd, nullptr);
}

namespace {
// epoll_pwait2 (Linux 5.11) takes the timeout in nanoseconds; epoll_wait in
// milliseconds, which would stretch a 50 µs wait (a sleeping worker watching
// a runnext slot, sched/idle.cpp) to a whole millisecond.
std::atomic<bool> no_epoll_pwait2{false};

int epoll_wait_for(int epfd, epoll_event* events, int max, std::chrono::nanoseconds timeout) {
  if (timeout.count() > 0 && !no_epoll_pwait2.load(std::memory_order_relaxed)) {
    const timespec ts{static_cast<time_t>(timeout.count() / 1'000'000'000),
                      static_cast<long>(timeout.count() % 1'000'000'000)};
    const int n = ::epoll_pwait2(epfd, events, max, &ts, nullptr);
    // ENOSYS: a kernel before 5.11; EPERM: a seccomp filter that predates
    // the call (container runtimes answer unknown system calls so).
    if (n >= 0 || (errno != ENOSYS && errno != EPERM)) return n;
    no_epoll_pwait2.store(true, std::memory_order_relaxed);
  }
  const int ms =
      timeout.count() < 0
          ? -1
          : static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(timeout).count());
  return ::epoll_wait(epfd, events, max, ms);
}
}  // namespace

int poller::poll(std::chrono::nanoseconds timeout) noexcept {
  if (!active()) return 0;
  if (uses_uring()) return uring_poll(timeout);
  epoll_event events[64];
  const int n = epoll_wait_for(epfd_, events, 64, timeout);
  int ready = 0;
  for (int i = 0; i < n; ++i) {
    auto* d = static_cast<poll_desc*>(events[i].data.ptr);
    if (d == nullptr) {
      std::uint64_t v;
      [[maybe_unused]] const auto r = ::read(eventfd_, &v, sizeof v);
      continue;
    }
#if TESSERA_TSAN
    __tsan_acquire(d);  // see add()
#endif
    const std::uint32_t e = events[i].events;
    // relaxed: published by the readiness exchange that follows.
    if ((e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0)
      d->peer_closed.store(true, std::memory_order_relaxed);
    if ((e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) notify(d->rd);
    if ((e & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0) notify(d->wr);
    ++ready;
  }
  return ready;
}

void poller::wake() noexcept {
  if (uses_uring()) {
    uring_wake();
    return;
  }
  if (eventfd_ < 0) return;
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto r = ::write(eventfd_, &one, sizeof one);
}

}  // namespace tessera::sched
