// tessera/detail/job_queue.h — the scheduler's seam for the jobs layer
// (<tessera/jobs.h>): the unit of queued work that is not a fiber, and the
// calls that queue it, help with it and find the runtime. Internal: users call
// tessera/jobs.h.
//
// A job (job_node) runs on a worker's *runner* fiber, inline, one after the
// other: no fiber and no stack of its own unless it parks. When a job parks, its
// runner parks with it and the worker takes another runner (a recycled fiber
// with a warm stack) for the next job. sched/scheduler.h documents the queues.
#pragma once

#include <cstdint>

namespace tessera::sched {

class runtime_impl;

/// Priority classes of queued jobs, most urgent first (indices into per-worker
/// queue arrays; the public names are tessera::priority's).
inline constexpr unsigned kJobPriorities = 3;

/// One queued job. The scheduler never allocates or frees nodes: the owner
/// (the jobs layer) allocates one, hands it over, and `run` — called exactly
/// once, on a worker, on some fiber's stack — must free it. `run` must not
/// throw. Linked intrusively through `link` while in a FIFO.
struct job_node {
  void (*run)(job_node* self) noexcept = nullptr;
  job_node* link = nullptr;
  std::uint8_t priority = 1;  // 0 high, 1 normal, 2 low
  bool counted = false;       // the scheduler's: pushed from outside, counted in `live`
};

/// The runtime whose worker runs the calling code (a fiber or a job), or null
/// on a plain thread.
runtime_impl* current_runtime() noexcept;
/// Number of workers of `rt`.
unsigned worker_count(const runtime_impl* rt) noexcept;
/// Queues `t` on `rt`: on the calling worker's own queue when it is one of
/// rt's (LIFO for it, stolen FIFO by the others), else on rt's global queue,
/// waking a sleeping worker. Until `t` has run, rt's run() and stop() wait.
/// Throws std::logic_error if rt is not running (t is then not taken).
void push_job(runtime_impl* rt, job_node* t);
/// Helping, as a oneTBB wait does: if the caller is a fiber of `rt` with room
/// left on its stack, takes one queued job (own queue first, then the global
/// queue, then steals) and runs it inline, nested on the caller's stack.
/// Returns false when it ran nothing.
bool run_one_job(runtime_impl* rt);

}  // namespace tessera::sched
