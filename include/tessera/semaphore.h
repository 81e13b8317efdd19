// tessera/semaphore.h — counting_semaphore and binary_semaphore (std::'s
// interface, P0514R2 §33.7), built as Dice & Kogan's TWA-Semaphore
// ("Semaphores Augmented with a Waiting Array", Listings 1-4) over Tessera's
// waiting chains.
//
// Contract
// - Admission, chosen per semaphore (`admission`):
//     fifo        strict first-come-first-enabled: every blocking acquirer takes
//                 a ticket at once and tickets are served in fetch_add order.
//     restricted  (default) FIFO among tickets, but
//                 an acquirer that finds one ticket already queued beyond the
//                 holders waits in a FIFO lobby without one; the lobby's oldest
//                 is called in when a permit is free, or forced in after a
//                 fairness interval of progress without it
//                 (admission_lobby::kThreadFairness, 1 ms, for a thread;
//                 kFiberHandoffInterval, 40 µs, for a fiber). So a lobby of L
//                 callers empties within about L such intervals.
//     barging     no tickets (tessera/detail/barging_semaphore.h): a free permit
//                 goes to whoever takes it first; a waiter queued for 1 ms is
//                 handed one directly, at most once per 1 ms (thread) or 40 µs
//                 (fiber). Counts limited to 2^62-1.
//     faa         strict FIFO without a lock on any path: Koval & Elizarov's
//                 fetch-and-add semaphore on a segment queue of cells
//                 (tessera/detail/faa_semaphore.h). Waiters park at once (no
//                 spinning); a timed-out waiter's cell is paid for by the next
//                 release. The FIFO order is that of the cells: a waiter
//                 delayed between its fetch-and-add and its cell can be
//                 overtaken, and the later waiter takes the permit released
//                 for it (linearizable as a dual data structure, not as a
//                 plain counter). Not constexpr (it allocates its first
//                 segment).
//     faa_restricted  faa behind a lobby, as restricted is fifo behind one: an
//                 acquirer that finds a waiter already queued beyond the
//                 permits waits, parked, in a FIFO lobby (under a lock); the
//                 lobby's oldest is called in when a permit is free, or forced
//                 in after it has been oldest for 1 ms (thread) or 40 µs
//                 (fiber). FIFO within the queue and within the lobby; an
//                 acquirer that finds no waiter queued passes the lobby.
//     handoff     strict FIFO under one small lock
//                 (tessera/detail/handoff_semaphore.h): the count and a queue
//                 of parked callers share the lock, and a release that finds
//                 callers queued hands its permits straight to the oldest. The
//                 cheapest hand-off between fibers (four locked RMWs to the TWA
//                 semaphore's six); OS threads poll their node about 20 µs
//                 before parking, but a hand-off between two running threads
//                 moves one cache line more than the TWA semaphore's (about 2x
//                 its round trip). As a lock among more threads than cores it
//                 convoys as fifo does: prefer restricted there.
//   try_acquire never waits; except under barging it also never barges (it
//   succeeds only if a permit is free and nobody is queued).
// - No spurious failure: acquire() returns only with a permit; try_acquire_for/
//   until return false only after the deadline (durations in any std::chrono
//   unit; clocks other than steady_clock are converted once at the call). A
//   caller that times out leaves nothing behind and disturbs nobody's order.
// - Who may call: fibers and OS threads, mixed; a waiting fiber parks (its
//   worker runs other fibers). release() may be called by anyone.
// - Memory ordering: a release() synchronizes-with every acquire it admits.
// - Lifetime: destroying a semaphore with waiters is undefined; debug builds
//   (TESSERA_CHECKS) abort with a message saying so.
// - Misuse: an initial count outside [0, max()], release(n) with n < 0 or
//   n > max() throw std::invalid_argument, state unchanged; a release past
//   max() throws before any change when no other release races, and in debug
//   builds a racing overshoot aborts.
//
// State (fifo/restricted)
//   ticket_   64-bit count of acquisitions started (fetch_add by acquirers)
//   grant_    64-bit count of acquisitions admitted (fetch_add by release)
//             permits free = grant_ - ticket_ when positive; waiter of ticket t
//             is admitted once grant_ > t
//   cancelled_  tickets whose waiters timed out, not yet passed by grant_:
//             each release forwards their permits to the next tickets
//   lobby     FIFO of restricted-admission callers holding no ticket
// How each part works (timed cancellation, the lobby, the chains) is told in
// sync/semaphore.cpp.
#pragma once

