// tessera/detail/simulation_hooks.h — where a deterministic simulation
// (tessera/testing/simulation.h) takes over the clock, spin-waits and random
// choices of the code it runs. Base layer: includes nothing of Tessera's.
//
// Contract
// - `simulation_hooks` is null unless a simulation runs somewhere in the
//   process; then it points at the simulation layer's table. Each hook
//   decides for the calling thread: a thread that is not a simulation's
//   worker gets the real clock and real choices, as without the table.
// - Cost outside a simulation: one relaxed load of a pointer that stays null
//   and a branch, at each clock read (steady_now), spin-wait step
//   (cpu_relax), random pick of a select, and synchronization call
//   (simulation_point: the primitives' lock, unlock, acquire, release,
//   signal and notify).
// - Who may call: anyone, any time; the table is static and never freed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace tessera::detail {

struct simulation_table {
  /// The virtual steady_clock time for a simulation's worker; for any other
  /// thread, std::chrono::steady_clock::now().
  std::chrono::steady_clock::time_point (*now)() noexcept;
  /// One spin-wait step: on a simulated fiber, lets the simulation run
  /// another fiber (one worker runs them all, so the awaited one is
  /// switched out); elsewhere nothing.
  void (*spin)() noexcept;
  /// A seeded random number for a simulated fiber (true), or false: use
  /// the caller's own generator.
  bool (*random)(std::uint32_t& out) noexcept;
  /// A synchronization call (lock, unlock, acquire, release, signal,
  /// notify): on a simulated fiber, a switch point; elsewhere nothing.
  void (*sync_call)() noexcept;
};

/// The table while a simulation runs in the process, else null.
inline std::atomic<const simulation_table*> simulation_hooks{nullptr};

/// At the start of each lock, unlock, acquire, release, signal and notify of
/// the primitives: a switch point of a simulation (simulation_table::sync_call).
inline void simulation_point() noexcept {
  if (const simulation_table* s = simulation_hooks.load(std::memory_order_relaxed)) [[unlikely]] {
    s->sync_call();
  }
}

/// steady_clock::now(), or the simulation's virtual clock on its worker.
inline std::chrono::steady_clock::time_point steady_now() noexcept {
  if (const simulation_table* s = simulation_hooks.load(std::memory_order_relaxed)) [[unlikely]] {
    return s->now();
  }
  return std::chrono::steady_clock::now();
}

}  // namespace tessera::detail
