// The public face of the fiber runtime (tessera/runtime.h) over the engine in sched/.
#include "tessera/runtime.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <system_error>
#include <thread>

#include "scheduler.h"
#include "tessera/detail/job_queue.h"

namespace tessera {
namespace detail {
using namespace tessera::sched;  // the engine this file is the public face of

/// The fiber running on the calling thread, or null on a plain thread.
fiber_record* current_fiber() noexcept {
  waiter* w = self();
  return w->ops == &fiber_park_ops ? static_cast<fiber_record*>(w->context) : nullptr;
}

namespace {

// Fiber-local storage of OS threads that are not fibers.
struct thread_fls {
  std::vector<fls_entry> map;
  ~thread_fls() { destroy_fls(map); }
};

}  // namespace

fiber_record* start_fiber(unique_function body, bool joinable) {
  worker* w = current_worker();
  if (w == nullptr) {
    throw std::logic_error(
        "tessera::fiber: fibers can only be started from a fiber of a running tessera::runtime "
        "(inside runtime::run)");
  }
  const auto site = reinterpret_cast<std::uintptr_t>(__builtin_return_address(0));
  return w->rt.spawn(*w, std::move(body), joinable, site);
}

void join_fiber(fiber_record* f) {
  waiter* me = self();
  f->joiner.store(me, std::memory_order_seq_cst);
  if (!f->done.load(std::memory_order_seq_cst)) {
    const wait_scope scope("join of fiber", f, static_cast<std::int64_t>(f->id));
    while (!f->done.load(std::memory_order_seq_cst)) park();
  }
  std::exception_ptr error = std::move(f->error);
  f->error = nullptr;
  release_record(f);
  if (error != nullptr) std::rethrow_exception(error);
}

void detach_fiber(fiber_record* f) noexcept {
  f->joinable.store(false, std::memory_order_seq_cst);
  // If the body already ended with an exception, nobody will ever see it: do what
  // std::thread does for an exception escaping a detached thread.
  if (f->done.load(std::memory_order_seq_cst) && f->error != nullptr) {
    std::fprintf(stderr, "tessera: exception escaped fiber #%llu, which was then detached\n",
                 static_cast<unsigned long long>(f->id));
    std::terminate();
  }
  release_record(f);
}

runtime_impl* impl_of(runtime& rt) noexcept {
  return rt.impl_.get();
}

std::uint64_t fiber_id_of(const fiber_record* f) noexcept {
  return f->id;
}

std::uint64_t current_fiber_id() noexcept {
  const fiber_record* f = current_fiber();
  return f != nullptr ? f->id : 0;
}

std::uint64_t fls_new_key() noexcept {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void*& fls_slot(std::uint64_t key, void (*destroy)(void*) noexcept) {
  std::vector<fls_entry>* map = nullptr;
  if (fiber_record* f = current_fiber()) {
    map = &f->fls;
  } else {
    thread_local thread_fls tfls;
    map = &tfls.map;
  }
  for (auto& e : *map) {
    if (e.key == key) return e.value;
  }
  map->push_back({key, nullptr, destroy});
  return map->back().value;
}

}  // namespace detail

// ---- runtime ----------------------------------------------------------------------
runtime::runtime(options opts) : impl_(std::make_unique<detail::runtime_impl>(opts)) {}
runtime::~runtime() {
  if (impl_->started.load(std::memory_order_acquire)) impl_->stop();
}

void runtime::start() {
  impl_->start();
}
void runtime::stop() {
  impl_->stop();
  if (impl_->deadlocked.load(std::memory_order_acquire)) throw deadlock_error(impl_->deadlock_report);
}
bool runtime::running() const noexcept {
  return impl_->running.load(std::memory_order_acquire);
}
// Out of line, and called from templates that are always inlined: the return
// address is the spawn call in the user's code (fiber_record::created_at).
detail::fiber_record* runtime::spawn_record(detail::unique_function body, bool joinable) {
  const auto site = reinterpret_cast<std::uintptr_t>(__builtin_return_address(0));
  return impl_->spawn_from_anywhere(std::move(body), joinable, site);
}

void runtime::run_root(detail::unique_function root) {
  impl_->run_root(std::move(root));
  if (impl_->deadlocked.load(std::memory_order_acquire)) throw deadlock_error(impl_->deadlock_report);
}
unsigned runtime::workers() const noexcept {
  return impl_->opts.workers;
}
const runtime::options& runtime::config() const noexcept {
  return impl_->opts;
}
void runtime::dump(std::ostream& os) const {
  impl_->dump(os);
}

void runtime::write_trace(std::ostream& os) const {
  if (impl_->opts.trace_events == 0) {
    throw std::logic_error(
        "tessera::runtime::write_trace: tracing is off (set runtime_options::trace_events)");
  }
  if (running()) {
    throw std::logic_error(
        "tessera::runtime::write_trace: the runtime is running (call it after run() returns or "
        "after stop())");
  }
  impl_->write_trace(os);
}

io_backend runtime::io() const noexcept {
  return impl_->io.backend();
}
const char* runtime::io_name() const noexcept {
  return impl_->io.backend_name();
}

std::string runtime::describe() const {
  return impl_->topo.describe() + (impl_->opts.pin_workers ? ", pinned" : ", not pinned") +
         "; I/O: " + impl_->io.backend_name() + ", registered at a descriptor's first fiber wait";
}

runtime::statistics runtime::stats() const {
  statistics s;
  s.fibers_started = impl_->fibers_started.load(std::memory_order_relaxed);
  s.runnext_steals = impl_->runnext_steals.load(std::memory_order_relaxed);
  s.remote_wakeups = impl_->remote_wakeups.load(std::memory_order_relaxed);
  s.sleeping_workers = static_cast<unsigned>(impl_->sleepers.load(std::memory_order_relaxed));
  s.deep_sleeping_workers =
      static_cast<unsigned>(impl_->deep_sleepers.load(std::memory_order_relaxed));
  s.timer_entries = impl_->timer_entries.load(std::memory_order_relaxed);
  s.io_buffers_in_use = impl_->io.buffers_in_use();
  s.io_buffers_ran_dry = impl_->io.buffers_ran_dry();
  for (unsigned i = 0; i < impl_->opts.workers; ++i) {
    const detail::worker_counters& c = impl_->counters[i];
    constexpr auto r = std::memory_order_relaxed;
    s.per_worker.push_back({c.runs(), c.parks.load(r), c.steals.load(r), c.sleeps.load(r),
                            std::chrono::nanoseconds(c.idle_ns.load(r)), c.io_events.load(r),
                            c.jobs_run.load(r)});
    s.steals += s.per_worker.back().steals;
    s.worker_sleeps += s.per_worker.back().sleeps;
  }
  return s;
}

// ---- fiber ------------------------------------------------------------------------
namespace {
[[noreturn]] void terminate_joinable(const char* what, std::uint64_t id) {
  std::fprintf(stderr,
               "tessera::fiber: %s a joinable fiber (#%llu); call join() or detach() first\n", what,
               static_cast<unsigned long long>(id));
  std::terminate();
}
}  // namespace

fiber& fiber::operator=(fiber&& o) noexcept {
  if (this != &o) {
    if (rec_ != nullptr) terminate_joinable("assigning over", detail::fiber_id_of(rec_));
    rec_ = std::exchange(o.rec_, nullptr);
  }
  return *this;
}

fiber::~fiber() {
  if (rec_ != nullptr) terminate_joinable("destroying", detail::fiber_id_of(rec_));
}

void fiber::join() {
  if (rec_ == nullptr) {
    throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                            "tessera::fiber::join: the fiber is not joinable");
  }
  if (detail::current_fiber() == rec_) {
    throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur),
                            "tessera::fiber::join: a fiber cannot join itself");
  }
  detail::join_fiber(std::exchange(rec_, nullptr));
}