#include <tessera/detail/barging_semaphore.h>
#include <tessera/detail/cpu.h>
#include <tessera/detail/faa_semaphore.h>
#include <tessera/detail/handoff_semaphore.h>
#include <tessera/detail/lobby.h>
#include <tessera/detail/park_list.h>
#include <tessera/detail/spin_lock.h>
#include <tessera/wait_chain.h>
#include "tessera/detail/deadline.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <vector>

namespace tessera {

/// How a counting_semaphore admits acquirers (a Tessera extension).
enum class admission {
  /// Strict FIFO over every blocking acquirer: the paper's TWA semaphore.
  fifo,
  /// FIFO among queued tickets, with at most one of them queued beyond the
  /// holders; further acquirers wait in a FIFO lobby (the default).
  restricted,
  /// No tickets: a free permit goes to whoever takes it first, newcomers
  /// included, with eventual fairness (a waiter older than 1 ms is handed a
  /// permit). The throughput policy of sem_t and of tessera::mutex.
  barging,
  /// Strict FIFO by fetch-and-add on a segment queue (Koval & Elizarov): no
  /// lock on any path, waiters park at once. See docs/design.md for when to
  /// take it over the TWA semaphore.
  faa,
  /// faa with a lobby in front, as restricted is fifo with one: an acquirer
  /// that finds a waiter queued beyond the permits waits in a FIFO lobby
  /// (locked) instead of queueing; the queue itself takes no lock.
  faa_restricted,
  /// Strict FIFO with the count and the queue under one small lock: a release
  /// hands its permit straight to the oldest waiter. The cheapest hand-off
  /// between two parties (a signal, a ping-pong); as a lock among more threads
  /// than cores it convoys as fifo does.
  handoff,
};

namespace detail {

/// Tunables of the TWA semaphore's waiting strategy (process-wide; read on slow
/// paths only, so they may be changed at any time). Not an interface: the
/// defaults are the measured ones (docs/benchmarks.md); semabench's sweep and
/// the tests change them.
struct twa_tuning {
  /// Waiters fewer than this many tickets from the grant wait short-term
  /// (spin, then park); the others park at once. Listing 2 default: 1. 0 = never spin.
  std::atomic<std::uint32_t> long_term_threshold{1};
  /// Spin iterations (PAUSE each) a short-term waiter tries before parking.
  std::atomic<std::uint32_t> spin_iterations{1024};
  /// After spinning, times a short-term waiter yields its processor (staying
  /// runnable, so a preempted ticket holder can run) before it parks. Under
  /// oversubscription this turns a futex wake per hand-off into a cheaper yield.
  std::atomic<std::uint32_t> yield_iterations{0};
  /// Concurrency restriction (admission::restricted): an acquirer that finds
  /// this many tickets or more queued beyond the grant waits in the lobby
  /// instead of taking one. Read when a semaphore is constructed. Default 1:
  /// the holder(s) plus one queued successor circulate (see "Concurrency
  /// restriction" above). 0 turns restriction off for semaphores built afterwards.
  std::atomic<std::uint32_t> admission_window{kDefaultAdmissionWindow};

  /// admission_window's default; also the window of semaphores initialised at
  /// compile time (constinit), which are built before any code could tune it.
  static constexpr std::uint32_t kDefaultAdmissionWindow = 1;
};

/// The process-wide tuning block.
twa_tuning& twa_config() noexcept;

/// The untyped TWA semaphore behind counting_semaphore<N>. Fast paths inline;
/// waiting, waking and cancellation in sync/semaphore.cpp.
class twa_semaphore {
 public:
  /// constexpr: a constinit semaphore needs no dynamic initialisation (its
  /// window is then twa_tuning::kDefaultAdmissionWindow).
  constexpr twa_semaphore(std::ptrdiff_t desired, std::ptrdiff_t max, admission mode)
      : grant_(checked_initial(desired, max, max, "")), window_(initial_window(mode)) {}
  ~twa_semaphore();
  twa_semaphore(const twa_semaphore&) = delete;
  twa_semaphore& operator=(const twa_semaphore&) = delete;

