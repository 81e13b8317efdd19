// tessera/detail/expected_count.h — the expected-count check shared by latch
// and barrier.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace tessera::detail {

[[noreturn, gnu::cold, gnu::noinline]] inline void throw_bad_expected(const char* type,
                                                                      std::ptrdiff_t expected) {
  throw std::invalid_argument(std::string(type) + ": expected count " + std::to_string(expected) +
                              " is outside [0, max()]");
}

/// Validates an expected count of latch/barrier: [0, INT32_MAX]. constexpr (the
/// error path is not), so valid counts initialise constinit objects.
constexpr std::int32_t checked_expected(const char* type, std::ptrdiff_t expected) {
  if (expected < 0 || expected > std::numeric_limits<std::int32_t>::max()) {
    throw_bad_expected(type, expected);
  }
  return static_cast<std::int32_t>(expected);
}

}  // namespace tessera::detail
