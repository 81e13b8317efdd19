// The fiber scheduler (see scheduler.h for the queues, the idle protocol and the
// park/unpark state machine).
#include "scheduler.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <optional>
#include <stdexcept>
#include <string>

#include "tessera/detail/cpu.h"

namespace tessera::detail {
namespace {

using steady = std::chrono::steady_clock;

constexpr std::int32_t kEmpty = 0;
constexpr std::int32_t kNotified = 1;
constexpr std::int32_t kParked = -1;
constexpr std::int32_t kTimerFired = 2;

constexpr std::uint32_t kFairnessInterval = 64;  // picks between looks at older work
constexpr std::uint32_t kRunnextLimit = 16;      // runnext picks in a row
// Pending timers are checked against the clock at most once per this many CPU
// timestamp ticks (about 1-4 µs at 1-4 GHz), not at every pick: reading the
// steady clock took a fifth of a switch-heavy fiber workload (semabench, 32
// fibers, one sleeping timer pending) on a VM.
constexpr std::uint64_t kTimerCheckTicks = 4096;
// A runnext slot is stolen once it has held the same fiber, with its owner
// picking nothing, for this long. Long enough that a waker that parks soon (a
// hand-over) or computes briefly runs the woken fiber itself, on its warm core
// (at 5 µs and 20 µs, idle workers stole so often from a barging fiber mutex's
// unlocker that 8-128 fibers lost 10-20 % throughput; at 50 µs nothing);
// short enough that a fiber woken by a long computation soon runs elsewhere.
// Go waits ~3 µs before it steals a running P's runnext.
constexpr auto kRunnextStale = std::chrono::microseconds(50);
// While some worker is busy, a sleeping worker looks at the runnext slots this
// often; while it watches a full slot, once it may have gone stale.
constexpr auto kRunnextPoll = std::chrono::milliseconds(1);

constexpr std::size_t kRecordCache = 256;  // per worker, then back to the pool
constexpr std::size_t kStackCache = 256;

// A cheap, monotonic-enough timestamp for rate limiting (not for deadlines).
std::uint64_t cpu_ticks() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_ia32_rdtsc();
#else
  return static_cast<std::uint64_t>(steady::now().time_since_epoch().count());
#endif
}

constinit thread_local worker* tls_worker = nullptr;

// Process-wide, type-stable pool of fiber records: never freed (DESIGN.md).
struct record_pool {
  std::mutex mu;
  std::vector<fiber_record*> free;
};
record_pool& records() {
  static auto* pool = new record_pool;  // leaked on purpose: records outlive everything
  return *pool;
}

fiber_record* new_record() {
  {
    auto& pool = records();
    std::lock_guard lock(pool.mu);
    if (!pool.free.empty()) {
      fiber_record* f = pool.free.back();
      pool.free.pop_back();
      return f;
    }
  }
  auto* f = new fiber_record;  // never deleted: type-stable by design
  f->w.ops = &fiber_park_ops;
  f->w.context = f;
  return f;
}

void pool_records(std::vector<fiber_record*>& batch) {
  auto& pool = records();
  std::lock_guard lock(pool.mu);
  pool.free.insert(pool.free.end(), batch.begin(), batch.end());
  batch.clear();
}

void futex_sleep(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                 const steady::time_point* deadline) {
  timespec ts{};
  if (deadline != nullptr) {
    const auto since = deadline->time_since_epoch();
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(since);
    ts.tv_sec = static_cast<time_t>(secs.count());
    ts.tv_nsec = static_cast<long>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(since - secs).count());
  }
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG,
          expected, deadline != nullptr ? &ts : nullptr, nullptr, FUTEX_BITSET_MATCH_ANY);
}

void futex_wake_one(std::atomic<std::uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1,
          nullptr, nullptr, 0);
}

