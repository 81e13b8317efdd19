// sched/runtime_impl.cpp — the engine's lifetime: options checked, workers built and
// started, fibers initialised and spawned, and run_root's drain and teardown.
#include "internal.h"

#include <stdexcept>
#include <string>

namespace tessera::sched {

// ---- runtime_impl --------------------------------------------------------------------
runtime_impl::runtime_impl(const runtime_options& o)
    : opts(o),
      io(o),
      stacks(o.stack_size, o.guard_pages ? (o.guard_size != 0 ? o.guard_size : 1) : 0) {
  if (opts.workers > 4096) {
    throw std::invalid_argument("tessera::runtime: workers = " + std::to_string(opts.workers) +
                                " exceeds the limit of 4096");
  }
  if (opts.stack_size > (std::size_t{1} << 30)) {
    throw std::invalid_argument(
        "tessera::runtime: stack_size = " + std::to_string(opts.stack_size) +
        " bytes exceeds the limit of 1 GiB");
  }
  if (opts.guard_size > (std::size_t{1} << 30)) {
    throw std::invalid_argument(
        "tessera::runtime: guard_size = " + std::to_string(opts.guard_size) +
        " bytes exceeds the limit of 1 GiB");
  }
  if (opts.io_buffers == 0 || opts.io_buffers > 32768 ||
      (opts.io_buffers & (opts.io_buffers - 1)) != 0) {
    throw std::invalid_argument(
        "tessera::runtime: io_buffers = " + std::to_string(opts.io_buffers) +
        " is not a power of two from 1 to 32768");
  }
  if (opts.io_buffer_size < 256 || opts.io_buffer_size > (std::size_t{1} << 20)) {
    throw std::invalid_argument(
        "tessera::runtime: io_buffer_size = " + std::to_string(opts.io_buffer_size) +
        " bytes is outside 256 bytes to 1 MiB");
  }
  if (opts.idle_spin.count() < 0) {
    throw std::invalid_argument("tessera::runtime: idle_spin must not be negative");
  }
  if (opts.io_idle_spin.count() < 0) {
    throw std::invalid_argument("tessera::runtime: io_idle_spin must not be negative");
  }
  if (opts.deadlock_grace.count() < 0) {
    throw std::invalid_argument("tessera::runtime: deadlock_grace must not be negative");
  }
  if (opts.stall_threshold.count() < 0) {
    throw std::invalid_argument(
        "tessera::runtime: stall_threshold must not be negative (0 turns the report off)");
  }
  if (opts.workers == 0) opts.workers = topo.cores();
  topo.plan(opts.workers);
  counters = std::make_unique<worker_counters[]>(opts.workers);
  if (opts.trace_events > 0) {
    for (unsigned i = 0; i < opts.workers; ++i)
      traces.push_back(std::make_unique<trace_ring>(opts.trace_events));
  }
  if (opts.guard_pages) install_overflow_handler();
  if (opts.dump_on_sigquit) register_sigquit_dump(this);
}

void runtime_impl::note_trace_name(std::uint64_t fiber, std::string_view name) {
  std::lock_guard lock(trace_names_mu);
  trace_names.emplace_back(fiber, name);
}

void runtime_impl::write_trace(std::ostream& os) const {
  std::vector<const trace_ring*> rings;
  for (const auto& r : traces) rings.push_back(r.get());
  std::lock_guard lock(trace_names_mu);
  write_trace_json(os, rings, trace_names);  // a later name of the same fiber wins
}

runtime_impl::~runtime_impl() {
  if (opts.dump_on_sigquit) unregister_sigquit_dump(this);
}

void runtime_impl::init_fiber(fiber_record* f, stack_mem stack, unique_function body,
                              bool is_joinable, worker* home, bool counted, std::uintptr_t site) {
  f->stack = stack;
#if TESSERA_ASAN
  // A pooled stack may carry poison from frames its previous fiber left by an
  // exception or by switching away for good: start clean.
  ASAN_UNPOISON_MEMORY_REGION(stack.bottom(), stack.usable());
#endif
  f->ctx = make_fcontext(stack.top(), stack.usable(), &worker::fiber_entry);
  f->san = {};
  f->san.stack_bottom = stack.bottom();
  f->san.stack_size = stack.usable();
#if TESSERA_TSAN
  f->san.tsan_fiber = __tsan_create_fiber(0);
#endif
  f->rt = this;
  // Process-wide, so that ids of different runtimes' fibers never compare
  // equal; in a simulation, its ordinal (1, 2, ... in creation order), so
  // that its trace, its deadlock report and every replay name it alike.
  static std::atomic<std::uint64_t> next_fiber_id{1};
  f->sim_ordinal = sim != nullptr ? ++sim->fibers : 0;
  f->id = sim != nullptr ? f->sim_ordinal : next_fiber_id.fetch_add(1, std::memory_order_relaxed);
  f->overflow = {stack.map, stack.bottom(), f->id, stack.usable()};
  f->body = std::move(body);
  f->joinable.store(is_joinable, std::memory_order_relaxed);
  f->refs.store(is_joinable ? 2 : 1, std::memory_order_relaxed);
  f->done.store(false, std::memory_order_relaxed);
  f->joiner.store(nullptr, std::memory_order_relaxed);
  f->error = nullptr;
  f->lang = {};  // no exception in flight, errno 0: as a new thread starts
  f->link = nullptr;
  f->last_worker.store(home, std::memory_order_relaxed);
  f->bound.store(nullptr, std::memory_order_relaxed);
  f->bound_depth = 0;
  f->w.state.store(kEmpty, std::memory_order_relaxed);
  ++f->w.generation;  // a new owner of a possibly recycled record
  f->listed_id.store(f->id, std::memory_order_relaxed);
  f->listed_runner.store(!counted, std::memory_order_relaxed);
  f->created_at.store(site, std::memory_order_relaxed);
  f->sim_polling = false;
  f->name[0].store('\0', std::memory_order_relaxed);
  f->listed_in.store(this, std::memory_order_release);
  if (counted) {
    add_live();
    fibers_started.fetch_add(1, std::memory_order_relaxed);
  }
}

fiber_record* runtime_impl::spawn(worker& w, unique_function body, bool is_joinable,
                                  std::uintptr_t site) {
  fiber_record* f = w.take_record();
  stack_mem stack;
  try {
    stack = w.take_stack();
  } catch (...) {
    w.recycle(f);
    throw;
  }
  init_fiber(f, stack, std::move(body), is_joinable, &w, true, site);
  if (w.trace != nullptr)
    w.trace->add(trace_kind::create, f->id, w.on_fiber() ? w.current()->id : 0);
  w.push_local(f);
  if (sim != nullptr) [[unlikely]]
    w.sim_switch_point(switch_point::spawn);
  return f;
}

void runtime_impl::fiber_finished() noexcept {
  const std::uint64_t now = live.fetch_sub(1, std::memory_order_seq_cst) - 1;
  if ((now & kLiveCount) != 0) return;
  // No fiber and no active runner: only queued jobs can be left (job_queue.cpp).
  // If the queues are empty and `live` has not been raised since our
  // decrement (same epoch, still zero), nobody was alive meanwhile to queue a
  // job or to run one: the run is over. Otherwise whoever raised it, or the
  // runner that takes the queued job, brings it back to zero and looks again.
  // (Comparing the count alone is not enough: a runner may queue a job, step
  // aside to zero and be handed out again between our two looks;
  // tests/model/run_drain.pml.)
  if (jobs_used() && (work_left() || live.load(std::memory_order_seq_cst) != now)) {
    return;
  }
  if (!all_done.exchange(true, std::memory_order_acq_rel)) unpark(run_waiter);
}

void runtime_impl::start_workers(const char* who) {
  if (running.exchange(true, std::memory_order_acq_rel)) {
    throw std::logic_error(std::string(who) +
                           ": this runtime is already running (run() is not reentrant, and "
                           "start() needs a stopped runtime)");
  }
  stopping.store(false, std::memory_order_relaxed);
  all_done.store(false, std::memory_order_relaxed);
  live.store(0, std::memory_order_relaxed);
  timers.clear();
  next_deadline.store(kNoDeadline, std::memory_order_relaxed);
  run_waiter = self();
  {
    std::lock_guard lock(workers_mu);
    // A simulation keeps its one worker from run to run: a run is often a
    // few microseconds of work, and a worker's queues are 128 KiB to clear.
    if (sim == nullptr || workers.size() != 1) {
      workers.clear();
      for (unsigned i = 0; i < opts.workers; ++i) {
        workers.push_back(std::make_unique<worker>(*this, i));
      }
    }
  }
  busy.store(static_cast<int>(workers.size()), std::memory_order_relaxed);
  deep_sleepers.store(0, std::memory_order_relaxed);
  if (sim != nullptr) simulation_started();
}

void runtime_impl::join_workers() noexcept {
  while (!all_done.load(std::memory_order_acquire)) park();
  stop_watchdog();
  stopping.store(true, std::memory_order_seq_cst);
  for (auto& w : workers) w->wake_if_sleeping();
  for (auto& w : workers) w->join();
  while (remote_inflight.load(std::memory_order_acquire) != 0) cpu_relax();
  {
    std::lock_guard lock(workers_mu);
    if (sim == nullptr) {
      workers.clear();
    } else {
      // Kept for the next run (start_workers), without its idle job runners:
      // a run's fibers are numbered from 1, runners included.
      workers.front()->release_runners();
    }
  }
  if (sim != nullptr) simulation_ended();
  running.store(false, std::memory_order_release);
}

void runtime_impl::run_root(unique_function root) {
  start_workers("tessera::runtime::run");
  fiber_record* f = new_record();
  try {
    init_fiber(f, stacks.take(), std::move(root), true, workers.front().get());
  } catch (...) {
    std::vector<fiber_record*> one{f};
    pool_records(one);
    {
      std::lock_guard lock(workers_mu);
      workers.clear();
    }
    if (sim != nullptr) simulation_ended();
    running.store(false, std::memory_order_release);
    throw;
  }
  global.push(f);
  start_watchdog();
  if (sim != nullptr) {
    // A simulation's one worker is the calling thread: a run is often a few
    // microseconds of work, and a thread's start and join cost more (under
    // ThreadSanitizer, milliseconds: it clears the new stack's shadow).
    workers.front()->run_here();
  } else {
    for (auto& w : workers) w->start();
  }
  join_workers();
  if (deadlocked.load(std::memory_order_acquire)) return;  // the root fiber was abandoned

  std::exception_ptr error = std::move(f->error);
  f->error = nullptr;
  release_record(f);
  if (error != nullptr) std::rethrow_exception(error);
}

void runtime_impl::start() {
  start_workers("tessera::runtime::start");
  // The runtime's own reference keeps `live` above zero until stop().
  live.store(1, std::memory_order_relaxed);
  started.store(true, std::memory_order_release);
  start_watchdog();
  for (auto& w : workers) w->start();
}

void runtime_impl::stop() {
  if (!started.exchange(false, std::memory_order_acq_rel)) {
    throw std::logic_error("tessera::runtime::stop: the runtime was not started with start()");
  }
  if (worker* w = current_worker(); w != nullptr && &w->rt == this) {
    started.store(true, std::memory_order_release);
    throw std::logic_error(
        "tessera::runtime::stop: called on one of this runtime's own workers (stop() waits for "
        "every fiber to finish, its caller's too)");
  }
  run_waiter = self();
  fiber_finished();  // drops the runtime's own reference: the last fiber to end wakes us
  join_workers();
}

fiber_record* runtime_impl::spawn_from_anywhere(unique_function body, bool joinable,
                                                std::uintptr_t site) {
  if (worker* w = current_worker(); w != nullptr && &w->rt == this && w->on_fiber()) {
    return spawn(*w, std::move(body), joinable, site);
  }
  if (!started.load(std::memory_order_acquire) && !running.load(std::memory_order_acquire)) {
    throw std::logic_error(
        "tessera::runtime::spawn: the runtime is not running (call start(), or spawn from inside "
        "run())");
  }
  fiber_record* f = new_record();
  try {
    init_fiber(f, stacks.take(), std::move(body), joinable, nullptr, true, site);
  } catch (...) {
    std::vector<fiber_record*> one{f};
    pool_records(one);
    throw;
  }
  // As a remote wake-up: the workers may not be torn down while we push.
  remote_inflight.fetch_add(1, std::memory_order_seq_cst);
  global.push(f);
  if (fenced_load(sleepers) != 0) wake_one_sleeper();
  remote_inflight.fetch_sub(1, std::memory_order_release);
  return f;
}

}  // namespace tessera::sched