void fiber::detach() {
  if (rec_ == nullptr) {
    throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                            "tessera::fiber::detach: the fiber is not joinable");
  }
  detail::detach_fiber(std::exchange(rec_, nullptr));
}

std::ostream& operator<<(std::ostream& os, fiber::id i) {
  if (i == fiber::id{}) return os << "fiber::id(none)";
  return os << i.value();
}

// ---- this_fiber -------------------------------------------------------------------
namespace this_fiber {

void yield() {
  yield_now();
}

fiber::id get_id() noexcept {
  return fiber::id(detail::current_fiber_id());
}

void set_name(std::string_view name) {
  waiter* me = self();
  if (me->ops == &detail::fiber_park_ops) {
    auto* f = static_cast<detail::fiber_record*>(me->context);
    f->set_name(name);
    if (!f->rt->traces.empty()) f->rt->note_trace_name(f->id, name);
    return;
  }
  // A thread: its kernel name, which the kernel cuts to 15 bytes.
  char buf[16];
  const std::size_t len = std::min(name.size(), sizeof buf - 1);
  std::memcpy(buf, name.data(), len);
  buf[len] = '\0';
  pthread_setname_np(pthread_self(), buf);
}

std::string get_name() {
  waiter* me = self();
  if (me->ops == &detail::fiber_park_ops) {
    return static_cast<const detail::fiber_record*>(me->context)->get_name();
  }
  char buf[16] = {};
  pthread_getname_np(pthread_self(), buf, sizeof buf);
  return buf;
}

void lock_os_thread() noexcept {
  detail::fiber_record* f = detail::current_fiber();
  if (f == nullptr) return;  // an OS thread never leaves itself
  if (f->bound_depth++ == 0) f->bound.store(sched::current_worker(), std::memory_order_relaxed);
}

void unlock_os_thread() noexcept {
  detail::fiber_record* f = detail::current_fiber();
  if (f == nullptr || f->bound_depth == 0) return;  // as Go's: no lock, no effect
  if (--f->bound_depth == 0) f->bound.store(nullptr, std::memory_order_relaxed);
}

bool os_thread_locked() noexcept {
  const detail::fiber_record* f = detail::current_fiber();
  return f == nullptr || f->bound_depth != 0;
}

void sleep_until(std::chrono::steady_clock::time_point deadline) {
  if (self()->ops != &detail::fiber_park_ops) {
    std::this_thread::sleep_until(deadline);
    return;
  }
  // Spurious wake-ups (stale unparks) just go round again.
  const wait_scope scope("sleep", nullptr);
  while (detail::steady_now() < deadline) park_until(deadline);
}

}  // namespace this_fiber
}  // namespace tessera
