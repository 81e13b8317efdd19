// tessera/detail/simulation_hooks.h — where a deterministic simulation
// (tessera/testing/simulation.h) takes over the clock, spin-waits and random
// choices of the code it runs. Base layer: includes nothing of Tessera's.
//
// Contract
// - `simulation_hooks` is null unless a simulation runs somewhere in the
//   process; then it points at the simulation layer's table. Each hook
//   decides for the calling thread: a thread that is not a simulation's
//   worker gets the real clock and real choices, as without the table.
// - Cost outside a simulation: one relaxed load of a pointer that stays null,
//   at each clock read (steady_now), spin-wait step (cpu_relax) and random
//   pick of a select; fast paths that read none of these pay nothing.
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
};

/// The table while a simulation runs in the process, else null.
inline std::atomic<const simulation_table*> simulation_hooks{nullptr};

/// steady_clock::now(), or the simulation's virtual clock on its worker.
inline std::chrono::steady_clock::time_point steady_now() noexcept {
  if (const simulation_table* s = simulation_hooks.load(std::memory_order_relaxed)) [[unlikely]] {
    return s->now();
  }
  return std::chrono::steady_clock::now();
}

}  // namespace tessera::detail