// A seq_cst fence; ThreadSanitizer does not model fences, so there we use an
// RMW on the variable read next, which gives the same Dekker guarantee.
inline int fenced_load(std::atomic<int>& v) noexcept {
#if defined(__SANITIZE_THREAD__)
  return v.fetch_add(0, std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return v.load(std::memory_order_relaxed);
#endif
}

fiber_record* as_record(waiter& w) noexcept {
  return static_cast<fiber_record*>(w.context);
}

// ---- the fiber path of the park façade ---------------------------------------
void fiber_park(waiter& w) {
  // Only this fiber moves its state away from kNotified, so a plain load tells
  // whether there is a permit to consume (and saves a locked RMW when there is none).
  if (w.state.load(std::memory_order_relaxed) == kNotified &&
      w.state.exchange(kEmpty, std::memory_order_acquire) == kNotified) {
    return;
  }
  current_worker()->block_current(post_action::park);
  w.state.exchange(kEmpty, std::memory_order_acquire);  // consume the permit that woke us
}

bool fiber_park_until(waiter& w, steady::time_point deadline) {
  if (w.state.exchange(kEmpty, std::memory_order_acquire) == kNotified) return true;
  if (steady::now() >= deadline) return false;
  fiber_record* f = as_record(w);
  worker* wk = current_worker();
  f->rt->add_timer(deadline, f);
  wk->block_current(post_action::park);
  f->timer_seq.fetch_add(1, std::memory_order_release);  // our timer entry is now stale
  const std::int32_t v = w.state.exchange(kEmpty, std::memory_order_acquire);
  if (v == kNotified) {
    f->rt->stale_timers.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  // The timer fired. An entry left from an earlier wait may fire early: report
  // that as a spurious wake-up, never as an early timeout.
  return steady::now() < deadline;
}

void fiber_unpark(waiter& w) noexcept {
  // acq_rel: release publishes the permit; acquire sees the record as the
  // parking side left it (its CAS to kParked is acq_rel).
  if (w.state.exchange(kNotified, std::memory_order_acq_rel) == kParked) {
    fiber_record* f = as_record(w);
    f->rt->schedule_woken(f);
  }
}

void fiber_yield(waiter&) {
  current_worker()->yield_current();
}

}  // namespace

const park_ops fiber_park_ops{&fiber_park,  &fiber_park_until, &fiber_unpark,
                              &fiber_yield, "fiber",           false};

// Not inlined, not analysed: a fiber may migrate between workers across any
// park, so the TLS read must happen afresh at every call.
[[gnu::noipa]] worker* current_worker() noexcept {
  return tls_worker;
}

void destroy_fls(std::vector<fls_entry>& map) noexcept {
  while (!map.empty()) {
    const fls_entry e = map.back();
    map.pop_back();
    if (e.value != nullptr) e.destroy(e.value);
  }
}

// ---- worker --------------------------------------------------------------------
worker::worker(runtime_impl& r, unsigned i)
    : rt(r), index(i), sightings_(r.opts.workers), steal_order_(r.topo.steal_order(i)) {
  fired_.reserve(16);
}

worker::~worker() {
  rt.stacks.give_batch(stack_cache_);
  pool_records(record_cache_);
}

void worker::start() {
  thread_ = std::thread([this] { thread_main(); });
}

void worker::join() {
  if (thread_.joinable()) thread_.join();
}

void worker::thread_main() {
  tls_worker = this;
  thread_waiter_ = detail::thread_waiter();
  detail::current_waiter_slot() = thread_waiter_;
  if (rt.opts.pin_workers) rt.topo.pin_current_thread(index);
  sched::alt_signal_stack alt;
#if TESSERA_TSAN
  sched_rec_.san.tsan_fiber = __tsan_get_current_fiber();
#endif
  for (;;) {
    fiber_record* f = find_work(false);
    if (f == nullptr) {
      if (rt.stopping.load(std::memory_order_acquire)) break;
      f = idle();
      if (f == nullptr) break;  // the Runtime stops
    }
    switch_to(f, post_action::none);
  }
  tls_worker = nullptr;
}

fiber_record* worker::find_work(bool look_at_runnext) {
  fiber_record* f = pick_local();
  if (f == nullptr) f = steal();
  if (f == nullptr && look_at_runnext) f = steal_stale_runnext();
  return f;
}

fiber_record* worker::idle() {
  // Other workers' runnext slots are looked at every 32nd spin (every few µs:
  // the owner writes that line at every pick, so each look costs it a miss)
  // and at every wake-up from sleep.
  rt.busy.fetch_sub(1, std::memory_order_seq_cst);
  fiber_record* f = nullptr;
  bool spin = true;
  while (f == nullptr && !rt.stopping.load(std::memory_order_acquire)) {
    if (spin) {
      // Spin phase: keep looking for `idle_spin`.
      rt.spinners.fetch_add(1, std::memory_order_seq_cst);
      const auto spin_until = steady::now() + rt.opts.idle_spin;
      for (unsigned i = 1;; ++i) {
        cpu_relax();
        f = find_work((i & 31) == 0);
        if (f != nullptr || rt.stopping.load(std::memory_order_relaxed)) break;
        if ((i & 15) == 0 && steady::now() >= spin_until) break;
      }
      rt.spinners.fetch_sub(1, std::memory_order_seq_cst);
      if (f != nullptr) break;
    }

    // Sleep phase: announce, re-check everything, then wait on the futex.
    sleep_word_.store(1, std::memory_order_seq_cst);
    rt.sleepers.fetch_add(1, std::memory_order_seq_cst);
    f = find_work(true);
    bool woken = true;
    if (f == nullptr && !rt.stopping.load(std::memory_order_seq_cst)) {
      // Deep (no poll) only while no worker is busy; see the idle protocol.
      deep_.store(true, std::memory_order_relaxed);
      rt.deep_sleepers.fetch_add(1, std::memory_order_seq_cst);
      const bool poll = rt.busy.load(std::memory_order_seq_cst) != 0;
      if (poll) {
        rt.deep_sleepers.fetch_sub(1, std::memory_order_relaxed);
        deep_.store(false, std::memory_order_relaxed);
      }
      rt.worker_sleeps.fetch_add(1, std::memory_order_relaxed);
      const auto next = rt.next_deadline.load(std::memory_order_seq_cst);
      steady::time_point deadline{steady::duration(next)};
      bool timed = next != runtime_impl::kNoDeadline;
      if (poll) {
        const auto poll_at = steady::now() + (watching_ ? kRunnextStale : kRunnextPoll);
        if (!timed || poll_at < deadline) deadline = poll_at;
        timed = true;
      }
      futex_sleep(&sleep_word_, 1, timed ? &deadline : nullptr);
      if (!poll) {
        rt.deep_sleepers.fetch_sub(1, std::memory_order_relaxed);
        deep_.store(false, std::memory_order_relaxed);
      }
      // A waker cleared sleep_word_; after a timeout (or a spurious return)
      // look once more without spinning.
      woken = sleep_word_.load(std::memory_order_relaxed) == 0;
    }
    rt.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    sleep_word_.store(0, std::memory_order_relaxed);
    spin = woken;
  }
  if (f == nullptr) return nullptr;
  rt.busy.fetch_add(1, std::memory_order_seq_cst);
  if (rt.deep_sleepers.load(std::memory_order_seq_cst) != 0) rt.wake_deep_sleeper();
  return f;
}

fiber_record* worker::drain_inbox() {
  fiber_record* list = inbox_.take_all();
  if (list == nullptr) return nullptr;
  fiber_record* first = list;
  for (fiber_record* f = first->link; f != nullptr;) {
    fiber_record* next = f->link;
    push_local(f);
    f = next;
  }
  return first;
}

fiber_record* worker::pick_local() {
  const std::uint32_t tick = tick_.load(std::memory_order_relaxed) + 1;
  tick_.store(tick, std::memory_order_relaxed);  // thieves read it: see steal_stale_runnext()
  if (rt.next_deadline.load(std::memory_order_relaxed) != runtime_impl::kNoDeadline) {
    const std::uint64_t t = cpu_ticks();
    if (t - timers_checked_at_ >= kTimerCheckTicks) {
      timers_checked_at_ = t;
      rt.fire_timers(*this);
    }
  }
  if (tick % kFairnessInterval == 0) {
    if (fiber_record* f = rt.global.pop()) return f;
    if (fiber_record* f = drain_inbox()) return f;
    if (fiber_record* f = deque_.steal()) return f;  // our own oldest
  }
  if (runnext_streak_ < kRunnextLimit) {
    if (fiber_record* f = take_runnext()) {
      ++runnext_streak_;
      return f;
    }
  }
  runnext_streak_ = 0;
  if (fiber_record* f = deque_.take()) return f;
  if (fiber_record* f = drain_inbox()) return f;
  if (fiber_record* f = rt.global.pop()) return f;
  return take_runnext();
}

fiber_record* worker::take_runnext() noexcept {
  // A plain load first: an empty slot (only we fill it) costs no RMW; so does
  // a full one on a lone worker, which has no thieves.
  fiber_record* f = runnext_.load(std::memory_order_relaxed);
  if (f == nullptr) return nullptr;
  if (steal_order_.empty()) {
    runnext_.store(nullptr, std::memory_order_relaxed);
    return f;
  }
  return runnext_.exchange(nullptr, std::memory_order_acquire);  // a thief may beat us to it
}

fiber_record* worker::steal() {
  for (unsigned v : steal_order_) {
    if (fiber_record* f = rt.workers[v]->deque_.steal()) {
      rt.steals.fetch_add(1, std::memory_order_relaxed);
      return f;
    }
  }
  return nullptr;
}

// A slot is stale when two looks at least kRunnextStale apart saw the same
// fiber in it and the same owner tick_: the owner has picked nothing since, so
// its current fiber woke this one and ran on instead of parking. (If the fiber
// left the slot and came back meanwhile, taking it is still just a steal.)
fiber_record* worker::steal_stale_runnext() {
  std::optional<steady::time_point> now;
  watching_ = false;
  for (unsigned v : steal_order_) {
    worker& victim = *rt.workers[v];
    runnext_sighting& seen = sightings_[v];
    fiber_record* f = victim.runnext_.load(std::memory_order_acquire);
    if (f == nullptr) {
      seen.fiber = nullptr;
      continue;
    }
    if (!now) now = steady::now();
    const std::uint32_t tick = victim.tick_.load(std::memory_order_relaxed);
    if (f != seen.fiber || tick != seen.tick) {
      seen = {f, tick, *now};
      watching_ = true;
      continue;
    }
    if (*now - seen.since < kRunnextStale) {
      watching_ = true;
      continue;
    }
    seen.fiber = nullptr;
    if (victim.runnext_.compare_exchange_strong(f, nullptr, std::memory_order_acq_rel,
                                                std::memory_order_relaxed)) {
      rt.steals.fetch_add(1, std::memory_order_relaxed);
      rt.runnext_steals.fetch_add(1, std::memory_order_relaxed);
      return f;
    }
  }
  return nullptr;
}

void worker::switch_to(fiber_record* next, post_action act) {
  fiber_record* from = current_;
  prev_ = from;
  post_ = act;
  current_ = next;
  next->last_worker.store(this, std::memory_order_relaxed);
  const bool to_sched = next == &sched_rec_;
  detail::current_waiter_slot() = to_sched ? thread_waiter_ : &next->w;
  auto& ov = sched::current_overflow_info();
  if (to_sched) {
    ov = {};
  } else {
    ov = {next->stack.map, next->stack.bottom(), next->id, next->stack.usable()};
  }
  sched::before_switch(from->san, next->san, act == post_action::finish);
  const sched::transfer_t t = sched::jump_fcontext(next->ctx, this);
  landed(t);  // on whichever worker resumed us: `this` may be stale now
}

void worker::landed(sched::transfer_t t) noexcept {
  static_cast<worker*>(t.data)->complete_switch(t.fctx);
}

void worker::complete_switch(sched::fcontext_t from) noexcept {
  fiber_record* p = prev_;
  sched::after_switch(current_->san, &p->san);
  p->ctx = from;
  const post_action act = post_;
  post_ = post_action::none;
  switch (act) {
    case post_action::none:
      break;
    case post_action::park: {
      // Our registers are saved only now: only now may anyone resume `p`.
      std::int32_t expected = kEmpty;
      if (!p->w.state.compare_exchange_strong(expected, kParked, std::memory_order_acq_rel,
                                              std::memory_order_acquire)) {
        push_local(p);  // an unpark or its timer came in during the switch: run again soon
      }
      break;
    }
    case post_action::yield:
      rt.global.push(p);
      rt.notify_work();
      break;
    case post_action::finish: {
      give_stack(p->stack);
      p->stack = {};
#if TESSERA_TSAN
      __tsan_destroy_fiber(p->san.tsan_fiber);
#endif
      p->san = {};
      runtime_impl& r = *p->rt;
      release_record(p);
      r.fiber_finished();
      break;
    }
  }
}

void worker::fiber_entry(sched::transfer_t t) {
  landed(t);
  fiber_record* self = static_cast<worker*>(t.data)->current_;
  try {
    self->body();
  } catch (...) {
    self->error = std::current_exception();
  }
  self->body.reset();
  destroy_fls(self->fls);
  if (self->error != nullptr && !self->joinable.load(std::memory_order_acquire)) {
    report_escaped(self);
  }
  current_worker()->finish_current();
}

void worker::finish_current() {
  fiber_record* me = current_;
  me->done.store(true, std::memory_order_seq_cst);
  if (waiter* j = me->joiner.load(std::memory_order_seq_cst)) unpark(j);
  fiber_record* next = pick_local();
  switch_to(next != nullptr ? next : &sched_rec_, post_action::finish);
  std::abort();  // unreachable: a finished fiber is never resumed
}

void worker::block_current(post_action act) {
  fiber_record* next = pick_local();
  switch_to(next != nullptr ? next : &sched_rec_, act);
}

void worker::yield_current() {
  fiber_record* next = pick_local();
  if (next == nullptr) return;  // nothing else to run here: keep going
  switch_to(next, post_action::yield);
}

void worker::push_local(fiber_record* f) {
  if (!deque_.push(f)) rt.global.push(f);
  rt.notify_work();
}

void worker::make_runnext(fiber_record* f) {
  // Only this worker fills the slot, so an empty slot stays empty until we
  // store: no RMW. A full one may be emptied by a thief at any moment.
  if (runnext_.load(std::memory_order_relaxed) == nullptr) {
    runnext_.store(f, std::memory_order_release);
  } else if (fiber_record* old = runnext_.exchange(f, std::memory_order_acq_rel)) {
    push_local(old);
  }
}

void worker::push_inbox(fiber_record* f) {
  inbox_.push(f);
  rt.remote_wakeups.fetch_add(1, std::memory_order_relaxed);
  if (!wake_if_sleeping()) rt.notify_work();
}

bool worker::wake_if_sleeping() noexcept {
  if (sleep_word_.load(std::memory_order_seq_cst) == 1 &&
      sleep_word_.exchange(0, std::memory_order_seq_cst) == 1) {
    futex_wake_one(&sleep_word_);
    return true;
  }
  return false;
}

void worker::push_fired(std::vector<fiber_record*>& fired) {
  // The deque is LIFO: push the latest deadline first so the earliest runs first.
  for (auto it = fired.rbegin(); it != fired.rend(); ++it) push_local(*it);
  fired.clear();
}

fiber_record* worker::take_record() {
  if (record_cache_.empty()) return new_record();
  fiber_record* f = record_cache_.back();
  record_cache_.pop_back();
  return f;
}

void worker::recycle(fiber_record* f) noexcept {
  if (record_cache_.size() >= kRecordCache) pool_records(record_cache_);
  record_cache_.push_back(f);
}

sched::stack_mem worker::take_stack() {
  if (stack_cache_.empty()) rt.stacks.take_batch(stack_cache_, 32);
  if (stack_cache_.empty()) return rt.stacks.take();
  const sched::stack_mem s = stack_cache_.back();
  stack_cache_.pop_back();
  return s;
}

void worker::give_stack(sched::stack_mem s) noexcept {
  if (stack_cache_.size() >= kStackCache) {
    for (std::size_t i = 0; i < kStackCache / 2; ++i) {
      rt.stacks.give(stack_cache_.back());
      stack_cache_.pop_back();
    }
  }
  stack_cache_.push_back(s);
}

void worker::report_escaped(fiber_record* f) {
  std::string what = "unknown exception";
  try {
    std::rethrow_exception(f->error);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  std::fprintf(stderr, "tessera: exception escaped detached fiber #%llu: %s\n",
               static_cast<unsigned long long>(f->id), what.c_str());
  std::terminate();
}

// ---- records shared with the public face -------------------------------------------
void release_record(fiber_record* f) noexcept {
  if (f->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (worker* w = current_worker()) {
    w->recycle(f);
  } else {
    std::vector<fiber_record*> one{f};
    pool_records(one);
  }
}

// ---- runtime_impl --------------------------------------------------------------------
runtime_impl::runtime_impl(const runtime_options& o)
    : opts(o), stacks(o.stack_size, o.guard_pages) {
  if (opts.workers > 4096) {
    throw std::invalid_argument("tessera::Runtime: workers = " + std::to_string(opts.workers) +
                                " exceeds the limit of 4096");
  }
  if (opts.stack_size > (std::size_t{1} << 30)) {
    throw std::invalid_argument(
        "tessera::Runtime: stack_size = " + std::to_string(opts.stack_size) +
        " bytes exceeds the limit of 1 GiB");
  }
  if (opts.idle_spin.count() < 0) {
    throw std::invalid_argument("tessera::Runtime: idle_spin must not be negative");
  }
  if (opts.workers == 0) opts.workers = topo.cores();
  topo.plan(opts.workers);
  if (opts.guard_pages) sched::install_overflow_handler();
}

runtime_impl::~runtime_impl() = default;

void runtime_impl::init_fiber(fiber_record* f, sched::stack_mem stack, fiber_task body,
                              bool is_joinable, worker* home) {
  f->stack = stack;
#if TESSERA_ASAN
  // A pooled stack may carry poison from frames its previous fiber left by an
  // exception or by switching away for good: start clean.
  ASAN_UNPOISON_MEMORY_REGION(stack.bottom(), stack.usable());
#endif
  f->ctx = sched::make_fcontext(stack.top(), stack.usable(), &worker::fiber_entry);
  f->san = {};
  f->san.stack_bottom = stack.bottom();
  f->san.stack_size = stack.usable();
#if TESSERA_TSAN
  f->san.tsan_fiber = __tsan_create_fiber(0);
#endif
  f->rt = this;
  f->id = next_id.fetch_add(1, std::memory_order_relaxed);
  f->body = std::move(body);
  f->joinable.store(is_joinable, std::memory_order_relaxed);
  f->refs.store(is_joinable ? 2 : 1, std::memory_order_relaxed);
  f->done.store(false, std::memory_order_relaxed);
  f->joiner.store(nullptr, std::memory_order_relaxed);
  f->error = nullptr;
  f->link = nullptr;
  f->last_worker.store(home, std::memory_order_relaxed);
  f->w.state.store(kEmpty, std::memory_order_relaxed);
  live.fetch_add(1, std::memory_order_relaxed);
  fibers_started.fetch_add(1, std::memory_order_relaxed);
}

fiber_record* runtime_impl::spawn(worker& w, fiber_task body, bool is_joinable) {
  fiber_record* f = w.take_record();
  sched::stack_mem stack;
  try {
    stack = w.take_stack();
  } catch (...) {
    w.recycle(f);
    throw;
  }
  init_fiber(f, stack, std::move(body), is_joinable, &w);
  w.push_local(f);
  return f;
}

void runtime_impl::schedule_woken(fiber_record* f) noexcept {
  worker* cur = current_worker();
  if (cur != nullptr && &cur->rt == this) {
    if (cur->on_fiber()) {
      cur->make_runnext(f);  // LIFO slot: runs when the waker parks
    } else {
      cur->push_local(f);
    }
    return;
  }
  // A remote waker is not a fiber of this Runtime, so nothing stops the woken
  // fiber from finishing the run — and run_root() from destroying the workers —
  // while we are still inside push_inbox(). run_root() waits for this count to
  // drop to zero before it tears the workers down.
  remote_inflight.fetch_add(1, std::memory_order_seq_cst);
  worker* home = f->last_worker.load(std::memory_order_relaxed);
  if (home == nullptr) home = workers.front().get();
  home->push_inbox(f);
  remote_inflight.fetch_sub(1, std::memory_order_release);
}

void runtime_impl::add_timer(steady::time_point deadline, fiber_record* f) {
  const auto ticks = deadline.time_since_epoch().count();
  bool earliest = false;
  {
    std::lock_guard lock(timer_mu);
    timers.push_back({deadline, f, f->timer_seq.load(std::memory_order_relaxed)});
    std::push_heap(timers.begin(), timers.end(), worker::later);
    if (ticks < next_deadline.load(std::memory_order_relaxed)) {
      next_deadline.store(ticks, std::memory_order_seq_cst);
      earliest = true;
    }
  }
  // A sleeping worker set its futex timeout from the old earliest deadline:
  // wake one so that it re-arms (the worker adding the timer may stay busy).
  if (earliest && fenced_load(sleepers) != 0) wake_one_sleeper();
}

void runtime_impl::fire_timers(worker& w) {
  const auto now = steady::now();
  if (now.time_since_epoch().count() < next_deadline.load(std::memory_order_relaxed)) return;
  std::unique_lock lock(timer_mu, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another worker is firing them
  auto& fired = w.fired_;
  while (!timers.empty() && timers.front().deadline <= now) {
    std::pop_heap(timers.begin(), timers.end(), worker::later);
    const timer_entry e = timers.back();
    timers.pop_back();
    if (e.fiber->timer_seq.load(std::memory_order_acquire) != e.seq) continue;  // stale
    // kParked: wake it. kEmpty with a current sequence: the fiber added this
    // timer and is still switching out (another worker fires timers too):
    // mark it, and its post-switch CAS to kParked fails and re-queues it.
    std::int32_t s = e.fiber->w.state.load(std::memory_order_acquire);
    while (s == kParked || s == kEmpty) {
      if (e.fiber->w.state.compare_exchange_weak(s, kTimerFired, std::memory_order_acq_rel,
                                                 std::memory_order_acquire)) {
        if (s == kParked) fired.push_back(e.fiber);
        break;
      }
    }
  }
  // Entries of waits that ended early linger until their deadline; drop them in
  // bulk when they are most of the heap.
  const std::size_t stale = stale_timers.load(std::memory_order_relaxed);
  if (stale > 64 && stale * 2 > timers.size()) {
    std::erase_if(timers, [](const timer_entry& e) {
      return e.fiber->timer_seq.load(std::memory_order_relaxed) != e.seq;
    });
    std::make_heap(timers.begin(), timers.end(), worker::later);
    stale_timers.store(0, std::memory_order_relaxed);
  }
  next_deadline.store(
      timers.empty() ? kNoDeadline : timers.front().deadline.time_since_epoch().count(),
      std::memory_order_seq_cst);
  lock.unlock();
  w.push_fired(fired);
}

void runtime_impl::notify_work() noexcept {
  if (workers.size() < 2) return;
  if (fenced_load(sleepers) == 0) return;
  if (spinners.load(std::memory_order_relaxed) != 0) return;  // a spinner will find it
  wake_one_sleeper();
}

void runtime_impl::wake_one_sleeper() noexcept {
  for (auto& w : workers) {
    if (w->wake_if_sleeping()) return;
  }
}

void runtime_impl::wake_deep_sleeper() noexcept {
  for (auto& w : workers) {
    if (w->deep_.load(std::memory_order_acquire) && w->wake_if_sleeping()) return;
  }
}

void runtime_impl::fiber_finished() noexcept {
  if (live.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    all_done.store(true, std::memory_order_release);
    unpark(run_waiter);
  }
}

void runtime_impl::run_root(fiber_task root) {
  if (running.exchange(true, std::memory_order_acq_rel)) {
    throw std::logic_error(
        "tessera::Runtime::run: this Runtime is already running (run() is not reentrant: "
        "start more fibers inside the root function instead)");
  }
  struct reset_running {
    std::atomic<bool>& flag;
    ~reset_running() { flag.store(false, std::memory_order_release); }
  } guard{running};

  stopping.store(false, std::memory_order_relaxed);
  all_done.store(false, std::memory_order_relaxed);
  live.store(0, std::memory_order_relaxed);
  timers.clear();
  next_deadline.store(kNoDeadline, std::memory_order_relaxed);
  run_waiter = self();
  workers.clear();
  for (unsigned i = 0; i < opts.workers; ++i) workers.push_back(std::make_unique<worker>(*this, i));

  fiber_record* f = new_record();
  try {
    init_fiber(f, stacks.take(), std::move(root), true, workers.front().get());
  } catch (...) {
    std::vector<fiber_record*> one{f};
    pool_records(one);
    workers.clear();
    throw;
  }
  global.push(f);
  busy.store(static_cast<int>(workers.size()), std::memory_order_relaxed);
  deep_sleepers.store(0, std::memory_order_relaxed);
  for (auto& w : workers) w->start();

  while (!all_done.load(std::memory_order_acquire)) park();

  stopping.store(true, std::memory_order_seq_cst);
  for (auto& w : workers) w->wake_if_sleeping();
  for (auto& w : workers) w->join();
  while (remote_inflight.load(std::memory_order_acquire) != 0) cpu_relax();
  workers.clear();

  std::exception_ptr error = std::move(f->error);
  f->error = nullptr;
  release_record(f);
  if (error != nullptr) std::rethrow_exception(error);
}

}  // namespace tessera::detail

namespace tessera::sched {

void os_yield() {
  sched_yield();
}

}  // namespace tessera::sched
