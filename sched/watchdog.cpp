// sched/watchdog.cpp — the runtime's watchdog thread: the deadlock report and
// the stall report.
//
// Go's checkdead runs when the last M goes idle and knows every thread of the
// process. A runtime does not: a plain OS thread outside it may hold a
// reference to a parked fiber and unpark it later. So the check runs beside
// the scheduler, not in it, on a thread of its own that wakes a few times per
// grace period and reads what the dump reads (the fibers' wait records, the
// workers' sleep words, the timer heap's earliest deadline, the job queues):
// the switch path pays nothing for it. A deadlock is reported only when the
// runtime has stayed quiet, with every fiber's wait the same wait (its kind,
// object and start), for the whole grace period (runtime_options::on_deadlock).
//
// A stall (Seastar's reactor stall) is a fiber or job that holds its worker
// without parking or yielding: the watchdog reads each busy worker's count of
// switches and yields, and reports once when it has stood still for
// runtime_options::stall_threshold (the worker counts with a plain store).
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "internal.h"
#include "stack_trace.h"
#include "stall_backtrace.h"

#if TESSERA_ASAN
#include <sanitizer/lsan_interface.h>
#endif

namespace tessera::sched {
namespace {

// What makes a fiber wakeable by the runtime itself: the descriptor waits
// (the poller wakes them) and blocking() calls (a helper thread does).
bool woken_by_runtime(const char* kind) noexcept {
  if (kind == nullptr) return false;
  const std::string_view k(kind);
  return k.rfind("socket", 0) == 0 || k == "io::blocking";
}

bool same_waits(const std::vector<seen_fiber>& a, const std::vector<seen_fiber>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!a[i].same_wait(b[i])) return false;
  return true;
}

}  // namespace

bool runtime_impl::quiet(const std::vector<seen_fiber>& fibers) const noexcept {
  // Somebody waits for the run to end: run(), or stop() after start(). (A
  // started runtime nobody has stopped may still be handed work.)
  if (started.load(std::memory_order_acquire) || all_done.load(std::memory_order_acquire)) {
    return false;
  }
  if ((live.load(std::memory_order_acquire) & kLiveCount) == 0 || fibers.empty()) return false;
  if (next_deadline.load(std::memory_order_acquire) != kNoDeadline) return false;
  if (work_left()) return false;
  for (const auto& w : workers)
    if (!w->asleep()) return false;
  for (const auto& f : fibers)
    if (!f.parked || woken_by_runtime(f.kind)) return false;
  return true;
}

void runtime_impl::start_watchdog() {
  deadlocked.store(false, std::memory_order_relaxed);
  deadlock_report.clear();
  // A simulation finds deadlocks itself, at once (simulation.cpp).
  if (sim != nullptr) return;
  if (opts.on_deadlock == deadlock_policy::off && opts.stall_threshold.count() <= 0) return;
  {
    std::lock_guard lock(watchdog_mu);
    watchdog_stop = false;
  }
  watchdog = std::thread([this] { watchdog_main(); });
}

void runtime_impl::stop_watchdog() noexcept {
  if (!watchdog.joinable()) return;
  {
    std::lock_guard lock(watchdog_mu);
    watchdog_stop = true;
  }
  watchdog_cv.notify_all();
  watchdog.join();
}

namespace {

// How long the stall report waits for the stalled worker's backtrace.
constexpr std::chrono::milliseconds kStallBacktraceWait{200};

// One worker as the stall check follows it.
struct worker_watch {
  std::uint64_t turns = 0;
  steady::time_point still_since = steady::time_point::max();
  bool reported = false;  // this stall was reported
};

}  // namespace

