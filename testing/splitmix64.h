// testing/splitmix64.h — the simulation's one random generator (internal to
// the testing library): Steele, Lea and Flood's SplitMix64, which advances
// `state` and returns the next value. Every seeded choice of a run (the
// schedule's, the network's) draws from one of these, so a seed replays.
#pragma once

#include <cstdint>

namespace tessera::testing::detail {

inline std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace tessera::testing::detail