  void acquire() {
    if (crowded()) [[unlikely]] {
      enter_from_lobby(lobby_wait({}), {});
      return;
    }
    const std::uint64_t t = ticket_.fetch_add(1, std::memory_order_seq_cst);
    if (admitted(t)) return;
    wait(t, {});
  }

  bool try_acquire() noexcept {
    std::uint64_t t = ticket_.load(std::memory_order_relaxed);
    // Succeed only if ticket t would be admitted at once: never jumps the queue.
    while (admitted(t)) {
      if (ticket_.compare_exchange_weak(t, t + 1, std::memory_order_seq_cst,
                                        std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }

  bool try_acquire_until(std::chrono::steady_clock::time_point deadline) {
    if (try_acquire()) return true;
    if (detail::steady_now() >= deadline) return false;  // take no ticket
    if (crowded()) [[unlikely]] {
      const lobby_leave left = lobby_wait(deadline);
      if (left.how == admission_lobby::exit::timed_out) return try_acquire();  // no ticket held
      return enter_from_lobby(left, deadline);
    }
    const std::uint64_t t = ticket_.fetch_add(1, std::memory_order_seq_cst);
    if (admitted(t)) return true;
    return wait(t, deadline);
  }

  void release(std::ptrdiff_t update, std::ptrdiff_t max) {
    if (update < 0 || update > max) [[unlikely]]
      bad_update(update, max);
    const auto n = static_cast<std::uint64_t>(update);
    if (max != std::numeric_limits<std::ptrdiff_t>::max()) check_headroom(n, max);
    const std::uint64_t g = grant_.fetch_add(n, std::memory_order_seq_cst);
    const std::uint64_t t = ticket_.load(std::memory_order_seq_cst);
    // Fast-path shortcut (Listing 2): no ticket beyond the old grant, so nobody
    // waits and nothing was cancelled that this release could reach.
    if (static_cast<std::int64_t>(t - g) <= 0) {
      // Dekker pair with lobby_wait(): "RMW grant; LD lobby_" here against
      // "RMW lobby_; LD grant" there. A permit is free now: call the lobby in.
      if (lobby_.size() != 0) admit_from_lobby();
      return;
    }
    after_release(g, n, t, max);
  }

  /// Permits currently free (0 when anybody waits). A snapshot, for tests and debugging.
  std::ptrdiff_t available() const noexcept {
    const auto d = static_cast<std::int64_t>(grant_.load() - ticket_.load());
    return d > 0 ? static_cast<std::ptrdiff_t>(d) : 0;
  }

  /// Tickets queued and not cancelled: threads/fibers waiting right now. A snapshot.
  std::ptrdiff_t waiting() const noexcept { return queued() + lobby(); }

  /// Callers holding a ticket that is not yet admitted (and not cancelled). A snapshot.
  std::ptrdiff_t queued() const noexcept {
    const auto d = static_cast<std::int64_t>(ticket_.load() - grant_.load()) -
                   static_cast<std::int64_t>(cancelled_.load());
    return d > 0 ? static_cast<std::ptrdiff_t>(d) : 0;
  }

  /// Callers waiting in the lobby, holding no ticket yet. A snapshot.
  std::ptrdiff_t lobby() const noexcept { return lobby_.size(); }

 private:
  /// Restricted admission and the queue already holds `window_` tickets or more:
  /// wait in the lobby before taking one. Two loads of the line about to be
  /// written anyway; window_ 0 (admission::fifo) always answers false.
  bool crowded() const noexcept {
    const auto queued = static_cast<std::int64_t>(ticket_.load(std::memory_order_relaxed) -
                                                  grant_.load(std::memory_order_relaxed));
    return queued >= static_cast<std::int64_t>(window_) && window_ != 0;
  }
  bool admitted(std::uint64_t t) const noexcept {
    return static_cast<std::int64_t>(grant_.load(std::memory_order_seq_cst) - t) > 0;
  }
  /// Listing 3's TWAHash: consecutive tickets 17 chains apart. Short-term
  /// waiters (and fibers) wait here for admission.
  /// The per-semaphore base is derived from the address (computed here rather
  /// than stored, so the constructor stays constexpr), dropping the low bits
  /// that alignment makes zero.
  std::uint32_t twa_hash(std::uint64_t ticket) const noexcept {
    const auto base =
        static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(this) >> 7) * 0x9E37u;
    return base + static_cast<std::uint32_t>(ticket) * 17u;
  }
  static constexpr std::uint32_t initial_window(admission mode) noexcept {
    if (mode == admission::fifo) return 0;
    if (std::is_constant_evaluated()) return twa_tuning::kDefaultAdmissionWindow;
    return twa_config().admission_window.load(std::memory_order_relaxed);
  }
  /// Where long-term waiters (threads only) wait to come within the threshold:
  /// half the table away from twa_hash(ticket), so the successor-of-successor
  /// poke never wakes a fiber, which waits for admission directly.
  std::uint32_t twa_hash_near(std::uint64_t ticket) const noexcept {
    return twa_hash(ticket) + static_cast<std::uint32_t>(chain_count / 2);
  }

  bool wait(std::uint64_t t, detail::deadline deadline);
  /// How a caller left the lobby (admission_lobby::exit), and the ticket a
  /// forced member took under the lobby's lock (else unused).
  struct lobby_leave {
    admission_lobby::exit how;
    std::uint64_t ticket;
  };
  lobby_leave lobby_wait(detail::deadline deadline);
  bool enter_from_lobby(lobby_leave left, detail::deadline deadline);
  void admit_from_lobby() noexcept;
  // grant_ - ticket_ (seq_cst loads): permits free when positive.
  std::int64_t free_permits() const noexcept;
  bool cancel(std::uint64_t t);
  void wake(std::uint64_t old_grant, std::uint64_t n, std::uint64_t tickets) noexcept;
  void after_release(std::uint64_t old_grant, std::uint64_t n, std::uint64_t tickets,
                     std::ptrdiff_t max);
  void forward_cancelled();
  void check_headroom(std::uint64_t n, std::ptrdiff_t max) const;
  [[noreturn]] void bad_update(std::ptrdiff_t update, std::ptrdiff_t max) const;
  void lock_cancellations() noexcept { cancel_lock_.lock(); }
  void unlock_cancellations() noexcept { cancel_lock_.unlock(); }

  // Ticket and grant share a line: release's shortcut reads both (Listing 2 note).
  alignas(128) std::atomic<std::uint64_t> ticket_{0};
  std::atomic<std::uint64_t> grant_{0};
  std::atomic<std::uint32_t> cancelled_{0};  // tickets in cancelled_list_
  // Waiters in the long-term phase (on a twa_hash_near chain). While it is 0 a
  // release skips the near chains: no successor-of-successor poke, one chain
  // touched per admitted ticket, not two (fibers never wait long-term).
  std::atomic<std::uint32_t> long_term_{0};
  std::uint32_t window_;  // admission_window, or 0 for admission::fifo
  spin_lock cancel_lock_;
  std::vector<std::uint64_t> cancelled_list_;  // guarded by cancel_lock_
  admission_lobby lobby_;                      // restricted admission's callers without a ticket
};

/// The core a counting_semaphore runs on: the TWA semaphore (admission::fifo,
/// admission::restricted), the barging one, the FAA one or the hand-off one,
/// chosen at construction. One read-only byte, on a line of its own, picks the path.
class semaphore_core {
  enum kind : unsigned char { kTwa, kBarging, kFaa, kHandoff };
  /// Calls `f` on the core in use (the TWA semaphore tested first: the default).
  template <class F>
  decltype(auto) visit(F&& f) {
    return visit_in(*this, f);
  }
  template <class F>
  decltype(auto) visit(F&& f) const {
    return visit_in(*this, f);
  }
  template <class Self, class F>
  static decltype(auto) visit_in(Self& self, F& f) {
    if (self.kind_ == kTwa) [[likely]]
      return f(self.u_.twa);
    if (self.kind_ == kBarging) return f(self.u_.barging);
    if (self.kind_ == kHandoff) return f(self.u_.handoff);
    return f(self.u_.faa);
  }

 public:
  constexpr semaphore_core(std::ptrdiff_t desired, std::ptrdiff_t max, admission mode)
      : kind_(mode == admission::barging                                    ? kBarging
              : mode == admission::handoff                                  ? kHandoff
              : mode == admission::faa || mode == admission::faa_restricted ? kFaa
                                                                            : kTwa),
        u_(desired, max, mode) {}
  ~semaphore_core() {
    switch (kind_) {
      case kBarging:
        u_.barging.~barging_semaphore();
        break;
      case kFaa:
        u_.faa.~faa_semaphore();
        break;
      case kHandoff:
        u_.handoff.~handoff_semaphore();
        break;
      default:
        u_.twa.~twa_semaphore();
    }
  }
  semaphore_core(const semaphore_core&) = delete;
  semaphore_core& operator=(const semaphore_core&) = delete;

  void acquire() {
    visit([](auto& c) { c.acquire(); });
  }
  bool try_acquire() noexcept {
    return visit([](auto& c) { return c.try_acquire(); });
  }
  bool try_acquire_until(std::chrono::steady_clock::time_point deadline) {
    return visit([deadline](auto& c) { return c.try_acquire_until(deadline); });
  }
  void release(std::ptrdiff_t update, std::ptrdiff_t max) {
    visit([update, max](auto& c) { c.release(update, max); });
  }
  std::ptrdiff_t available() const noexcept {
    return visit([](const auto& c) { return c.available(); });
  }
  std::ptrdiff_t waiting() const noexcept {
    return visit([](const auto& c) { return c.waiting(); });
  }
  /// Waiters holding their place in the queue: all of them, for the cores
  /// without a lobby.
  std::ptrdiff_t queued() const noexcept {
    return visit([](const auto& c) {
      if constexpr (requires { c.queued(); }) {
        return c.queued();
      } else {
        return c.waiting();
      }
    });
  }
  std::ptrdiff_t lobby() const noexcept {
    return visit([](const auto& c) -> std::ptrdiff_t {
      if constexpr (requires { c.lobby(); }) {
        return c.lobby();
      } else {
        return 0;
      }
    });
  }

 private:
  const kind kind_;
  union storage {
    // Activates the member `mode` asks for (construct_at: allowed in constant
    // evaluation, so the TWA and barging chains stay constexpr).
    constexpr storage(std::ptrdiff_t desired, std::ptrdiff_t max, admission mode) {
      if (mode == admission::barging) {
        std::construct_at(&barging, desired, max);
      } else if (mode == admission::handoff) {
        std::construct_at(&handoff, desired, max);
      } else if (mode == admission::faa || mode == admission::faa_restricted) {
        std::construct_at(&faa, desired, max, mode == admission::faa_restricted);
      } else {
        std::construct_at(&twa, desired, max, mode);
      }
    }
    ~storage() {}
    twa_semaphore twa;
    barging_semaphore barging;
    faa_semaphore faa;
    handoff_semaphore handoff;
  } u_;
};

}  // namespace detail

/// A counting semaphore with FIFO admission (the TWA semaphore or the FAA
/// semaphore, each with or without a lobby, or the hand-off core) or barging
/// admission, chosen at construction; API of std::counting_semaphore.
/// `LeastMaxValue`: the largest count it must hold.
template <std::ptrdiff_t LeastMaxValue = std::numeric_limits<std::ptrdiff_t>::max()>
class counting_semaphore {
  static_assert(LeastMaxValue >= 0, "tessera::counting_semaphore: LeastMaxValue must be >= 0");

