// sched/scheduler.h — the engine under tessera::runtime (internal; not installed).
//
// Records
//   fiber_record: one per fiber, pooled process-wide and never freed (type-stable,
//   like thread waiters), so `unpark` of a finished fiber is harmless. Its first
//   member is the fiber's `waiter`; `waiter::context` points back to the record.
//
// Run queues of a worker, in the order pick_local() consults them
//   1. every 64th pick: the global FIFO, the inbox, then the *oldest* fiber of its
//      own deque — so nothing local waits more than 64 picks behind newer work;
//   2. `runnext`: the LIFO slot. A fiber woken by a fiber of the same runtime goes
//      here on the waker's worker and runs as soon as the waker parks (its data is
//      hot in this core's cache). At most 16 runnext picks in a row, then the
//      deque gets a turn (Tokio's rule), so two fibers waking each other cannot
//      starve the rest. The slot is stealable, as Go's runnext (Tokio's LIFO
//      slot is not: tokio#4941): a waker that keeps running instead of parking
//      would otherwise hold the woken fiber hostage while other workers idle.
//      An idle worker steals it only once it has sat there, with the owner
//      picking nothing, for kRunnextStale (50 µs), so the usual wake-then-park
//      hand-off stays on one core. Owner fills it with a plain store when empty
//      and takes it with one exchange; thieves take it with a CAS;
//   3. its Chase–Lev deque, newest first (new fibers, fibers whose park raced an
//      unpark, fired timers);
//   4. its MPSC inbox: fibers unparked by other threads (plain OS threads, other
//      runtimes' fibers), drained into the deque;
//   5. the global FIFO (yielded fibers, overflow, the root fiber).
// An idle worker then steals the oldest fiber of other workers' deques, nearest
// first in the hwloc tree (topology.h), and last a stale runnext (see 2.).
//
// Idle protocol (no lost wake-ups)
//   A worker with nothing to run spins for `idle_spin` (counted in `spinners`),
//   then announces sleep (sleep_word = 1, ++sleepers, seq_cst), re-checks every
//   queue, and futex-waits on sleep_word with the earliest timer as timeout.
//   Stale runnext slots: while any worker is busy (runs fibers: `busy` counts
//   them), a sleeping worker wakes every kRunnextPoll (1 ms; kRunnextStale
//   while it watches a full slot) to look at the others' runnext slots — a
//   busy worker's fiber may fill its slot and then run on without parking.
//   Only when no worker is busy does it sleep "deep" (no poll). A worker that
//   turns busy wakes a deep sleeper so that one starts polling: busy++ then
//   load deep_sleepers, against deep_sleepers++ then load busy (all seq_cst),
//   so a deep sleeper cannot miss a busy worker (Dekker). The wake-up itself
//   waits until the busy worker first fills its runnext slot — the only thing
//   a poller watches — so a worker woken to run one job runs it first.
//   Producers: a push to a specific worker's inbox is followed (seq_cst) by a
//   check of that worker's sleep_word and a futex wake; a push to a deque or the
//   global FIFO is followed by a seq_cst fence and, when some worker sleeps and
//   none spins, a wake of one sleeper. Each side stores then loads with seq_cst,
//   so at least one sees the other (Dekker).
//
// Park / unpark of a fiber (waiter::state: 0 empty, 1 permit, -1 parked in park(),
// -2 parked in park_until(), 2 timer fired; model: tests/model/fiber_park.pml)
//   park():   state 1 → exchange(0), return at once (permit consumed). Otherwise
//             switch away to the next fiber (or the worker's scheduler context)
//             with the post-switch action `park`, which runs on the *next*
//             context, after ours is saved: CAS state 0 → -1. If that CAS fails, an
//             unpark arrived during the switch (state is 1): it is consumed there
//             (exchange 0) and the fiber goes straight back on the deque. Only
//             after a successful CAS may anyone resume it, so no thread ever
//             resumes a fiber whose registers are not yet saved — this is how the
//             switch-out/unpark race is closed. A resumed park() does not touch
//             the word: the wake-up was the hand-off itself.
//   unpark(): one CAS: -1 → 0 (a hand-off: the unparker owns the wake-up and
//             makes the fiber runnable — runnext, deque or inbox, see above —
//             and the fiber resumes with nothing to consume), -2 → 1 (the same,
//             but park_until() must tell an unpark from its timer), anything
//             else → 1 (the fiber is running or already runnable: the permit
//             waits for its next park). The unparker's release reaches the woken
//             fiber through the run queue that resumes it.
//   park_until(): as park() with -2 and post-switch action `park_timed`; when
//             it resumes it exchanges the word to 0 and reads 1 (unparked) or 2
//             (its timer). A timer may fire on another worker while its fiber
//             is still switching out (state still 0): it then CASes 0 → 2, the
//             post-switch CAS fails and the fiber is re-queued.
//   Cost of a hand-off between two fibers of one worker: two locked RMWs (the
//             unpark's CAS and the post-switch CAS) and one context jump.
//   Timers:   one heap per runtime (mutex; the earliest deadline in an atomic, so
//             a worker's check costs a load while none is due); every worker
//             fires due entries when it picks work, and sleeping workers time
//             their futex wait to the earliest deadline. An expired entry
//             whose sequence still matches CASes -2 → 2 and makes the fiber
//             runnable; park_until() then reports a timeout (unless woken
//             early by a stale entry: a spurious wake-up, allowed). Entries
//             of waits that ended early are swept when they are most of the
//             heap, at an insertion or a firing (drop_stale_timers).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "context.h"
#include "language_state.h"
#include "poller.h"
#include "queues.h"
#include "simulation.h"
#include "stack.h"
#include "tessera/detail/cpu.h"
#include "tessera/detail/futex.h"
#include "tessera/detail/job_queue.h"
#include "tessera/detail/unique_function.h"
#include "tessera/park.h"
#include "tessera/runtime_options.h"
#include "topology.h"
#include "trace.h"

