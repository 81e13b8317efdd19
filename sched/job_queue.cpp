// sched/job_queue.cpp — jobs on the scheduler: per-worker job deques by priority,
// the global job queues for work from outside, runner fibers, and helping.
//
// Why runners. A job that never parks should cost what a oneTBB task costs: a
// queue push and pop and a call — not a fiber record, a stack and two context
// switches. So a worker runs jobs one after the other, inline, on one fiber of
// its own, its *runner*. A job may still park (wait on a counter, lock a mutex,
// read a socket): its runner then parks with it, exactly as any fiber, and
// the worker takes another runner — its idle one, a spare, or a new record with
// a warm stack from the pools — for the jobs that follow. When the parked job
// resumes and ends, its runner goes on taking jobs wherever it now runs, and
// steps aside when there are none: it becomes that worker's idle runner, or a
// spare. So stacks are spent only on jobs that actually park, and there are
// never more runners than jobs parked at once plus one per worker.
//
// Fibers before jobs. A worker picks fibers first (they are resumed
// continuations, which often hold what jobs wait for), then a runner when a
// job is queued; a runner steps aside after every kRunnerBatch jobs when a
// fiber waits on its worker; and every kOlderWorkPickInterval-th pick (the
// fairness turn of pick_local) looks at jobs before the local fibers, so
// neither kind can starve the other.
//
// What keeps run() and stop() waiting. Counting every job in the runtime's
// `live` counter would make that one cache line bounce between the workers on
// every push and every end (docs/benchmarks.md measures what it cost
// fork-join). So only *active runners* count: a runner adds one when a
// worker hands it out and drops it when it steps aside, and a job queued by a
// fiber or runner is covered by its queuer until a runner takes it. When the
// count reaches zero, fiber_finished() looks at the job queues, and whether
// the count was raised meanwhile, before it declares the run over
// (runtime_impl::work_left; tests/model/run_drain.pml checks the protocol).
// Jobs from outside the runtime (plain threads) are counted one by one
// (`counted`), as fibers are.
//
// Priorities. take_job() scans high, normal, low: at each level its own deque
// (newest first), the global queue, then the other workers' deques (oldest
// first). Every kPriorityTurn picks start once at low and once at normal, so
// among any kPriorityTurn consecutive job picks of a worker, at least one goes
// to the lowest class that has work — the bound on starvation documented in
// tessera/jobs.h.
#include "internal.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "tessera/detail/job_queue.h"

