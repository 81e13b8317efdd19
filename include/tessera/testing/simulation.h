// tessera/testing/simulation.h — deterministic tests of concurrent code:
// virtual time, seeded schedules, exploration and replay (target
// tessera::testing).
//
// explore(body, options) runs `body` as the root fiber of a simulated runtime
// once per seed, each time under another schedule, and returns the first
// seed whose run failed (std::nullopt when every run passed); replay(body,
// seed) runs exactly that schedule again and rethrows its failure.
//
// Contract
// - A run: the calling thread runs every fiber of the body, as the run's one
//   worker; nothing runs in parallel. A fiber runs until it parks (any wait
//   on any Tessera primitive, mutexes included, or on a socket), yields or
//   ends, or until the schedule stops it at a switch point: an unpark or a
//   spawn it makes, a spin-wait step, the start of a lock, unlock, acquire,
//   release, signal or notify of a mutex, semaphore, event or condition
//   variable, and the points the code under test marks (switch_point(),
//   testing::atomic). Then the schedule picks the next fiber among the
//   runnable ones; socket readiness is looked at before every pick. The same
//   seed gives the same picks, event for event.
// - Virtual time: tessera::steady_clock (tessera/clock.h), every deadline
//   and `_for` wait, sleeps, socket deadlines and timers read the run's
//   virtual clock. It stands still while fibers run and jumps to the earliest
//   deadline when no fiber is runnable (or when every runnable fiber last
//   yielded or spun: they poll), so a test that sleeps an hour takes
//   microseconds. It starts at the real steady_clock time of the run's start.
//   Not covered: std::chrono::steady_clock::now() called by the body itself
//   (read tessera::steady_clock instead), OS threads, and descriptors other
//   than the simulated network's.
// - The simulated network: inside a run, tessera::net's TCP and UDP sockets
//   (tcp_listener, tcp_stream, udp_socket, unchanged) connect to each other
//   only, on 127.0.0.1 with ports the run hands out (listeners from 10000,
//   clients from 40000, the same every run). Each TCP chunk and each
//   datagram takes a seeded delay from `network.min_delay` to `max_delay`;
//   TCP keeps its order, datagrams may overtake each other; `network.drop`
//   loses datagrams, `network.reset` resets connections (both ends then
//   fail with connection_reset). partition(a, b) cuts two ports apart until
//   heal(): TCP holds its bytes (and resets the connection after
//   `partition_timeout`), UDP loses them; connect() to a cut port retries
//   as TCP does, and times out. reset(stream) resets one connection. A
//   connection to a port nobody listens on is refused at once.
// - A run fails when an exception escapes the body (or a join rethrows one
//   from another fiber), when every fiber waits and no timer is set (a
//   deadlock: deadlock_error with the runtime's deadlock report), or when it
//   passes `max_steps` picks or `max_virtual_time` (a livelock or a wait
//   that never ends; deadlock_error naming the limit). An exception escaping
//   a detached fiber ends the process, as in every runtime.
// - Schedules (Burckhardt et al., "A Randomized Scheduler with Probabilistic
//   Guarantees of Finding Bugs", ASPLOS 2010):
//     random: at each switch point, a uniformly random runnable fiber.
//     pct: each fiber gets a random priority and the highest-priority
//       runnable fiber runs; at `depth - 1` random steps the running fiber
//       drops below every other. A bug that needs `depth` ordering
//       constraints among n fibers and k steps is found by one run with
//       probability at least 1/(n * k^(depth-1)). A fiber that yields or
//       spins drops to the bottom too, so a spin-wait cannot starve the
//       fiber it waits for.
// - Seeds: a seed names the whole schedule: bits 63-60 the strategy (0
//   random, 1 pct), 59-56 the depth, 55-50 log2 of pct's step estimate,
//   49-0 the random stream. So replay(body, seed) needs no options.
//   explore's seeds follow from `options.seed` (fixed by default: the same
//   exploration every time).
// - Determinism: with `check_determinism`, explore runs its first seed
//   twice and throws std::logic_error if the two traces differ (the body
//   reads something the simulation does not control).
// - Who may call: a plain thread (not a fiber), one explore or replay at a
//   time per thread; several threads may each run their own. Reentrant use
//   from inside a run throws std::logic_error.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>