namespace tessera::sched {

// What the engine takes from the layers below it (base/ and the park façade).
using detail::cpu_relax;
using detail::futex_wait;
using detail::futex_wake;
using detail::unique_function;

class worker;
class runtime_impl;

/// One fiber-local value.
struct fls_entry {
  std::uint64_t key;
  void* value;
  void (*destroy)(void*) noexcept;
};
/// Destroys every value in `map` (values created by destructors included).
void destroy_fls(std::vector<fls_entry>& map) noexcept;

/// What the context we switch *to* does for the one we left (see the header comment).
enum class post_action : std::uint8_t { none, park, park_timed, yield, finish, idle_runner };

struct fiber_record {
  waiter w;  // first: the fiber's identity for the park façade
  fcontext_t ctx = nullptr;
  stack_mem stack;
  overflow_info overflow;  // its guard page, for the overflow handler
  sanitizer_context san;
  // Its exception globals and errno while it is switched out (language_state.h).
  language_state lang;
  fiber_record* link = nullptr;  // intrusive queue link (inbox, global FIFO)
  runtime_impl* rt = nullptr;
  std::atomic<worker*> last_worker{nullptr};  // where it last ran (remote unparks go there)
  // The worker it is locked to (this_fiber::lock_os_thread), or null: it may
  // run anywhere. Written by the fiber while it runs, read by whoever makes it
  // runnable (after the park's release, or on the worker itself); relaxed.
  std::atomic<worker*> bound{nullptr};
  std::uint32_t bound_depth = 0;  // nested lock_os_thread calls; the fiber's own
  // Parks that blocked, for the deadlock watchdog: a fiber that keeps being
  // woken is not stuck, even when every look finds it parked. Written by the
  // fiber only (a plain load and store).
  std::atomic<std::uint32_t> parks{0};
  std::atomic<std::uint32_t> timer_seq{0};    // invalidates stale timer entries
  std::uint64_t id = 0;
  std::uint32_t sim_ordinal = 0;  // in a simulated runtime: 1, 2, ... in creation order
  bool sim_polling = false;       // ... and it last stopped at a yield or a spin-wait
  unique_function body;
  std::atomic<int> refs{0};  // the running fiber + a joinable handle / run()
  std::atomic<bool> done{false};
  std::atomic<waiter*> joiner{nullptr};
  std::exception_ptr error;
  std::atomic<bool> joinable{false};  // false once detached: an escaping exception terminates
  std::vector<fls_entry> fls;
  // What runtime_impl::dump reads from other threads (the fields above are
  // the owner's): the runtime the fiber lives in (null once it has
  // finished), its id, and whether it is a worker's job runner.
  std::atomic<runtime_impl*> listed_in{nullptr};
  std::atomic<std::uint64_t> listed_id{0};
  std::atomic<bool> listed_runner{false};
  // For the dump as well, written by the fiber (or its creator, before it
  // runs): where it was created (the return address of the spawn call: the
  // call site in the user's code, since the spawn templates are always
  // inlined), and its name (this_fiber::set_name; NUL-terminated, cut to fit).
  std::atomic<std::uintptr_t> created_at{0};
  std::array<std::atomic<char>, 48> name{};
  void set_name(std::string_view n) noexcept;
  std::string get_name() const;
  /// Its stack and saved context, read from another thread without
  /// synchronising with the owner (for diagnostics, which tolerate stale ones).
  stack_mem stack_snapshot() const noexcept;
  const void* context_snapshot() const noexcept;
};

/// Every fiber record ever made (records are never freed), for the dump.
std::vector<fiber_record*> all_records();

/// One fiber as the dump and the deadlock watchdog see it (a snapshot).
struct seen_fiber {
  const fiber_record* rec;
  std::uint64_t id;
  bool runner;
  bool parked;
  const char* kind;  // what it waits for (wait_info::kind); null: nothing
  const void* object;
  std::int64_t detail;
  std::int64_t since;   // wait_info::since: the wait's stamp, to tell one wait from the next
  std::uint32_t parks;  // fiber_record::parks
  double seconds;       // how long it has waited
  std::string name;
  std::uintptr_t created_at;  // fiber_record::created_at
  // Who holds what it waits for, where the primitive knows (a mutex's or a
  // shared_mutex writer's holder, the fiber a join waits for): a fiber's id, or 0.
  std::uint64_t holder = 0;
  bool held_by_thread = false;        // the holder is an OS thread, not a fiber
  std::vector<std::uintptr_t> stack;  // its backtrace, when asked for
  int running_on = -1;                // the worker running it right now (the dump), or -1
  bool same_wait(const seen_fiber& o) const noexcept {
    return id == o.id && parked == o.parked && kind == o.kind && object == o.object &&
           since == o.since && parks == o.parks;
  }
};
/// Writes one line per fiber, or per group of identical waits and stacks,
/// each followed by its backtrace when the snapshot took them (dump.cpp).
void write_fibers(std::ostream& os, const std::vector<seen_fiber>& fibers);
/// Writes each cycle of "waits for what X holds" among `fibers`, one line
/// per step ("fiber 3 waits for mutex 0x… held by fiber 4"); returns how
/// many cycles it found.
std::size_t write_wait_cycles(std::ostream& os, const std::vector<seen_fiber>& fibers);
/// runtime_options::dump_on_sigquit (sigquit.cpp): `rt`'s dump is written on
/// SIGQUIT from registration until unregistration (which waits for a dump in
/// progress). register_sigquit_dump throws std::system_error if the handler
/// cannot be installed.
void register_sigquit_dump(const runtime_impl* rt);
void unregister_sigquit_dump(const runtime_impl* rt) noexcept;

struct timer_entry {
  std::chrono::steady_clock::time_point deadline;
  fiber_record* fiber;
  std::uint32_t seq;
};

/// One worker's counters since its runtime was made (runtime::stats). They
/// outlive the worker threads of one run; written by that worker alone with
/// a relaxed load and store (no locked instruction), read by anyone.
struct alignas(64) worker_counters {
  // Fiber runs that ended, by how: the switch itself counts nothing (a
  // count there cost every park a dozen instructions more, under callgrind).
  std::atomic<std::uint64_t> parks{0};      // the fiber parked (or a job runner went idle)
  std::atomic<std::uint64_t> yields{0};     // it yielded to another fiber
  std::atomic<std::uint64_t> finishes{0};   // it finished
  std::atomic<std::uint64_t> steals{0};     // fibers and jobs taken from other workers
  std::atomic<std::uint64_t> sleeps{0};     // times it went to sleep
  std::atomic<std::uint64_t> idle_ns{0};    // time in the idle phases (spin and sleep)
  std::atomic<std::uint64_t> io_events{0};  // descriptor readiness events it delivered
  std::atomic<std::uint64_t> jobs_run{0};
  static void add(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  /// Fiber runs that ended (runtime::worker_statistics::fibers_run).
  std::uint64_t runs() const noexcept {
    constexpr auto r = std::memory_order_relaxed;
    return parks.load(r) + yields.load(r) + finishes.load(r);
  }
};

class runtime_impl;

/// A worker: one OS thread running fibers. All members without `std::atomic` are
/// touched only by the worker's own thread.
class worker {
 public:
  worker(runtime_impl& rt, unsigned index);
  ~worker();
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;

