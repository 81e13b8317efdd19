// tessera/park.h — the park façade: self(), park(), park_until(), unpark().
//
// Every synchronization primitive in Tessera is written once against these four
// calls (docs/design.md, "The park contract"). They work the same for OS
// threads (futex) and for fibers (the scheduler's path, plugged in through
// `park_ops`), so a primitive never knows which kind of caller it serves.
//
// Contract
// - Identity: `self()` returns the caller's `waiter*` — the running fiber when
//   called on a fiber, else the calling OS thread. One thread_local read.
// - Permit: each waiter owns one permit. `unpark(w)` makes it available (it does
//   not accumulate: two unparks before a park still leave one permit) and wakes
//   `w` if parked. `park()` consumes the permit, blocking until there is one.
// - Spurious wake-ups: `park()` may return without a matching `unpark()` (a stale
//   unpark from an earlier wait, see below). Every caller loops on its own
//   condition; the primitives in sync/ all do.
// - Memory ordering: an `unpark(w)` that makes a permit available
//   synchronizes-with the `park()`/`park_until()` of `w` that consumes it
//   (release/acquire on the permit word).
// - Type-stable identities: waiter records are recycled, never freed, for the
//   life of the process. Unparking a thread that has exited (or a finished fiber)
//   is harmless: it costs the record's next owner at most one spurious wake-up.
//   This is what lets the wait chains' `poke` (Dice & Kogan, Listing 3) unpark a
//   waiter whose on-stack wait element may already be gone.
// - Who may call: any OS thread or fiber. `unpark` may target a fiber from a
//   thread and a thread from a fiber. None of these calls is async-signal-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "tessera/detail/holder_mark.h"
#include "tessera/detail/tick_clock.h"

namespace tessera {

class waiter;

/// Operations of one kind of waiter: the single seam between the façade and a
/// scheduler. The façade dispatches every park/unpark through the waiter's
/// `ops`; OS threads use the futex implementation in park/park.cpp, and the
/// fiber scheduler supplies its own table for fiber waiters.
struct park_ops {
  /// Block `self` until its permit is available, then consume it. May return spuriously.
  void (*park)(waiter& self);
  /// As `park`, but gives up at `deadline`. Returns true if a permit was consumed.
  bool (*park_until)(waiter& self, std::chrono::steady_clock::time_point deadline);
  /// Make `who`'s permit available and wake it if parked. Must tolerate stale `who`.
  void (*unpark)(waiter& who) noexcept;
  /// Give the processor to another runnable thread/fiber, staying runnable.
  void (*yield)(waiter& self);
  /// Kind name, for diagnostics ("thread", "fiber").
  const char* name;
  /// True for OS threads, false for fibers. Decides whether spinning before a
  /// park pays (a thread's futex sleep and wake-up costs microseconds; a fiber's
  /// park is a user-space switch, and spinning would hold the worker that the
  /// awaited fiber may need) and how often fairness may cost a hand-off.
  bool is_os_thread;
};

/// What a waiter is blocked on, for diagnostics (runtime::dump). Written by
/// the waiter itself on a primitive's slow path, before it parks (wait_scope),
/// and cleared when the wait ends; read from other threads as a snapshot
/// (relaxed atomics: a dump may see a wait that has just ended).
struct wait_info {
  /// What the primitive is ("mutex", "latch", "channel receive", ...), a
  /// string with static storage; null while the waiter waits for nothing.
  std::atomic<const char*> kind{nullptr};
  /// The primitive's address.
  std::atomic<const void*> object{nullptr};
  /// When the wait began, as a detail::tick_clock stamp (the TSC where it is
  /// invariant, else the monotonic clock): opaque; read it through since_ns().
  /// Stamped lazily, as Go's `waitsince`: a primitive that reads the clock on
  /// its slow path anyway (the barging locks' fairness timer) stamps its wait
  /// at once; any other wait is 0 until an observer first sees it
  /// (seen_since(): the runtime's watchdog, a few times per deadlock_grace,
  /// and every dump) and stamps it with that moment. So a wait's age is
  /// short by at most the time to that first look, and a wait that nobody
  /// looks at costs no clock read.
  std::atomic<std::int64_t> since{0};
  /// A number that says more, or -1: the descriptor of a socket wait, the id
  /// of the fiber a join waits for.
  std::atomic<std::int64_t> detail{-1};
  /// Where the primitive keeps who holds it (the mutexes' and the
  /// shared_mutex writer's holder_mark), or null: the deadlock report follows
  /// it to print the cycle of waits.
  std::atomic<const detail::holder_mark*> holder{nullptr};

