// tessera/detail/task_node.h — the scheduler's unit of queued work that is not
// a fiber: a job (jobs/). Base layer: includes nothing of Tessera's.
#pragma once

#include <cstdint>

namespace tessera::detail {

/// Priority classes of queued jobs, most urgent first (indices into per-worker
/// queue arrays; the public names are tessera::priority's).
inline constexpr unsigned kTaskPriorities = 3;

/// One queued job. The scheduler never allocates or frees nodes: the owner
/// (the jobs layer) allocates one, hands it over, and `run` — called exactly
/// once, on a worker, on some fiber's stack — must free it. `run` must not
/// throw. Linked intrusively through `link` while in a FIFO.
struct task_node {
  void (*run)(task_node* self) noexcept = nullptr;
  task_node* link = nullptr;
  std::uint8_t priority = 1;  // 0 high, 1 normal, 2 low
  bool counted = false;       // the scheduler's: pushed from outside, counted in `live`
};

}  // namespace tessera::detail