 public:
  /// The largest count the semaphore holds: exactly LeastMaxValue.
  static constexpr std::ptrdiff_t max() noexcept { return LeastMaxValue; }

  /// Starts with `desired` free permits; `mode` chooses the admission
  /// described above (default: restricted; the others are Tessera
  /// extensions). Throws std::invalid_argument unless 0 <= desired <= max()
  /// (and, for barging, <= 2^62-1).
  /// constexpr, as std::counting_semaphore's: `constinit` globals work.
  constexpr explicit counting_semaphore(std::ptrdiff_t desired,
                                        admission mode = admission::restricted)
      : core_(desired, max(), mode) {}
  counting_semaphore(const counting_semaphore&) = delete;
  counting_semaphore& operator=(const counting_semaphore&) = delete;

  /// Adds `update` permits, admitting the next `update` queued acquirers in FIFO
  /// order (Listings 2/3, SemaPost). Wakes exactly the waiters it admits, plus
  /// the successor-of-successor when it comes within LongTermThreshold; permits
  /// left over call as many of the lobby's oldest members in (restricted admission).
  /// Barging: adds the permits and wakes as many of the oldest parked callers to
  /// compete for them (or hands one to a caller past the fairness timer).
  /// Precondition: 0 <= update <= max() and count + update <= max(); otherwise
  /// throws std::invalid_argument with nothing changed (see "Misuse" above).
  void release(std::ptrdiff_t update = 1) {
    detail::simulation_point();
    core_.release(update, max());
  }

