// tessera/runtime.h — fibers: runtime, fiber, spawn, this_fiber, fiber_local.
//
// A runtime owns worker threads (one per core the process may use by default,
// placed and pinned by hwloc within its affinity mask) that run fibers:
// user-space threads switched by Boost.Context on pooled, guard-paged stacks.
// Every primitive in sync/ works unchanged on them: the park façade (park.h)
// parks a fiber by switching to the next runnable one.
//
//   tessera::runtime rt({.workers = 2});
//   int sum = rt.run([] {
//     tessera::fiber f([] { /* ... */ });
//     f.join();
//     return 42;
//   });
//
// Scheduling (sched/, documented in sched/scheduler.h): per-worker Chase–Lev
// deques (owner LIFO, thieves FIFO) with work stealing nearest-first over the
// hwloc tree; a LIFO "run next" slot for fibers woken by a fiber (as in Go and
// Tokio), bounded so it cannot starve the queue, and stolen by an idle worker
// when its waker runs on for 50 µs instead of parking; an MPSC inbox per worker for
// wake-ups from other threads; a global FIFO for yields; a runtime-wide timer heap;
// idle workers spin for `idle_spin`, then sleep on a futex until work or a timer
// arrives. Scheduling is cooperative: a fiber runs until it parks, yields or ends.
//
// What a fiber keeps across a park, as a thread keeps it across a blocking
// call (docs/design.md, "What a fiber keeps"): its stack; the C++ runtime's
// exception state — the exceptions being handled and the uncaught count — so
// `throw;`, `std::current_exception()` and `std::uncaught_exceptions()` are
// the fiber's own, and a catch handler, or a destructor run while an exception
// unwinds, may park (lock a mutex, sleep, do I/O, join) and resume on any
// worker; the value of `errno`; and fiber_local<T> values. An exception that
// leaves a fiber's function reaches join(). The cost is a few instructions per
// switch (docs/benchmarks.md, "What a fiber keeps").
//
// What a fiber shares with the worker that runs it: everything else the OS
// keeps per thread — `thread_local` variables, the thread id, signal masks,
// scheduling priority and CPU affinity. A fiber may resume on another worker
// after any park, so a `thread_local` read before a park and one after may be
// different threads' variables; and within one function a compiler may keep a
// `thread_local`'s address — or errno's, which glibc declares constant per
// thread — from before the park (GCC and clang both do), reading and writing
// the old worker's variable while another fiber uses it. So in a function that
// parks, read errno and your own `thread_local`s through a call that is not
// inlined, keep per-fiber state in fiber_local<T>, or lock the fiber to its
// worker (this_fiber::lock_os_thread) around code that needs one thread. The
// library's own per-thread reads are made afresh after every park.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <iosfwd>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/detail/deadline.h"
#include "tessera/detail/unique_function.h"
#include "tessera/park.h"
#include "tessera/runtime_options.h"

// The spawn templates are inlined even without optimisation, so that the
// out-of-line call they make sees the user's call site as its return address
// (where runtime::dump says a fiber was created).
#define TESSERA_SPAWN_INLINE [[gnu::always_inline]] inline