  void start();
  void join();
  /// The worker's loop on the calling thread, until the run ends (a
  /// simulated runtime's: see run_root).
  void run_here() { thread_main(); }

  // --- on this worker's thread ---
  fiber_record* pick_local();
  /// The fiber to switch to when the running one stops at `why` (a park, a
  /// yield, its end): pick_local()'s, or null for the scheduler context. In
  /// a simulated runtime always null, `why` noted: its loop picks (pick.h).
  fiber_record* next_after(switch_point why);
  fiber_record* steal();
  /// Local work, then other workers' deques, then (if asked) a stale runnext slot.
  fiber_record* find_work(bool look_at_runnext);
  /// A runnext slot of another worker that has sat unpicked for kRunnextStale.
  fiber_record* steal_stale_runnext();
  /// The idle phases: spin, then sleep (deep or polling); returns work, or null
  /// when the runtime stops.
  fiber_record* idle();
  /// Switches from the running context to `next`; returns when the caller is
  /// resumed (possibly on another worker: never touch `this` afterwards).
  void switch_to(fiber_record* next, post_action act);
  /// Switches away from the running fiber: to the next local fiber, or to the
  /// scheduler context. `act` runs for the fiber left behind.
  void block_current(post_action act);
  void yield_current();
  [[noreturn]] void finish_current();
  /// The loop of a simulated runtime's one worker (simulation.cpp, simulation.h).
  void simulate();
  /// A switch point the running fiber reached (unpark, spawn, spin): in a
  /// simulated runtime, it goes back to the ready fibers if the control says so.
  void sim_switch_point(switch_point why) noexcept;
  void push_local(fiber_record* f);
  /// push_local() of a fiber locked to worker `to`: this worker's bound
  /// queue, or `to`'s inbox. Bound fibers never enter a deque, a runnext slot
  /// another worker may take, or the global FIFO.
  void push_bound(fiber_record* f, worker* to);
  fiber_record* take_bound() noexcept;
  void make_runnext(fiber_record* f);  // pick.h, with the two below
  fiber_record* take_runnext() noexcept;
  void push_fired(std::vector<fiber_record*>& fired);
  // --- jobs (job_queue.cpp) ---
  /// The next queued job this worker may run (priority order with the
  /// rotation of job_queue.cpp; own queue, global queue, then steals), or null.
  job_node* take_job() noexcept;
  /// Whether a job is queued where take_job() looks (own, global; and, with
  /// `others`, the other workers' queues). seq_cst loads: the idle re-check.
  bool has_job_work(bool others) const noexcept;
  /// An idle runner fiber for this worker (recycled or new), or null if none
  /// can be made.
  fiber_record* acquire_runner() noexcept;
  /// Whether a fiber waits in this worker's queues (a runner's cue to step aside).
  bool has_fiber_work() const noexcept;
  void push_job_local(job_node* t);
  /// Runs a job taken from a queue (on a runner, or helping).
  void execute(job_node* t) noexcept;
  /// Teardown: returns the stacks and records of this worker's idle runners.
  void release_runners() noexcept;
  static void runner_main();
  fiber_record* take_record();
  stack_mem take_stack();
  void recycle(fiber_record* f) noexcept;
  bool on_fiber() const noexcept { return current_ != &sched_rec_; }
  /// Whether the worker sleeps (on its futex or in the poller): a snapshot,
  /// from any thread.
  bool asleep() const noexcept {
    return sleep_word_.load(std::memory_order_relaxed) != 0 ||
           polling_.load(std::memory_order_relaxed);
  }
  /// The fiber it runs (null: none), and its switches and yields so far: a
  /// snapshot for the stall watchdog, from any thread.
  fiber_record* running() const noexcept { return running_.load(std::memory_order_relaxed); }
  std::uint64_t turns() const noexcept { return turns_.load(std::memory_order_relaxed); }
  fiber_record* current() const noexcept { return current_; }
  /// The worker's OS thread, once it runs (0 before): any thread.
  pthread_t native_thread() const noexcept { return native_.load(std::memory_order_acquire); }