  /// When the wait began (see `since`): nanoseconds on std::chrono::
  /// steady_clock's base (CLOCK_MONOTONIC); 0 while there is no wait or
  /// nobody has looked at it yet. Costs a clock read: for diagnostics.
  std::int64_t since_ns() const noexcept;
  /// For observers: the wait's stamp, after stamping it with the present
  /// moment if it had none (the first look). Call it only while `kind` is
  /// set; a wait that ends meanwhile is harmless (the next one may carry a
  /// stamp a few microseconds early).
  std::int64_t seen_since() noexcept;
};

/// An identity that can park: an OS thread or a fiber.
///
/// Records are type-stable (never freed while the process lives), so a pointer to
/// one stays safe to `unpark` forever. The fields are the façade's and the
/// scheduler's business; sync/ only passes `waiter*` around.
class alignas(64) waiter {
 public:
  /// Permit word. For OS threads it is the futex word: 0 empty, 1 permit
  /// available, -1 parked (see park/park.cpp).
  std::atomic<std::int32_t> state{0};
  /// How this waiter parks and is unparked.
  const park_ops* ops = nullptr;
  /// Owner-defined context (the fiber record for fibers, null for threads).
  void* context = nullptr;
  /// The identity's location-wait element (tessera/location_wait.h), created at
  /// its first location_wait and kept, like the record, for good. Touched only
  /// by the record's current owner.
  void* location_element = nullptr;
  /// Changes whenever the record is handed to a new owner (a thread or fiber
  /// starting on a recycled record), so state an earlier owner left behind can
  /// be told from the current owner's.
  std::uint32_t generation = 0;
  /// What it waits for right now (diagnostics; see wait_info).
  wait_info wait;
};

waiter* self() noexcept;  // declared with its contract below

/// Marks the caller as waiting on `object` (a primitive of kind `kind`, a
/// string with static storage) for its lifetime, for runtime::dump. The
/// primitives open one on their slow paths only, so an uncontended call
/// writes nothing. The outermost scope wins: a primitive built on another
/// (an event on its gate semaphore) is shown as itself, and an inner scope
/// records nothing. Any thread or fiber may open one; the same caller closes
/// it (it is a local).
class wait_scope {
 public:
  wait_scope(const char* kind, const void* object, std::int64_t detail = -1,
             const detail::holder_mark* holder = nullptr) noexcept
      : wait_scope(self(), kind, object, detail, holder) {}
  /// As above for `who`, the caller's self() (saves a second read of it).
  wait_scope(waiter* who, const char* kind, const void* object, std::int64_t detail = -1,
             const detail::holder_mark* holder = nullptr) noexcept
      : who_(who) {
    record(0, kind, object, detail, holder);
  }
  /// As above, for a wait that began at `began`, a detail::tick_clock::now()
  /// reading the caller took (it times the wait itself: one clock read), or 0
  /// when it took none (the wait is then dated at its first observer's look).
  wait_scope(waiter* who, std::int64_t began, const char* kind, const void* object,
             std::int64_t detail = -1, const detail::holder_mark* holder = nullptr) noexcept
      : who_(who) {
    record(began != 0 ? detail::tick_clock::stamp(began) : 0, kind, object, detail, holder);
  }
  ~wait_scope() {
    if (who_ != nullptr) who_->wait.kind.store(nullptr, std::memory_order_relaxed);
  }
  wait_scope(const wait_scope&) = delete;
  wait_scope& operator=(const wait_scope&) = delete;

 private:
  /// Writes who_'s wait record, with `stamp` as wait_info::since (0: none
  /// yet), unless an outer scope has (then who_ becomes null).
  inline void record(std::int64_t stamp, const char* kind, const void* object, std::int64_t detail,
                     const detail::holder_mark* holder) noexcept;
  waiter* who_;  // null when an outer scope records the wait
};

/// The caller's identity: the current fiber, else the calling OS thread.
/// Never null. Cost: one thread_local read after the thread's first call.
waiter* self() noexcept;

// Inline: it runs on every slow path of every primitive. Relaxed: the record
// is a snapshot for diagnostics; nothing synchronizes through it, and only
// its owner writes it (and an observer's first look, which stamps it). No
// clock read unless the caller has one (wait_info::since).
inline void wait_scope::record(std::int64_t stamp, const char* kind, const void* object,
                               std::int64_t detail, const detail::holder_mark* holder) noexcept {
  wait_info& w = who_->wait;
  if (w.kind.load(std::memory_order_relaxed) != nullptr) {
    who_ = nullptr;  // an outer scope says what we wait for
    return;
  }
  w.since.store(stamp, std::memory_order_relaxed);
  w.object.store(object, std::memory_order_relaxed);
  w.detail.store(detail, std::memory_order_relaxed);
  w.holder.store(holder, std::memory_order_relaxed);
  w.kind.store(kind, std::memory_order_relaxed);
}

/// Blocks the caller until its permit is available, then consumes it.
/// May return spuriously; callers loop on their own condition.
void park();

/// `park()` with a deadline on std::chrono::steady_clock.
/// Returns true if a permit was consumed, false if `deadline` passed first (the
/// call never returns false before `deadline`).
bool park_until(std::chrono::steady_clock::time_point deadline);

/// Lets another runnable thread (sched_yield) or fiber (the worker's next) run;
/// the caller stays runnable. For polite waiting phases between spin and park.
void yield_now();

/// Whether the caller should spin briefly before parking (see park_ops::is_os_thread):
/// true on an OS thread, false on a fiber. The primitives' spin phases ask this.
bool should_spin() noexcept;

/// Makes `who`'s permit available (at most one; permits do not accumulate) and
/// wakes it if parked. Precondition: `who` came from `self()` (possibly on a
/// thread or fiber that has since ended: that is harmless). `who == nullptr`
/// is ignored. Inline: one indirect call through the waiter's operations.
inline void unpark(waiter* who) noexcept {
  if (who != nullptr) who->ops->unpark(*who);
}

namespace detail {
/// The running identity slot, for the scheduler: a worker sets it to the fiber
/// it switches to and back to its own thread waiter when the fiber yields.
waiter*& current_waiter_slot() noexcept;
/// The calling OS thread's own waiter (ignores any fiber running on it).
waiter* thread_waiter() noexcept;
/// The futex-based operations used by OS-thread waiters.
extern const park_ops thread_park_ops;
/// How many times, process-wide, an OS thread has gone to sleep in park() or
/// park_until(), or been woken from one by unpark(): counted on those slow
/// paths only. The deadlock watchdog's sign that threads outside a runtime
/// still use the primitives (and so may yet wake its fibers).
std::uint64_t thread_sleeps_and_wakes() noexcept;
}  // namespace detail

}  // namespace tessera