#include "tessera/net.h"

namespace tessera::testing {

/// How a schedule picks the next fiber (see the contract above).
enum class strategy { random, pct };

/// The simulated network's faults (see the contract above); all seeded.
struct network_options {
  /// Delay of each TCP chunk and each datagram: uniform in [min, max].
  std::chrono::nanoseconds min_delay{0};
  std::chrono::nanoseconds max_delay{0};
  /// Probability (0 to 1) that a datagram is lost.
  double drop = 0;
  /// Probability (0 to 1), per chunk carried, that a TCP connection is reset.
  double reset = 0;
  /// How long TCP holds bytes across a partition before it resets the
  /// connection (as a real stack gives up retransmitting).
  std::chrono::nanoseconds partition_timeout = std::chrono::minutes(5);
};

struct explore_options {
  /// Schedules to try (seeds), at most.
  std::uint64_t runs = 100;
  testing::strategy strategy = testing::strategy::pct;
  /// pct's bug depth d (1 to 15): d - 1 priority change points per run.
  unsigned depth = 3;
  /// Real time for the whole exploration; zero: no limit. Exploration stops
  /// after the run that crosses it.
  std::chrono::milliseconds time_budget{0};
  /// Where the seeds start: run i uses a seed derived from `seed + i`.
  std::uint64_t seed = 0;
  /// Limits of one run (a livelock, a wait that never ends): picks, and
  /// virtual time from the run's start.
  std::uint64_t max_steps = 1'000'000;
  std::chrono::nanoseconds max_virtual_time = std::chrono::hours(24 * 365);
  /// Run the first seed twice and compare the traces.
  bool check_determinism = true;
  /// Each fiber's stack, bytes.
  std::size_t stack_size = 256 * 1024;
  /// The simulated network's delays and faults.
  network_options network{};
  /// explore: print the failing seed and how to replay it to stderr.
  /// replay: print the trace (each step: which fiber ran, why it stopped).
  bool verbose = true;
  /// replay: also write the run as Chrome trace-event JSON to this file.
  std::string trace_file{};
  /// explore: the command printed to replay a failing seed; "{seed}" is
  /// replaced by it. Empty: "replay(body, {seed})".
  std::string replay_hint{};
};

/// What one run did (run_once).
struct run_report {
  std::uint64_t seed = 0;
  /// What escaped the body, or the deadlock or limit report; null: passed.
  std::exception_ptr failure;
  /// A hash of the schedule (every pick and why each fiber stopped).
  std::uint64_t trace_hash = 0;
  std::uint64_t steps = 0;
  std::uint32_t fibers = 0;
  /// Virtual time from the run's start to its end.
  std::chrono::nanoseconds virtual_time{0};
};

/// The seed of the `index`-th run of an exploration with these options.
std::uint64_t seed_for(const explore_options& options, std::uint64_t index);

/// Runs `body` once under `seed`'s schedule and reports it (never throws
/// what the body throws; throws std::logic_error on misuse).
run_report run_once(const std::function<void()>& body, std::uint64_t seed,
                    const explore_options& options = {});

/// What an exploration did (explore_report).
struct exploration {
  /// The first seed that failed, and its failure; nullopt: every run passed.
  std::optional<std::uint64_t> failing_seed;
  std::exception_ptr failure;
  /// Runs made, the failing one included (the determinism check's second
  /// run of the first seed not counted), and their picks in all.
  std::uint64_t runs = 0;
  std::uint64_t steps = 0;
  /// Real time the exploration took.
  std::chrono::nanoseconds elapsed{0};
};

/// Runs `body` under options.runs seeds, until the first failure.
exploration explore_report(const std::function<void()>& body, const explore_options& options = {});

/// explore_report(body, options).failing_seed.
std::optional<std::uint64_t> explore(const std::function<void()>& body,
                                     const explore_options& options = {});

/// Runs exactly `seed`'s schedule and rethrows its failure (returns when it
/// passes). With options.verbose it prints the trace to stderr.
void replay(const std::function<void()>& body, std::uint64_t seed,
            const explore_options& options = {});

/// A switch point: inside a simulated run the schedule may run another
/// fiber here, as at an unpark; anywhere else it does nothing. For code
/// under test whose fibers share memory through plain atomics.
void switch_point() noexcept;

/// std::atomic<T> whose every operation is first a switch_point() (as
/// loom's and shuttle's atomics): the atomics of code under test, through a
/// type alias, so that the schedule can interleave between them. Outside a
/// simulation it behaves as std::atomic<T>, for an extra call per operation.
template <class T>
class atomic {
 public:
  constexpr atomic() noexcept = default;
  constexpr atomic(T v) noexcept : v_(v) {}  // NOLINT: as std::atomic
  atomic(const atomic&) = delete;
  atomic& operator=(const atomic&) = delete;

