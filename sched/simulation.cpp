// sched/simulation.cpp — the loop of a simulated runtime's one worker, its
// virtual clock, and the hooks that send the base layer's clock reads,
// spin-wait steps and random picks to the simulation (simulation.h).
//
// Why one loop of its own rather than the worker's: the usual loop's choices
// (runnext, the deque's LIFO end, the fairness tick, stealing, idle spinning
// and sleeping with a real timeout) all depend on timing; here every choice
// is the control's, and "nothing to run" is an event of the run (the clock
// jumps to the next timer, or the run is deadlocked), never a wait.
#include <algorithm>
#include <sstream>
#include <string>

#include "pick.h"

namespace tessera::sched {

const char* to_string(switch_point p) noexcept {
  switch (p) {
    case switch_point::park:
      return "parked";
    case switch_point::yield:
      return "yielded";
    case switch_point::finish:
      return "finished";
    case switch_point::unpark:
      return "preempted at an unpark";
    case switch_point::spawn:
      return "preempted at a spawn";
    case switch_point::spin:
      return "preempted at a spin-wait";
    case switch_point::sync:
      return "preempted at a synchronization call";
    case switch_point::marked:
      return "preempted at a marked point";
    case switch_point::start:
      return "runs";
  }
  return "?";
}

namespace {

simulation_control* simulation_of_this_thread() noexcept {
  worker* w = tls_worker;
  return w != nullptr ? w->rt.sim : nullptr;
}

std::chrono::steady_clock::time_point hook_now() noexcept {
  if (simulation_control* s = simulation_of_this_thread()) return s->now;
  return std::chrono::steady_clock::now();
}

// A switch point reached on this thread: the simulation's, if it runs one.
void switch_point_here(switch_point why) noexcept {
  if (worker* w = tls_worker; w != nullptr && w->rt.sim != nullptr) w->sim_switch_point(why);
}

void hook_spin() noexcept {
  switch_point_here(switch_point::spin);
}

bool hook_random(std::uint32_t& out) noexcept {
  simulation_control* s = simulation_of_this_thread();
  if (s == nullptr) return false;
  out = s->random();
  return true;
}

void hook_sync_call() noexcept {
  switch_point_here(switch_point::sync);
}

constexpr detail::simulation_table kHooks{&hook_now, &hook_spin, &hook_random, &hook_sync_call};
std::atomic<int> simulations_running{0};

}  // namespace

void simulation_started() noexcept {
  if (simulations_running.fetch_add(1, std::memory_order_acq_rel) == 0) {
    detail::simulation_hooks.store(&kHooks, std::memory_order_release);
  }
}

void simulation_ended() noexcept {
  if (simulations_running.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    detail::simulation_hooks.store(nullptr, std::memory_order_release);
  }
}

void marked_switch_point() noexcept {
  switch_point_here(switch_point::marked);
}

void worker::sim_switch_point(switch_point why) noexcept {
  if (!on_fiber() || no_preempt_ || !rt.sim->preempt(*current_, why)) return;
  worker_counters::add(counters.yields);
  sim_why_ = why;
  switch_to(&sched_rec_, post_action::yield);
}

void worker::sim_gather() {
  rt.fire_timers(*this);
  // Readiness is a switch point too: every step looks (a simulated
  // network's sockets are ready as soon as their peer wrote; epoll reports
  // that at once).
  if (rt.io.active()) note_io(rt.io.poll(std::chrono::nanoseconds(0)));
  // Oldest first wherever a queue knows its order: the deque's stealing end,
  // the inbox in push order, the global FIFO.
  if (fiber_record* f = take_runnext()) sim_ready_.push_back(f);
  while (fiber_record* f = deque_.steal()) sim_ready_.push_back(f);
  while (fiber_record* f = take_bound()) sim_ready_.push_back(f);
  for (fiber_record* f = inbox_.take_all(); f != nullptr;) {
    fiber_record* next = f->link;
    sim_ready_.push_back(f);
    f = next;
  }
  while (fiber_record* f = rt.global.pop()) sim_ready_.push_back(f);
  const auto is_runner = [](const fiber_record* f) {
    return f->listed_runner.load(std::memory_order_relaxed);
  };
  if (rt.jobs_used() && has_job_work(false) &&
      std::none_of(sim_ready_.begin(), sim_ready_.end(), is_runner)) {
    if (fiber_record* r = acquire_runner()) sim_ready_.push_back(r);
  }
}

bool worker::sim_advance_clock() {
  simulation_control& sim = *rt.sim;
  const std::int64_t next = rt.next_deadline.load(std::memory_order_relaxed);
  if (next == runtime_impl::kNoDeadline) return false;
  const steady::time_point at{steady::duration(next)};
  if (at > sim.time_limit) {
    sim_fail("the next timer is past the run's virtual time limit");
    return false;
  }
  if (at > sim.now) sim.now = at;
  rt.fire_timers(*this);
  return true;
}

void worker::sim_fail(const char* why) {
  if (rt.deadlocked.load(std::memory_order_relaxed)) return;
  const std::vector<seen_fiber> fibers = rt.snapshot(true);
  std::string text;
  if (why == nullptr) {
    text = runtime_impl::deadlock_text("nothing in the simulation can wake them (no timer is set)",
                                       fibers);
  } else {
    std::ostringstream report;
    report << "tessera: simulation: " << why << " (" << rt.sim->steps << " steps)\n";
    write_wait_cycles(report, fibers);
    write_fibers(report, fibers);
    text = report.str();
  }
  for (fiber_record* f : sim_ready_) f->listed_in.store(nullptr, std::memory_order_relaxed);
  sim_ready_.clear();
  rt.deadlock_report = std::move(text);
  rt.abandon_deadlocked();
}

// Every runnable fiber last stopped at a yield or a spin-wait: they poll for
// something, and in a real run time would pass meanwhile.
bool worker::sim_all_polling() const noexcept {
  return std::all_of(sim_ready_.begin(), sim_ready_.end(),
                     [](const fiber_record* f) { return f->sim_polling; });
}

void worker::simulate() {
  simulation_control& sim = *rt.sim;
  for (;;) {
    no_preempt_ = false;
    sim_gather();
    // Fibers that only poll do not hold the clock back (a fiber waiting for
    // a timer's effect by yielding would otherwise stop time for good).
    if (!sim_ready_.empty() && sim_all_polling() &&
        rt.next_deadline.load(std::memory_order_relaxed) != runtime_impl::kNoDeadline) {
      if (!sim_advance_clock()) break;
      sim_gather();
    }
    if (sim_ready_.empty()) {
      if (rt.all_done.load(std::memory_order_acquire)) break;
      if (sim_advance_clock()) continue;
      if (rt.deadlocked.load(std::memory_order_relaxed)) break;
      sim_fail(nullptr);  // a deadlock
      break;
    }
    if (sim.steps >= sim.max_steps) {
      sim_fail("the run passed its step limit");
      break;
    }
    const std::size_t i = sim.pick(sim_ready_);
    fiber_record* f = sim_ready_[i];
    sim_ready_.erase(sim_ready_.begin() + static_cast<std::ptrdiff_t>(i));
    ++sim.steps;
    const std::uint32_t ordinal = f->sim_ordinal;
    sim.note(ordinal, switch_point::start, nullptr);
    sim_why_ = switch_point::park;
    switch_to(f, post_action::none);
    f->sim_polling = sim_why_ == switch_point::yield || sim_why_ == switch_point::spin;
    // A parked fiber's record stays as it left it until it runs again.
    sim.note(
        ordinal, sim_why_,
        sim_why_ == switch_point::park ? f->w.wait.kind.load(std::memory_order_relaxed) : nullptr);
  }
}

}  // namespace tessera::sched