  // --- any thread ---
  void push_inbox(fiber_record* f);
  /// Wakes this worker if it sleeps. Returns true if it did.
  bool wake_if_sleeping() noexcept;

  runtime_impl& rt;
  const unsigned index;
  worker_counters& counters;
  /// This worker's trace ring (runtime_options::trace_events), or null: off.
  trace_ring* const trace;
  /// Records a switch from `from` to `to` (trace on).
  [[gnu::noinline]] void trace_switch(const fiber_record* from, const fiber_record* to,
                                      post_action act) noexcept;
  /// After taking fiber `f` from worker `from`.
  void note_steal(const fiber_record* f, unsigned from) noexcept {
    worker_counters::add(counters.steals);
    if (trace != nullptr) trace->add(trace_kind::steal, f->id, from);
  }
  /// After a poll of the I/O poller that delivered `ready` events.
  void note_io(int ready) noexcept {
    if (ready <= 0) return;
    worker_counters::add(counters.io_events, static_cast<std::uint64_t>(ready));
    if (trace != nullptr) trace->add(trace_kind::io_ready, 0, static_cast<std::uint64_t>(ready));
  }

 private:
  friend class runtime_impl;
  static void fiber_entry(transfer_t t);
  static void landed(transfer_t t) noexcept;
  void complete_switch(fcontext_t from) noexcept;
  // One more switch or yield, now running `f` (null: the scheduler loop).
  void count_turn(fiber_record* f) noexcept {
    running_.store(f, std::memory_order_relaxed);
    turns_.store(turns_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  // The out-of-line parts of pick_local() and make_runnext() (pick.h).
  void tend_timers_and_io();
  fiber_record* pick_beyond_runnext(std::uint32_t tick);
  void make_runnext_contended(fiber_record* f);
  /// The post-switch actions other than park: yield, finish, idle_runner.
  [[gnu::noinline]] void complete_other(fiber_record* p, post_action act) noexcept;
  void thread_main();
  fiber_record* drain_inbox();
  void give_stack(stack_mem s) noexcept;
  [[noreturn]] static void report_escaped(fiber_record* f);

 public:
  static bool later(const timer_entry& a, const timer_entry& b) noexcept {
    return a.deadline > b.deadline;
  }

  chase_lev_deque<fiber_record> deque_;
  // Filled only by the owner; emptied by the owner (exchange) or a thief (CAS).
  // Its own line with tick_: idle thieves read both.
  alignas(64) std::atomic<fiber_record*> runnext_{nullptr};
  std::atomic<std::uint32_t> tick_{0};  // picks so far; written by the owner only
  mpsc_inbox<fiber_record> inbox_;
  alignas(64) std::atomic<std::uint32_t> sleep_word_{0};
  std::atomic<bool> deep_{false};     // asleep without polling (see the idle protocol)
  std::atomic<bool> polling_{false};  // asleep in the I/O poller, not on sleep_word_

  alignas(64) fiber_record sched_rec_;  // the worker thread's own stack, as a record
  fiber_record* current_ = &sched_rec_;
  // For the stall watchdog, read from its thread: the fiber running (null:
  // the scheduler loop) and how many times this worker switched or a fiber
  // yielded on it. Written by the worker alone (plain loads and stores).
  std::atomic<fiber_record*> running_{nullptr};
  std::atomic<std::uint64_t> turns_{0};
  fiber_record* prev_ = nullptr;
  post_action post_ = post_action::none;
  // Simulated runtime: why the fiber it ran last stopped; and whether the
  // running fiber may not be preempted (it is finishing).
  switch_point sim_why_ = switch_point::park;
  bool no_preempt_ = false;
  // Simulated runtime: the runnable fibers, in the order they became so.
  std::vector<fiber_record*> sim_ready_;
  void sim_gather();
  bool sim_advance_clock();
  bool sim_all_polling() const noexcept;
  /// Ends the run as a deadlock (`why` null) or past a limit (`why` says which).
  void sim_fail(const char* why);
  std::uint32_t runnext_streak_ = 0;
  /// What this worker last saw in each other worker's runnext slot: the fiber,
  /// that worker's tick_, and since when.
  struct runnext_sighting {
    fiber_record* fiber = nullptr;
    std::uint32_t tick = 0;
    std::chrono::steady_clock::time_point since{};
  };
  std::vector<runnext_sighting> sightings_;
  bool watching_ = false;                // the last look saw a full slot, not yet stale
  bool wake_deep_at_runnext_ = false;    // wake a deep sleeper when runnext_ is next filled
  std::uint64_t timers_checked_at_ = 0;  // cpu_ticks() at the last look at the clock
  std::uint64_t io_polled_at_ = 0;       // cpu_ticks() at the last non-blocking I/O poll
  waiter* thread_waiter_ = nullptr;
  // This thread's running-identity and stack-overflow slots (thread_locals of
  // other files), looked up once: switch_to() writes both at every switch.
  waiter** waiter_slot_ = nullptr;
  const overflow_info** overflow_slot_ = nullptr;
  // The thread's exception globals and errno, swapped at every switch.
  thread_language_state lang_;
  std::vector<fiber_record*> fired_;
  // Runnable fibers locked to this worker, FIFO through fiber_record::link;
  // touched by this worker only (others reach it through the inbox).
  fiber_record* bound_head_ = nullptr;
  fiber_record* bound_tail_ = nullptr;
  std::vector<stack_mem> stack_cache_;
  std::vector<fiber_record*> record_cache_;
  // Jobs: one work-stealing deque per priority; the idle runner fiber and spares.
  std::array<chase_lev_deque<job_node>, kJobPriorities> jobs_;
  fiber_record* runner_ = nullptr;
  std::vector<fiber_record*> spare_runners_;
  std::uint32_t job_picks_ = 0;
  std::vector<unsigned> steal_order_;
  std::thread thread_;
  std::atomic<pthread_t> native_{};  // pthread_self() of thread_, stored by it
};

class runtime_impl {
 public:
  explicit runtime_impl(const runtime_options& o);
  ~runtime_impl();

  void run_root(unique_function root);
  /// Long-lived mode: start() runs the workers until stop(), which waits for
  /// every fiber to finish (drain) and joins the workers.
  void start();
  void stop();
  /// Starts a fiber from any thread (a fiber of this runtime, a plain thread,
  /// a fiber of another runtime) on a running runtime; std::logic_error if it
  /// is not running.
  /// `site`: where the fiber was created (fiber_record::created_at), or 0.
  fiber_record* spawn_from_anywhere(unique_function body, bool joinable, std::uintptr_t site = 0);
  fiber_record* spawn(worker& w, unique_function body, bool joinable, std::uintptr_t site = 0);
  void start_workers(const char* who);
  /// Waits until every fiber has finished, then stops and joins the workers.
  void join_workers() noexcept;
  /// `counted`: whether the fiber counts in `live` (run() and stop() wait for
  /// it); runner fibers do not — the jobs they run do.
  /// `site`: fiber_record::created_at.
  void init_fiber(fiber_record* f, stack_mem stack, unique_function body, bool joinable,
                  worker* home, bool counted = true, std::uintptr_t site = 0);
  /// Makes a woken fiber runnable (see the header comment for where it goes).
  void schedule_woken(fiber_record* f) noexcept;  // pick.h
  /// schedule_woken() from anywhere but a fiber of this runtime (`cur` is the
  /// calling thread's worker, if any): the local deque, or the fiber's inbox.
  void schedule_woken_elsewhere(fiber_record* f, worker* cur) noexcept;
  /// After a push that other workers could take: wake a sleeper if none spins.
  void notify_work() noexcept;
  /// Wakes one sleeping worker, if any.
  void wake_one_sleeper() noexcept;
  /// Wakes one worker sleeping deep (not polling runnext slots), if any.
  void wake_deep_sleeper() noexcept;
  void fiber_finished() noexcept;
  /// Writes every fiber of this runtime (state, what it waits for and for how
  /// long, grouped when identical) and every worker (sleeping or busy) to
  /// `os`, in the style of Go's goroutine dump (dump.cpp). A snapshot: any
  /// thread, any time.
  void dump(std::ostream& os) const;
  /// This runtime's fibers, as the dump sees them; with `backtraces`, each
  /// parked fiber's stack too (sched/stack_trace.h says why that is safe).
  std::vector<seen_fiber> snapshot(bool backtraces = false) const;
  /// Stamps every listed fiber's wait that has no stamp yet (what snapshot()
  /// does on the way): the watchdog's look when it checks for stalls only.
  void stamp_waits() const;
  /// The watchdog thread (watchdog.cpp): looks for a deadlock every so often
  /// while something waits for the runtime to finish; started with the
  /// workers, stopped before they are joined.
  void start_watchdog();
  /// The text of a deadlock report: the headline `what`, the wait cycles
  /// and every fiber of `fibers` (a snapshot with backtraces).
  static std::string deadlock_text(const std::string& what, const std::vector<seen_fiber>& fibers);
  void stop_watchdog() noexcept;
  void watchdog_main();
  /// Whether the runtime is quiet: nothing it knows of can wake its fibers
  /// (the conditions of runtime_options::on_deadlock but the grace).
  bool quiet(const std::vector<seen_fiber>& fibers) const noexcept;
  /// Ends a run whose fibers are deadlocked: abandons them and wakes the
  /// caller of run() or stop().
  void abandon_deadlocked() noexcept;
  std::thread watchdog;
  std::mutex watchdog_mu;
  std::condition_variable watchdog_cv;
  bool watchdog_stop = false;  // guarded by watchdog_mu
  /// Set when a run ended in a deadlock (policy raise); the report is its text.
  std::atomic<bool> deadlocked{false};
  std::string deadlock_report;
  /// Queues a job (job_queue.cpp; tessera/detail/job_queue.h has the contract).
  void push_job(job_node* t);
  /// Whether a job is queued anywhere (seq_cst loads): fiber_finished()
  /// looks before it declares the run over (job_queue.cpp says why).
  bool work_left() const noexcept;
  /// Timers are runtime-wide, so any worker fires them — also when the worker a
  /// fiber parked on is held by a fiber that never parks.
  void add_timer(std::chrono::steady_clock::time_point deadline, fiber_record* f);
  void fire_timers(worker& w);
  /// Drops the entries of waits that ended early once they are most of the
  /// heap (timer_mu held): amortized O(1) per entry, and the heap stays within
  /// twice the live timers plus 64 however far off the deadlines are.
  void drop_stale_timers();
  /// Stores the heap's earliest deadline and size where lock-free readers
  /// look (next_deadline, timer_entries); timer_mu held.
  void publish_timers() noexcept;
  static constexpr std::int64_t kNoDeadline = INT64_MAX;
  std::mutex timer_mu;
  std::vector<timer_entry> timers;  // min-heap on deadline, guarded by timer_mu
  std::atomic<std::int64_t> next_deadline{kNoDeadline};  // steady ticks of timers.front()
  std::atomic<std::size_t> stale_timers{0};  // entries of waits that ended early (a hint)
  std::atomic<std::size_t> timer_entries{0};  // timers.size(), for statistics

  runtime_options opts;
  /// Set (before it runs) when a simulation drives this runtime: one
  /// worker, virtual time, the control's picks (simulation.h).
  simulation_control* sim = nullptr;
  topology topo;
  poller io;  // its kernel instance is created at the first registration (poller.h)
  stack_pool stacks;
  std::vector<std::unique_ptr<worker>> workers;
  /// Each worker's counters, one per worker index, for the runtime's life.
  std::unique_ptr<worker_counters[]> counters;
  /// Each worker's trace ring, when runtime_options::trace_events asks for them.
  std::vector<std::unique_ptr<trace_ring>> traces;
  /// The trace as Chrome trace-event JSON (trace.h); the workers must be stopped.
  void write_trace(std::ostream& os) const;
  /// Fiber names given while tracing (a fiber's record, and so its name,
  /// may be reused before the trace is written).
  void note_trace_name(std::uint64_t fiber, std::string_view name);
  mutable std::mutex trace_names_mu;
  std::vector<std::pair<std::uint64_t, std::string>> trace_names;  // guarded by trace_names_mu
  /// Guards `workers` being built and cleared against dump() from another
  /// thread (the workers' own code and the watchdog run while it stands).
  mutable std::mutex workers_mu;
  global_fifo<fiber_record> global;
  std::array<global_fifo<job_node>, kJobPriorities> global_jobs;  // from outside
  /// Bit p set at the first job of priority p: take_job() skips a level no
  /// job ever had (a hint; has_job_work() still looks at every level).
  std::atomic<std::uint8_t> job_levels{0};
  /// Whether any job was ever queued: until then no pick looks for jobs.
  bool jobs_used() const noexcept { return job_levels.load(std::memory_order_relaxed) != 0; }
  alignas(64) std::atomic<int> sleepers{0};
  std::atomic<int> spinners{0};
  std::atomic<int> busy{0};           // workers outside their idle phases
  std::atomic<int> deep_sleepers{0};  // sleepers that do not poll runnext slots
  /// Live fibers and active runners (low 32 bits), and in the high 32 bits
  /// how many times it was raised (an epoch: fiber_finished() tells "still
  /// zero" from "zero again"). Raise it with add_live() only.
  alignas(64) std::atomic<std::uint64_t> live{0};
  static constexpr std::uint64_t kLiveCount = 0xffff'ffffULL;
  void add_live() noexcept {
    live.fetch_add((std::uint64_t{1} << 32) + 1, std::memory_order_seq_cst);
  }
  std::atomic<bool> stopping{false};
  std::atomic<bool> all_done{false};
  std::atomic<bool> running{false};
  std::atomic<bool> started{false};     // start()ed and not yet stop()ped
  std::atomic<int> remote_inflight{0};  // remote wakers still inside schedule_woken()
  waiter* run_waiter = nullptr;
  // (Steals and sleeps are counted per worker: worker_counters.)
  std::atomic<std::uint64_t> fibers_started{0}, remote_wakeups{0}, runnext_steals{0};
};

/// Drops one reference; the last one returns the record to the pool.
void release_record(fiber_record* f) noexcept;

/// The worker running on the calling thread, or null. Never cached across a
/// switch: a fiber may resume on another worker.
worker* current_worker() noexcept;

/// The park operations of fiber waiters.
extern const park_ops fiber_park_ops;

}  // namespace tessera::sched