  T load(std::memory_order o = std::memory_order_seq_cst) const noexcept {
    switch_point();
    return v_.load(o);
  }
  void store(T v, std::memory_order o = std::memory_order_seq_cst) noexcept {
    switch_point();
    v_.store(v, o);
  }
  T exchange(T v, std::memory_order o = std::memory_order_seq_cst) noexcept {
    switch_point();
    return v_.exchange(v, o);
  }
  bool compare_exchange_weak(T& expected, T desired,
                             std::memory_order o = std::memory_order_seq_cst) noexcept {
    switch_point();
    return v_.compare_exchange_weak(expected, desired, o);
  }
  bool compare_exchange_weak(T& expected, T desired, std::memory_order success,
                             std::memory_order failure) noexcept {
    switch_point();
    return v_.compare_exchange_weak(expected, desired, success, failure);
  }
  bool compare_exchange_strong(T& expected, T desired,
                               std::memory_order o = std::memory_order_seq_cst) noexcept {
    switch_point();
    return v_.compare_exchange_strong(expected, desired, o);
  }
  bool compare_exchange_strong(T& expected, T desired, std::memory_order success,
                               std::memory_order failure) noexcept {
    switch_point();
    return v_.compare_exchange_strong(expected, desired, success, failure);
  }
  T fetch_add(T v, std::memory_order o =
                       std::memory_order_seq_cst) noexcept requires std::is_integral_v<T> {
    switch_point();
    return v_.fetch_add(v, o);
  }
  T fetch_sub(T v, std::memory_order o =
                       std::memory_order_seq_cst) noexcept requires std::is_integral_v<T> {
    switch_point();
    return v_.fetch_sub(v, o);
  }
  operator T() const noexcept { return load(); }  // NOLINT: as std::atomic
  T operator=(T v) noexcept {
    store(v);
    return v;
  }

 private:
  std::atomic<T> v_{};
};

/// Inside a run (std::logic_error elsewhere): cuts traffic between the
/// two ports, both ways, until heal(); see the contract.
void partition(unsigned short port_a, unsigned short port_b);
/// Inside a run: ends every partition.
void heal();
/// Inside a run: resets the connection of `stream` (a stream of the
/// simulated network); both ends fail with std::errc::connection_reset.
void reset(net::tcp_stream& stream);

/// What a run's failure says: its what(), a note when it is not a
/// std::exception, or "" when there is none (`failure` null).
std::string failure_text(const std::exception_ptr& failure);

/// A seed as the explorer prints it ("0x1304000000012abc").
std::string seed_string(std::uint64_t seed);
/// Parses a seed as printed (hex with 0x, or decimal); std::invalid_argument.
std::uint64_t parse_seed(const std::string& text);

}  // namespace tessera::testing