void runtime_impl::watchdog_main() {
  const bool deadlocks = opts.on_deadlock != deadlock_policy::off;
  const bool stalls = opts.stall_threshold.count() > 0;
  const auto grace = std::max(opts.deadlock_grace, std::chrono::milliseconds(1));
  // Four looks per grace period and per stall threshold: a deadlock is
  // reported between one and one and a quarter grace periods after it
  // began, a stall as late.
  auto step = std::chrono::milliseconds(1000);
  if (deadlocks) step = std::min(step, grace / 4);
  if (stalls) step = std::min(step, opts.stall_threshold / 4);
  step = std::max(step, std::chrono::milliseconds(1));

  std::vector<worker_watch> watched(workers.size());
  std::vector<seen_fiber> held;    // the quiet state we are timing, if any
  std::uint64_t held_threads = 0;  // and the threads' sleeps and wakes then
  auto quiet_since = steady::time_point::max();
  std::vector<seen_fiber> reported;  // policy report: the last state reported
  std::unique_lock lock(watchdog_mu);
  while (!watchdog_cv.wait_for(lock, step, [this] { return watchdog_stop; })) {
    if (stalls) {
      for (std::size_t i = 0; i < workers.size(); ++i) {
        const worker& w = *workers[i];
        worker_watch& ww = watched[i];
        const std::uint64_t turns = w.turns();
        const fiber_record* f = w.running();
        if (turns != ww.turns || f == nullptr || w.asleep()) {
          ww = {turns, steady::now(), false};
          continue;
        }
        const auto held_for = steady::now() - ww.still_since;
        if (ww.reported || held_for < opts.stall_threshold) continue;
        ww.reported = true;
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(held_for).count();
        std::ostringstream report;
        report << "tessera: stall: "
               << (f->listed_runner.load(std::memory_order_relaxed) ? "job runner " : "fiber ")
               << f->listed_id.load(std::memory_order_relaxed);
        if (const std::string name = f->get_name(); !name.empty()) report << " \"" << name << '"';
        report << " has held worker " << w.index << " for " << ms
               << " ms without parking or yielding (the worker's other fibers wait meanwhile; "
                  "threshold "
               << opts.stall_threshold.count() << " ms)\n";
        // Where it is now: the worker's live registers, which a signal
        // takes, and from them its stack (read as it may still change).
        // ThreadSanitizer runs a signal handler where it chooses, possibly
        // amid its own fiber bookkeeping, and has crashed doing so; under it
        // the report goes without the backtrace rather than risk the program.
#if TESSERA_TSAN
        report << "    (no backtrace: a ThreadSanitizer build does not signal a running worker)\n";
#else
        if (const pthread_t t = w.native_thread(); t != pthread_t{}) {
          if (const auto regs = registers_of_thread(t, kStallBacktraceWait)) {
            const stack_mem stack = f->stack_snapshot();
            write_backtrace(report, backtrace_from(*regs, stack.bottom(), stack.top()));
          }
        }
#endif
        std::fputs(report.str().c_str(), stderr);
      }
    }
    if (!deadlocks) {
      stamp_waits();  // the first look at each wait dates it (wait_info::since)
      continue;
    }
    std::vector<seen_fiber> now = snapshot();
    if (!quiet(now)) {
      quiet_since = steady::time_point::max();
      continue;
    }
    // OS threads that sleep or wake in the primitives meanwhile may yet
    // wake a fiber: quiet only counts while they are quiet too.
    const std::uint64_t threads = detail::thread_sleeps_and_wakes();
    if (quiet_since == steady::time_point::max() || !same_waits(now, held) ||
        threads != held_threads) {
      held = std::move(now);
      held_threads = threads;
      quiet_since = steady::now();
      continue;
    }
    if (steady::now() - quiet_since < grace) continue;
    if (opts.on_deadlock == deadlock_policy::report && same_waits(now, reported)) continue;

    const std::string text = deadlock_text("nothing in the runtime can wake them", snapshot(true));
    std::fputs(text.c_str(), stderr);
    std::fflush(stderr);
    switch (opts.on_deadlock) {
      case deadlock_policy::abort:
        std::abort();
      case deadlock_policy::report:
        reported = std::move(now);
        break;
      default:
        deadlock_report = text;
        abandon_deadlocked();
        return;
    }
  }
}

std::string runtime_impl::deadlock_text(const std::string& what,
                                        const std::vector<seen_fiber>& fibers) {
  std::ostringstream report;
  std::size_t runners = 0;
  for (const auto& f : fibers) runners += f.runner ? 1 : 0;
  const std::size_t n = fibers.size() - runners;
  report << "tessera: deadlock: all " << n << (n == 1 ? " fiber is" : " fibers are") << " parked";
  if (runners != 0) {
    report << " (and " << runners << " job runner" << (runners == 1 ? "" : "s") << ")";
  }
  report << ", and " << what << "\n";
  write_wait_cycles(report, fibers);
  write_fibers(report, fibers);
  return report.str();
}

void runtime_impl::abandon_deadlocked() noexcept {
  // The parked fibers never resume: take them off the lists the dump and a
  // later run's watchdog read, then end the run as the last fiber would.
  // Their stacks stay mapped, and what they point to stays allocated; under
  // LeakSanitizer the stacks become root regions, so that this is not
  // reported as a leak (it is still reachable, from a frozen frame).
  for (fiber_record* f : all_records()) {
    runtime_impl* expected = this;
    if (f->listed_in.compare_exchange_strong(expected, nullptr, std::memory_order_relaxed)) {
#if TESSERA_ASAN
      __lsan_register_root_region(f->stack.bottom(), f->stack.usable());
#endif
    }
  }
  deadlocked.store(true, std::memory_order_release);
  if (!all_done.exchange(true, std::memory_order_acq_rel)) unpark(run_waiter);
}

}  // namespace tessera::sched
