// sched/simulation.h — the seam between the engine and a deterministic
// simulation (tessera/testing/simulation.h builds on it; internal).
//
// A runtime whose `sim` is set runs one worker, on the thread that calls
// run() (run_root), kept from run to run, and that worker runs
// worker::simulate() instead of its usual loop:
// - Every fiber that becomes runnable is gathered into `ready`, in the order
//   it became runnable; the control's pick() chooses which one runs next.
//   The running fiber stops at every park, yield and finish, and — when the
//   control's preempt() says so — at every unpark and spawn it makes and at
//   every spin-wait step (cpu_relax), going back to `ready`.
// - `now` is the clock of every wait in the runtime (tessera::steady_clock,
//   deadlines, timers, tick_clock): it stands still while fibers run, and when
//   no fiber is runnable it jumps to the earliest timer.
// - No runnable fiber and no timer while fibers remain: a deadlock, reported
//   as the watchdog reports one (runtime::run throws deadlock_error); there
//   is no watchdog thread and no grace period. So is a run that passes the
//   control's step or virtual-time limit (the report says which).
// Nothing here reads the real clock or depends on the OS's scheduling: the
// same picks give the same run, event for event.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace tessera::io::detail {
class simulated_network;  // io/simulated_network.h: sched only holds the pointer
}

namespace tessera::sched {

struct fiber_record;

/// Where the running fiber stopped, or may be stopped (a switch point).
enum class switch_point : std::uint8_t {
  park,
  yield,
  finish,
  unpark,
  spawn,
  spin,
  sync,
  marked,
  start
};
const char* to_string(switch_point p) noexcept;

class simulation_control {
 public:
  virtual ~simulation_control() = default;
  /// Which fiber of `ready` (never empty) runs next: its index.
  virtual std::size_t pick(const std::vector<fiber_record*>& ready) = 0;
  /// Whether the fiber `running` gives way at a switch point it reached
  /// while running (unpark, spawn, spin, marked): it then goes back to `ready`.
  virtual bool preempt(const fiber_record& running, switch_point why) = 0;
  /// The step just taken: `fiber` (its ordinal in this run) stopped at `why`
  /// (start: it is about to run); a park names what it waits on (the
  /// primitive's kind, a static string), or null.
  virtual void note(std::uint32_t fiber, switch_point why, const char* waits_on) = 0;
  /// A seeded random number, for the runtime's own random choices (select).
  virtual std::uint32_t random() = 0;

  /// The virtual clock (read by every wait of the runtime).
  std::chrono::steady_clock::time_point now{};
  /// Limits of one run: steps (picks) and virtual time from its start; past
  /// either the run fails as a deadlock does, naming the limit.
  std::uint64_t max_steps = UINT64_MAX;
  std::chrono::steady_clock::time_point time_limit = std::chrono::steady_clock::time_point::max();
  /// Picks so far.
  std::uint64_t steps = 0;
  /// Fibers created so far (ordinals are 1, 2, ... in creation order).
  std::uint32_t fibers = 0;
  /// Where tessera::net's sockets go in this run, or null: the kernel's.
  io::detail::simulated_network* network = nullptr;
};

/// Installs the hooks (tessera/detail/simulation_hooks.h) while at least one
/// simulated runtime runs in the process; called as one starts and ends.
void simulation_started() noexcept;
void simulation_ended() noexcept;

/// A switch point the caller marks (tessera::testing::switch_point): in a
/// simulated run, the schedule may run another fiber here; elsewhere nothing.
void marked_switch_point() noexcept;

}  // namespace tessera::sched