namespace tessera::sched {

namespace {
constexpr std::uint32_t kRunnerBatch = 32;
constexpr std::uint32_t kPriorityTurn = 16;
// A fiber helps (runs a queued job nested on its own stack) only with at least
// this much stack left, or half its stack if that is less: deep recursions of
// nested waits then park instead, and their jobs run on fresh runners.
constexpr std::size_t kHelpStackRoom = 64 * 1024;
}  // namespace

job_node* worker::take_job() noexcept {
  const std::uint32_t k = ++job_picks_ % kPriorityTurn;
  const unsigned first = k == 0 ? 2U : k == kPriorityTurn / 2 ? 1U : 0U;
  const unsigned levels = rt.job_levels.load(std::memory_order_relaxed);
  for (unsigned i = 0; i < kJobPriorities; ++i) {
    const unsigned p = (first + i) % kJobPriorities;
    if ((levels & (1U << p)) == 0) continue;  // no job of this priority yet
    if (!jobs_[p].looks_empty()) {
      if (job_node* t = jobs_[p].take()) return t;
    }
    if (job_node* t = rt.global_jobs[p].pop()) return t;
    for (unsigned v : steal_order_) {
      auto& d = rt.workers[v]->jobs_[p];
      if (d.looks_empty()) continue;
      if (job_node* t = d.steal()) {
        worker_counters::add(counters.steals);
        return t;
      }
    }
  }
  return nullptr;
}

bool worker::has_job_work(bool others) const noexcept {
  for (unsigned p = 0; p < kJobPriorities; ++p) {
    if (!jobs_[p].looks_empty_seq_cst() || !rt.global_jobs[p].looks_empty()) return true;
    if (!others) continue;
    for (unsigned v : steal_order_) {
      if (!rt.workers[v]->jobs_[p].looks_empty_seq_cst()) return true;
    }
  }
  return false;
}

bool worker::has_fiber_work() const noexcept {
  return runnext_.load(std::memory_order_relaxed) != nullptr || bound_head_ != nullptr ||
         !deque_.looks_empty() || !inbox_.looks_empty() || !rt.global.looks_empty();
}

fiber_record* worker::acquire_runner() noexcept {
  fiber_record* r = runner_;
  if (r != nullptr) {
    runner_ = nullptr;
  } else if (!spare_runners_.empty()) {
    r = spare_runners_.back();
    spare_runners_.pop_back();
  } else {
    try {
      r = take_record();
      stack_mem stack = take_stack();
      rt.init_fiber(r, stack, unique_function([] { runner_main(); }), false, this, false);
    } catch (...) {
      if (r != nullptr) recycle(r);
      return nullptr;  // no memory for a stack: the jobs wait for a runner to come back
    }
  }
  // Active until it steps aside (post_action::idle_runner). seq_cst: ordered
  // before the runner's first take, for work_left().
  rt.add_live();
  return r;
}

bool runtime_impl::work_left() const noexcept {
  for (unsigned p = 0; p < kJobPriorities; ++p) {
    if (!global_jobs[p].looks_empty()) return true;
    for (const auto& w : workers) {
      if (!w->jobs_[p].looks_empty_seq_cst()) return true;
    }
  }
  return false;
}

void worker::execute(job_node* t) noexcept {
  const bool counted = t->counted;
  runtime_impl& r = rt;
  count_turn(current_);  // a new job is progress, not a stall
  worker_counters::add(counters.jobs_run);
  if (trace != nullptr) trace->add(trace_kind::job_begin);
  t->run(t);  // may park: `this` may be another worker's afterwards
  if (worker* now = current_worker(); now->trace != nullptr) now->trace->add(trace_kind::job_end);
  if (counted) r.fiber_finished();
}

// The body of a runner fiber. Holds nothing that needs destruction: an idle
// runner is reclaimed at teardown without being resumed (release_runners).
void worker::runner_main() {
  for (;;) {
    worker* w = current_worker();
    for (std::uint32_t ran = 1;; ++ran) {
      job_node* t = w->take_job();
      if (t == nullptr) break;
      w->execute(t);  // may park: we may come back on another worker
      w = current_worker();
      if (ran % kRunnerBatch == 0 && w->has_fiber_work()) break;
    }
    w->block_current(post_action::idle_runner);
  }
}

void worker::release_runners() noexcept {
  if (runner_ != nullptr) spare_runners_.push_back(std::exchange(runner_, nullptr));
  for (fiber_record* r : spare_runners_) {
    rt.stacks.give(r->stack);
    r->stack = {};
#if TESSERA_TSAN
    __tsan_destroy_fiber(r->san.tsan_fiber);
#endif
    r->san = {};
    r->body.reset();
    recycle(r);
  }
  spare_runners_.clear();
}

void worker::push_job_local(job_node* t) {
  if (!jobs_[t->priority].push(t)) rt.global_jobs[t->priority].push(t);
  rt.notify_work();
}

void runtime_impl::push_job(job_node* t) {
  if (t->priority >= kJobPriorities) t->priority = kJobPriorities - 1;
  const auto level = static_cast<std::uint8_t>(1U << t->priority);
  if ((job_levels.load(std::memory_order_relaxed) & level) == 0) {
    job_levels.fetch_or(level, std::memory_order_seq_cst);  // before the job can be seen
  }
  if (worker* w = current_worker(); w != nullptr && &w->rt == this) {
    t->counted = false;  // its queuer, a live fiber or runner, covers it
    w->push_job_local(t);
    return;
  }
  if (!started.load(std::memory_order_acquire) && !running.load(std::memory_order_acquire)) {
    throw std::logic_error(
        "tessera: a job was submitted to a runtime that is not running (call start(), or "
        "submit from inside run())");
  }
  t->counted = true;
  add_live();
  // As a remote wake-up: the workers may not be torn down while we push.
  remote_inflight.fetch_add(1, std::memory_order_seq_cst);
  global_jobs[t->priority].push(t);
  if (fenced_load(sleepers) != 0) wake_one_sleeper();
  remote_inflight.fetch_sub(1, std::memory_order_release);
}

// ---- the seam of tessera/detail/job_queue.h ---------------------------------------------
runtime_impl* current_runtime() noexcept {
  worker* w = current_worker();
  return w != nullptr ? &w->rt : nullptr;
}

unsigned worker_count(const runtime_impl* rt) noexcept {
  return rt->opts.workers;
}

void push_job(runtime_impl* rt, job_node* t) {
  rt->push_job(t);
}

bool run_one_job(runtime_impl* rt) {
  worker* w = current_worker();
  if (w == nullptr || &w->rt != rt || !w->on_fiber()) return false;
  const fiber_record* me = w->current();
  // The frame address, not a local's: under ASan a local may live on a fake stack.
  const auto room = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0)) -
                    reinterpret_cast<std::uintptr_t>(me->stack.bottom());
  if (room < std::min(kHelpStackRoom, me->stack.usable() / 2)) return false;
  job_node* t = w->take_job();
  if (t == nullptr) return false;
  w->execute(t);
  return true;
}

}  // namespace tessera::sched