namespace tessera {

class runtime;

namespace sched {
struct fiber_record;  // sched/scheduler.h
class runtime_impl;
}  // namespace sched

namespace detail {

using sched::fiber_record;
using sched::runtime_impl;

/// Starts a fiber on the calling fiber's runtime. Throws std::logic_error when the
/// caller is not a fiber (or a worker) of a running runtime.
fiber_record* start_fiber(unique_function body, bool joinable);
void join_fiber(fiber_record* f);
void detach_fiber(fiber_record* f) noexcept;
/// The engine of `rt` (for the jobs layer).
runtime_impl* impl_of(runtime& rt) noexcept;
std::uint64_t fiber_id_of(const fiber_record* f) noexcept;
std::uint64_t current_fiber_id() noexcept;

template <class F, class... Args>
unique_function bind_call(F&& f, Args&&... args) {
  return unique_function(
      [fn = std::forward<F>(f), tup = std::make_tuple(std::forward<Args>(args)...)]() mutable {
        std::apply([&fn](auto&... a) { std::invoke(fn, std::move(a)...); }, tup);
      });
}

// Fiber-local storage: one slot map per fiber (and per OS thread, for callers
// that are not fibers). Keys are never reused.
std::uint64_t fls_new_key() noexcept;
void*& fls_slot(std::uint64_t key, void (*destroy)(void*) noexcept);
}  // namespace detail

class fiber;
template <class R>
class future;

/// Thrown by runtime::run() and runtime::stop() when the runtime's fibers
/// deadlocked (runtime_options::on_deadlock is deadlock_policy::raise, the
/// default). what() is the report also printed to stderr: "tessera:
/// deadlock: all N fibers are parked, ...", then each fiber, what it waits
/// for and for how long. The deadlocked fibers are abandoned (they never
/// resume; their stacks are not reclaimed); the runtime may run again.
class deadlock_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A runtime: worker threads plus everything fibers need (stacks, queues,
/// timers). Not a singleton: several may live in one process, each with its own
/// workers. Two ways to run it:
/// - run(f): starts the workers, runs f as the root fiber and returns when it
///   and every fiber it started have finished (then the workers stop);
/// - start() ... stop(): the workers run until stop(); meanwhile any thread
///   (a server's or a game's main thread, which does not live inside run())
///   hands the runtime work with spawn(f) or submit(f). stop() drains: it
///   waits for every fiber to finish. Destroying a started runtime stops it.
///
/// Errors: the constructor throws std::invalid_argument for bad options. run()
/// or start() while this runtime is already running, stop() without start(),
/// stop() from one of its own fibers, and spawn/submit on a runtime that is not
/// running throw std::logic_error.
class runtime {
 public:
  using options = runtime_options;

  explicit runtime(options opts = {});
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  /// Runs `f` as the root fiber on the workers and blocks the caller (an OS
  /// thread, or a fiber of *another* runtime) until `f` has returned and every
  /// fiber started during the run has finished — detached ones and sleeping ones
  /// included (a fiber parked forever therefore keeps run() waiting, as a thread
  /// parked forever keeps join() waiting). Returns f's value or rethrows its
  /// exception. May be called again after it returns.
  template <class F>
  std::invoke_result_t<std::decay_t<F>&> run(F&& f) {
    using R = std::invoke_result_t<std::decay_t<F>&>;
    static_assert(!std::is_reference_v<R>, "runtime::run: the root function must return by value");
    if constexpr (std::is_void_v<R>) {
      run_root(detail::unique_function([&f] { std::invoke(f); }));
    } else {
      std::optional<R> out;
      run_root(detail::unique_function([&f, &out] { out.emplace(std::invoke(f)); }));
      return std::move(*out);
    }
  }

  /// Starts the workers and returns at once; they run until stop().
  void start();
  /// Waits until every fiber of this runtime has finished (those started
  /// meanwhile included), then stops the workers. Called from a thread or from
  /// a fiber of another runtime, never from one of this runtime's fibers.
  void stop();
  /// Whether the workers run (inside run(), or between start() and stop()).
  bool running() const noexcept;

  /// Starts f(args...) as a detached fiber of this running runtime, from any
  /// thread or fiber — tessera::spawn (Go's `go`) for a caller that is not one
  /// of its fibers. From a plain thread the fiber goes to the runtime's global
  /// queue and wakes a sleeping worker. An exception escaping f terminates the
  /// program, as one escaping a detached std::thread does; to wait for the
  /// fiber or see its exception, use submit(). Throws std::logic_error if not
  /// running (f is then not started).
  template <class F, class... Args>
  TESSERA_SPAWN_INLINE void spawn(F&& f, Args&&... args);

  /// As spawn(), with a handle: returns a future whose get() waits (parks a
  /// fiber, blocks a thread) and returns f's value or rethrows its exception.
  /// Discarding the future lets the fiber run on (see future).
  template <class F, class... Args>
  [[nodiscard]] TESSERA_SPAWN_INLINE auto submit(F&& f, Args&&... args)
      -> future<std::invoke_result_t<std::decay_t<F>&, std::decay_t<Args>&...>>;

  /// Number of worker threads.
  unsigned workers() const noexcept;
  const options& config() const noexcept;
  /// Where the workers go (cores, PUs, pinning, any hwloc fallback) and which
  /// I/O poller backs the runtime.
  std::string describe() const;
  /// The I/O backend in use: what io_backend::automatic (or the environment)
  /// resolved to, and how describe() names it ("epoll (edge-triggered)", ...).
  io_backend io() const noexcept;
  const char* io_name() const noexcept;

  /// Writes every fiber of this runtime to `os`, in the style of Go's
  /// goroutine dump: its id, whether it is parked, what it waits for (the
  /// primitive's kind and address, a socket's descriptor, the fiber a join
  /// waits for) and for how long; identical waits print once, with their
  /// count and ids. Then each worker, sleeping or busy. A snapshot: callable
  /// from any thread or fiber at any time, even while the runtime runs; it
  /// takes no lock the scheduler uses.
  ///
  ///   fiber 17 [socket read fd 9, 2.4 s]
  ///   1000 fibers [latch 0x7ffd5c1e0a40, 1.2 s to 1.3 s]: 18 19 20 ...
  void dump(std::ostream& os) const;

  /// Writes the trace the workers recorded (runtime_options::trace_events:
  /// each worker's last events) to `os` as Chrome trace-event JSON, which
  /// Perfetto (ui.perfetto.dev) and chrome://tracing open: a track per
  /// worker, a slice per fiber run ending with why (parked on what, yielded,
  /// finished), the jobs inside it, the worker's sleeps, instants for
  /// creations, steals and I/O readiness, and an arrow from each unpark to
  /// the woken fiber's next run (unparks by threads outside the runtime are
  /// not recorded). Call it while the runtime does not run (after run()
  /// returns, or after stop()); std::logic_error otherwise, or if tracing is
  /// off.
  void write_trace(std::ostream& os) const;

  /// One worker's counters since construction (statistics::per_worker).
  struct worker_statistics {
    std::uint64_t fibers_run = 0;      // runs that ended: a park, a yield or the end
    std::uint64_t parks = 0;           // times a fiber parked and switched out
    std::uint64_t steals = 0;          // fibers and jobs it took from other workers
    std::uint64_t sleeps = 0;          // times it went to sleep (futex or poller)
    std::chrono::nanoseconds idle{0};  // time spent idle: spinning for work and asleep
    std::uint64_t io_events = 0;       // descriptor readiness events it delivered
    std::uint64_t jobs_run = 0;        // jobs (tessera/jobs.h) it ran
  };

  /// Counters since construction (for tests, benchmarks and the samples'
  /// --stats). A snapshot: any thread, any time; each counter is exact once
  /// the runtime has stopped, and may lag by a few events while it runs.
  struct statistics {
    std::uint64_t fibers_started = 0;
    std::uint64_t steals = 0;          // fibers and jobs taken from others (the workers' sum)
    std::uint64_t runnext_steals = 0;  // of those, from a stale runnext slot
    std::uint64_t remote_wakeups = 0;  // unparks that went through an inbox
    std::uint64_t worker_sleeps = 0;   // times a worker went to sleep (the workers' sum)
    unsigned sleeping_workers = 0;     // workers asleep right now
    unsigned deep_sleeping_workers = 0;  // of those, asleep without watching runnext slots
    std::size_t timer_entries = 0;  // timer heap entries, with those of waits that ended early
    /// io_backend::io_uring: receive buffers holding bytes not yet read, now.
    std::uint32_t io_buffers_in_use = 0;
    /// io_backend::io_uring: times a stream's multishot receive found every
    /// buffer taken and ended (its reader then used recv(2) until it re-armed).
    std::uint64_t io_buffers_ran_dry = 0;
    std::vector<worker_statistics> per_worker;  // indexed by worker
  };
  statistics stats() const;

 private:
  friend detail::runtime_impl* detail::impl_of(runtime& rt) noexcept;
  void run_root(detail::unique_function root);
  detail::fiber_record* spawn_record(detail::unique_function body, bool joinable);
  std::unique_ptr<detail::runtime_impl> impl_;
};

/// A fiber, with std::thread's interface. The body runs on the runtime of the
/// fiber that creates it; a fiber can only be created from a fiber of a running
/// runtime (std::logic_error otherwise).
///
/// An exception that escapes the body is stored and rethrown by join(); escaping
/// a detached fiber's body it calls std::terminate (as std::thread does), after
/// printing the fiber id and what(). Destroying or assigning over a joinable
/// fiber prints a message naming the fiber and calls std::terminate: keep the
/// handle and join() or detach() it (tessera::spawn starts a detached fiber).
class [[nodiscard]] fiber {
 public:
  /// Fiber identity; id{} is "not a fiber". Ordered, hashable, printable.
  class id {
   public:
    id() noexcept = default;
    explicit id(std::uint64_t v) noexcept : value_(v) {}
    std::uint64_t value() const noexcept { return value_; }
    friend bool operator==(id, id) noexcept = default;
    friend auto operator<=>(id, id) noexcept = default;
    friend std::ostream& operator<<(std::ostream& os, id i);

   private:
    std::uint64_t value_ = 0;
  };

  fiber() noexcept = default;
  template <class F, class... Args,
            class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, fiber>>>
  TESSERA_SPAWN_INLINE explicit fiber(F&& f, Args&&... args)
      : rec_(detail::start_fiber(detail::bind_call(std::forward<F>(f), std::forward<Args>(args)...),
                                 true)) {}
  fiber(fiber&& o) noexcept : rec_(std::exchange(o.rec_, nullptr)) {}
  fiber& operator=(fiber&& o) noexcept;
  ~fiber();
  fiber(const fiber&) = delete;
  fiber& operator=(const fiber&) = delete;

  bool joinable() const noexcept { return rec_ != nullptr; }
  /// Waits (parking: usable from fibers and threads) until the fiber ends; rethrows
  /// its exception. Throws std::system_error (invalid_argument) if not joinable,
  /// (resource_deadlock_would_occur) if a fiber joins itself.
  void join();
  /// Lets the fiber run on alone. Throws std::system_error if not joinable.
  void detach();
  id get_id() const noexcept { return id(rec_ != nullptr ? detail::fiber_id_of(rec_) : 0); }

 private:
  friend class runtime;
  explicit fiber(detail::fiber_record* rec) noexcept : rec_(rec) {}
  detail::fiber_record* rec_ = nullptr;
};

/// The result of runtime::submit: a value (or exception) that will be there
/// once the submitted fiber has ended. Movable, not copyable. get() may be
/// called once. Destroying a future that was never waited on lets the fiber
/// run on (it is detached), as a discarded std::thread would not.
template <class R>
class [[nodiscard]] future {
 public:
  future() noexcept = default;
  future(future&&) noexcept = default;
  future& operator=(future&& o) noexcept {
    if (this != &o) {
      if (fiber_.joinable()) fiber_.detach();
      fiber_ = std::move(o.fiber_);
      box_ = std::move(o.box_);
    }
    return *this;
  }
  ~future() {
    if (fiber_.joinable()) fiber_.detach();
  }

  /// Whether this future refers to a submitted fiber whose result was not yet taken.
  bool valid() const noexcept { return box_ != nullptr; }
  /// Waits until the fiber has ended: parks a fiber, blocks a thread.
  /// Precondition: valid() (else throws std::logic_error).
  void wait() {
    if (!valid()) throw std::logic_error("tessera::future::wait: no result to wait for");
    if (fiber_.joinable()) fiber_.join();
  }
  /// Waits, then returns the fiber's value or rethrows its exception; after
  /// it, valid() is false.
  R get() {
    wait();
    auto result = std::move(box_);
    if (result->error != nullptr) std::rethrow_exception(result->error);
    if constexpr (!std::is_void_v<R>) return std::move(*result->value);
  }

 private:
  friend class runtime;
  struct result_box {
    std::conditional_t<std::is_void_v<R>, bool, std::optional<R>> value{};
    std::exception_ptr error;
  };
  fiber fiber_;
  std::shared_ptr<result_box> box_;
};

template <class F, class... Args>
TESSERA_SPAWN_INLINE void runtime::spawn(F&& f, Args&&... args) {
  spawn_record(detail::bind_call(std::forward<F>(f), std::forward<Args>(args)...), false);
}

template <class F, class... Args>
TESSERA_SPAWN_INLINE auto runtime::submit(F&& f, Args&&... args)
    -> future<std::invoke_result_t<std::decay_t<F>&, std::decay_t<Args>&...>> {
  using R = std::invoke_result_t<std::decay_t<F>&, std::decay_t<Args>&...>;
  future<R> out;
  out.box_ = std::make_shared<typename future<R>::result_box>();
  auto body = [box = out.box_, fn = std::forward<F>(f),
               tup = std::make_tuple(std::forward<Args>(args)...)]() mutable {
    try {
      if constexpr (std::is_void_v<R>) {
        std::apply([&fn](auto&... a) { std::invoke(fn, a...); }, tup);
      } else {
        box->value.emplace(std::apply([&fn](auto&... a) { return std::invoke(fn, a...); }, tup));
      }
    } catch (...) {
      box->error = std::current_exception();
    }
  };
  out.fiber_ = fiber(spawn_record(detail::unique_function(std::move(body)), true));
  return out;
}

/// Starts a detached fiber running f(args...) — Go's `go` statement. Same
/// preconditions as fiber's constructor.
template <class F, class... Args>
TESSERA_SPAWN_INLINE void spawn(F&& f, Args&&... args) {
  detail::start_fiber(detail::bind_call(std::forward<F>(f), std::forward<Args>(args)...), false);
}

/// Operations on the calling fiber. Called on an OS thread that is not a fiber,
/// they act on the thread (std::this_thread) and get_id() returns fiber::id{}.
namespace this_fiber {
/// Lets every other runnable fiber on this runtime run before the caller again
/// (the caller goes to the back of the global queue).
void yield();
/// The calling fiber's id, or fiber::id{} on a thread.
fiber::id get_id() noexcept;
/// Names the calling fiber, for runtime::dump, the deadlock and stall
/// reports and gdb ("fiber 17 \"conn 127.0.0.1:5512\" [...]"). Names need
/// not be unique; the first 47 bytes are kept; a new fiber has none. On an OS
/// thread that is not a fiber it sets the thread's name, which Linux cuts to
/// 15 bytes. Throws nothing on a fiber.
void set_name(std::string_view name);
/// The name set_name() gave the calling fiber (thread), or "".
std::string get_name();
/// Locks the calling fiber to the worker thread running it, as Go's
/// `runtime.LockOSThread`: until the matching unlock_os_thread() it runs on
/// that OS thread alone, whatever it waits for, so a thread-affine library (a
/// graphics context, a C library that keeps per-thread state, `thread_local`s
/// of your own) sees one thread. Calls nest: the fiber is unlocked when every
/// lock_os_thread() has had its unlock_os_thread(). Other fibers still run on
/// that worker between its parks; the locked fiber is never stolen, so an
/// idle worker cannot help it. A fiber's lock ends with the fiber; a job
/// (jobs.h) runs on a worker's fiber and must unlock before it returns. On
/// an OS thread that is not a fiber, both calls do nothing (it never moves).
void lock_os_thread() noexcept;
/// Undoes one lock_os_thread(); without one, does nothing (as Go's).
void unlock_os_thread() noexcept;
/// Whether the caller stays on its OS thread across waits: a locked fiber,
/// or any OS thread.
bool os_thread_locked() noexcept;
/// Parks until `deadline` (steady clock); never returns early. Other clocks are
/// converted once at the call.
void sleep_until(std::chrono::steady_clock::time_point deadline);
template <class Clock, class Duration>
void sleep_until(const std::chrono::time_point<Clock, Duration>& t) {
  sleep_until(*detail::deadline::at(t));
}
template <class Rep, class Period>
void sleep_for(const std::chrono::duration<Rep, Period>& d) {
  sleep_until(*detail::deadline::after(d));
}
}  // namespace this_fiber

/// Fiber-local storage: one T per fiber (per OS thread, when used outside
/// fibers), created on first access from a copy of the initial value and
/// destroyed when its fiber ends (its thread exits). The object itself may be a
/// global or static; it must outlive every access.
template <class T>
class fiber_local {
 public:
  fiber_local() : init_() {}
  explicit fiber_local(T initial) : init_(std::move(initial)) {}
  fiber_local(const fiber_local&) = delete;
  fiber_local& operator=(const fiber_local&) = delete;

  /// The calling fiber's (thread's) T.
  T& get() {
    void*& slot = detail::fls_slot(key_, [](void* p) noexcept { delete static_cast<T*>(p); });
    if (slot == nullptr) slot = new T(init_);
    return *static_cast<T*>(slot);
  }
  T& operator*() { return get(); }
  T* operator->() { return &get(); }

 private:
  const std::uint64_t key_ = detail::fls_new_key();
  T init_;
};

}  // namespace tessera

template <>
struct std::hash<tessera::fiber::id> {
  std::size_t operator()(tessera::fiber::id i) const noexcept {
    return std::hash<std::uint64_t>{}(i.value());
  }
};

#undef TESSERA_SPAWN_INLINE
