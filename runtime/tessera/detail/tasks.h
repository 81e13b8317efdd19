// tessera/detail/tasks.h — the seam between the jobs layer (<tessera/jobs.h>)
// and the scheduler: queue a job, help with queued jobs, find the Runtime.
// Internal: users call tessera/jobs.h.
//
// A job (task_node) runs on a worker's *runner* fiber, inline, one after the
// other: no fiber and no stack of its own unless it parks. When a job parks, its
// runner parks with it and the worker takes another runner (a recycled fiber
// with a warm stack) for the next job. sched/scheduler.h documents the queues.
#pragma once

#include "tessera/detail/task_node.h"

namespace tessera {
class Runtime;
namespace detail {
class runtime_impl;

/// The engine of `rt`.
runtime_impl* impl_of(Runtime& rt) noexcept;
/// The Runtime whose worker runs the calling code (a fiber or a job), or null
/// on a plain thread.
runtime_impl* current_runtime() noexcept;
/// Number of workers of `rt`.
unsigned worker_count(const runtime_impl* rt) noexcept;
/// Queues `t` on `rt`: on the calling worker's own queue when it is one of
/// rt's (LIFO for it, stolen FIFO by the others), else on rt's global queue,
/// waking a sleeping worker. Until `t` has run, rt's run() and stop() wait.
/// Throws std::logic_error if rt is not running (t is then not taken).
void push_task(runtime_impl* rt, task_node* t);
/// Helping, as a oneTBB wait does: if the caller is a fiber of `rt` with room
/// left on its stack, takes one queued job (own queue first, then the global
/// queue, then steals) and runs it inline, nested on the caller's stack.
/// Returns false when it ran nothing.
bool run_one_task(runtime_impl* rt);

}  // namespace detail
}  // namespace tessera
