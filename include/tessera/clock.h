// tessera/clock.h — tessera::steady_clock: std::chrono::steady_clock, except
// inside a simulation (tessera/testing/simulation.h), where it reads the
// simulation's virtual clock.
//
// Contract
// - Same rep, period, duration and time_point as std::chrono::steady_clock,
//   so its time points go wherever a steady_clock one goes (every Tessera
//   `_until` call, std::chrono arithmetic); is_steady.
// - now(): on a fiber of a simulation, the virtual time, which stands still
//   while fibers run and jumps to the next deadline when every fiber waits;
//   anywhere else, std::chrono::steady_clock::now().
// - Why it exists: a simulation cannot change what std::chrono::steady_clock
//   returns. Code that computes its own deadlines and is to be tested under a
//   simulation reads this clock (Tessera's own `_for` calls and socket
//   deadlines already do).
// - Who may call: anyone. Cost outside a simulation: steady_clock::now()
//   plus one relaxed load.
#pragma once

#include <chrono>

#include "tessera/detail/simulation_hooks.h"

namespace tessera {

struct steady_clock {
  using rep = std::chrono::steady_clock::rep;
  using period = std::chrono::steady_clock::period;
  using duration = std::chrono::steady_clock::duration;
  using time_point = std::chrono::steady_clock::time_point;
  static constexpr bool is_steady = true;
  static time_point now() noexcept { return detail::steady_now(); }
};

}  // namespace tessera