  /// Takes a permit, waiting in FIFO order as long as needed (Listing 3, SemaTake):
  /// spins briefly when next in line, otherwise parks. With restricted admission
  /// and a full queue it first waits, parked, in the lobby (see above). Barging:
  /// takes a free permit at once whoever waits, else parks until woken to compete.
  void acquire() {
    detail::simulation_point();
    core_.acquire();
  }

  /// Takes a permit if one is free and nobody is queued; never waits, takes no
  /// ticket. Barging: takes a free permit even if others are queued.
  bool try_acquire() noexcept {
    detail::simulation_point();
    return core_.try_acquire();
  }

  /// Takes a permit, waiting at most `rel_time` (rounded up to the steady clock's
  /// tick). Returns false, holding nothing, if none was granted by then. A zero or
  /// negative `rel_time` behaves as try_acquire().
  template <class Rep, class Period>
  bool try_acquire_for(const std::chrono::duration<Rep, Period>& rel_time) {
    if (rel_time <= rel_time.zero()) return try_acquire();
    detail::simulation_point();
    return core_.try_acquire_until(*detail::deadline::after(rel_time));
  }

  /// Takes a permit, waiting until `abs_time` on `Clock` at most. Returns false,
  /// holding nothing, if none was granted by then (never earlier).
  template <class Clock, class Duration>
  bool try_acquire_until(const std::chrono::time_point<Clock, Duration>& abs_time) {
    if constexpr (std::is_same_v<Clock, std::chrono::steady_clock>) {
      detail::simulation_point();
      return core_.try_acquire_until(*detail::deadline::at(abs_time));
    } else {
      // Other clocks may jump: wait in steady-clock slices until Clock says so.
      for (;;) {
        const auto left = abs_time - Clock::now();
        if (left <= left.zero()) return try_acquire();
        if (try_acquire_for(left)) return true;
      }
    }
  }

  /// Free permits right now (0 while anybody waits, under FIFO tickets). A racy
  /// snapshot; Tessera extension.
  std::ptrdiff_t available() const noexcept { return core_.available(); }

  /// Threads and fibers waiting in acquire/try_acquire_for right now, in the
  /// ticket queue or the lobby (timed-out ones excluded). A racy snapshot, for
  /// tests and monitoring; Tessera extension.
  std::ptrdiff_t waiting() const noexcept { return core_.waiting(); }

  /// Of waiting(), those holding a ticket (in FIFO order behind the grant).
  std::ptrdiff_t queued() const noexcept { return core_.queued(); }

  /// Of waiting(), those in the lobby, holding no ticket yet (restricted admission).
  std::ptrdiff_t lobby() const noexcept { return core_.lobby(); }

 private:
  detail::semaphore_core core_;
};

/// A semaphore whose count is 0 or 1 (std::binary_semaphore's API).
using binary_semaphore = counting_semaphore<1>;

}  // namespace tessera
