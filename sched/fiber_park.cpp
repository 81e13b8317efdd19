// sched/fiber_park.cpp — the fiber path of the park façade and the context switch
// it rests on (the park/unpark state machine of scheduler.h: the post-switch
// CAS that closes the switch-out/unpark race lives in complete_switch).
#include "pick.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace tessera::sched {
namespace {

// ---- the fiber path of the park façade ---------------------------------------
// The worker running the calling fiber `w`: switch_to sets the fiber's
// last_worker to it, and a running fiber does not move, so no thread_local
// lookup is needed (valid until the fiber switches away).
worker& running_worker(waiter& w) noexcept {
  return *as_record(w)->last_worker.load(std::memory_order_relaxed);
}

// One more park that blocked (fiber_record::parks; relaxed: a hint to the
// watchdog, written by the fiber alone).
void count_park(waiter& w) noexcept {
  std::atomic<std::uint32_t>& n = as_record(w)->parks;
  n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void fiber_park(waiter& w) {
  // Only this fiber moves its state away from kNotified, so a plain load tells
  // whether there is a permit to consume (and saves a locked RMW when there is none).
  if (w.state.load(std::memory_order_relaxed) == kNotified &&
      w.state.exchange(kEmpty, std::memory_order_acquire) == kNotified) {
    return;
  }
  running_worker(w).block_current(post_action::park);
  count_park(w);
  // Nothing to consume: the unpark that woke us handed us over as kEmpty, and
  // a permit that raced the switch-out was consumed by complete_switch. We
  // synchronize with the unparker through the run queue that brought us back.
}

bool fiber_park_until(waiter& w, steady::time_point deadline) {
  if (w.state.exchange(kEmpty, std::memory_order_acquire) == kNotified) return true;
  if (steady::now() >= deadline) return false;
  fiber_record* f = as_record(w);
  f->rt->add_timer(deadline, f);
  running_worker(w).block_current(post_action::park_timed);
  count_park(w);
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
  // parking side left it (its CAS to kParked is acq_rel). A fiber parked in
  // park() is handed off with no permit (kEmpty: the hand-off is the wake-up,
  // so it resumes without a locked RMW of its own); one in park_until() gets
  // the permit, which tells it the wake-up was not its timer.
  std::int32_t v = w.state.load(std::memory_order_relaxed);
  while (!w.state.compare_exchange_weak(v, v == kParked ? kEmpty : kNotified,
                                        std::memory_order_acq_rel, std::memory_order_relaxed)) {
  }
  if (v == kParked || v == kParkedTimed) {
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

void destroy_fls(std::vector<fls_entry>& map) noexcept {
  while (!map.empty()) {
    const fls_entry e = map.back();
    map.pop_back();
    if (e.value != nullptr) e.destroy(e.value);
  }
}

void worker::switch_to(fiber_record* next, post_action act) {
  fiber_record* from = current_;
  prev_ = from;
  post_ = act;
  current_ = next;
  next->last_worker.store(this, std::memory_order_relaxed);
  const bool to_sched = next == &sched_rec_;
  count_turn(to_sched ? nullptr : next);
  if (trace != nullptr) [[unlikely]]
    trace_switch(from, next, act);
  *waiter_slot_ = to_sched ? thread_waiter_ : &next->w;
  *overflow_slot_ = &next->overflow;  // sched_rec_'s is all null: not on a fiber
  // On this thread, which runs `next` from the jump on: no address is reused
  // across a switch (language_state.h).
  lang_.swap(from->lang, next->lang);
  before_switch(from->san, next->san, act == post_action::finish);
  const transfer_t t = jump(next->ctx, this);
  landed(t);  // on whichever worker resumed us: `this` may be stale now
}

void worker::landed(transfer_t t) noexcept {
  static_cast<worker*>(t.data)->complete_switch(t.fctx);
}

void worker::complete_switch(fcontext_t from) noexcept {
  fiber_record* p = prev_;
  after_switch(current_->san, &p->san);
  p->ctx = from;
  const post_action act = post_;
  if (act == post_action::none) return;
  post_ = post_action::none;
  if (act != post_action::park && act != post_action::park_timed) {
    complete_other(p, act);  // out of line: keeps the park path free of its frame
    return;
  }
  // Our registers are saved only now: only now may anyone resume `p`.
  const bool timed = act == post_action::park_timed;
  std::int32_t expected = kEmpty;
  if (!p->w.state.compare_exchange_strong(expected, timed ? kParkedTimed : kParked,
                                          std::memory_order_acq_rel, std::memory_order_acquire)) {
    // An unpark (or, timed, its timer) came in during the switch: run again
    // soon. park() does not look at the word when it resumes, so consume
    // the permit here; park_until() reads it to tell unpark from timer.
    if (!timed) p->w.state.exchange(kEmpty, std::memory_order_acquire);
    push_local(p);
  }
}

void worker::complete_other(fiber_record* p, post_action act) noexcept {
  switch (act) {
    case post_action::none:
    case post_action::park:
    case post_action::park_timed:
      break;  // complete_switch handles these
    case post_action::idle_runner:  // a runner out of jobs (job_queue.cpp)
      if (runner_ == nullptr) {
        runner_ = p;
      } else {
        spare_runners_.push_back(p);
      }
      rt.fiber_finished();  // no longer active (job_queue.cpp: what keeps run() waiting)
      break;
    case post_action::yield:
      if (p->bound.load(std::memory_order_relaxed) != nullptr) {
        push_local(p);  // its bound queue: it may run nowhere else
        break;
      }
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

void worker::fiber_entry(transfer_t t) {
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
  me->listed_in.store(nullptr, std::memory_order_relaxed);
  me->done.store(true, std::memory_order_seq_cst);
  no_preempt_ = true;  // a simulation does not stop it on the way out
  if (waiter* j = me->joiner.load(std::memory_order_seq_cst)) unpark(j);
  worker_counters::add(counters.finishes);
  fiber_record* next = next_after(switch_point::finish);
  switch_to(next != nullptr ? next : &sched_rec_, post_action::finish);
  std::abort();  // unreachable: a finished fiber is never resumed
}

void worker::trace_switch(const fiber_record* from, const fiber_record* to,
                          post_action act) noexcept {
  if (from != &sched_rec_) {
    trace_end why = trace_end::parked;
    if (act == post_action::yield) why = trace_end::yielded;
    if (act == post_action::finish) why = trace_end::finished;
    const char* on =
        why == trace_end::parked ? from->w.wait.kind.load(std::memory_order_relaxed) : nullptr;
    trace->add(trace_kind::run_end, from->id, static_cast<std::uint64_t>(why), on);
  }
  if (to != &sched_rec_) trace->add(trace_kind::run_begin, to->id);
}

void worker::block_current(post_action act) {
  worker_counters::add(counters.parks);
  fiber_record* next = next_after(switch_point::park);
  switch_to(next != nullptr ? next : &sched_rec_, act);
}

void worker::yield_current() {
  fiber_record* next = next_after(switch_point::yield);
  if (next == nullptr && rt.sim == nullptr) {  // nothing else to run here: keep going
    count_turn(current_);
    return;
  }
  worker_counters::add(counters.yields);
  switch_to(next != nullptr ? next : &sched_rec_, post_action::yield);
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

}  // namespace tessera::sched
