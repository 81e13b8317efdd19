// tessera/task_group.h — task_group: run jobs, wait for them all (oneTBB's
// tbb::task_group, on Tessera's scheduler).
//
//   tessera::task_group g;                 // on a fiber of a running runtime
//   g.run([] { animate(); });
//   g.run([] { simulate(); });
//   g.wait();                              // helps, then parks; rethrows
//
// Contract
// - Where jobs run: on the workers of the group's runtime (the caller's, or the
//   one passed), on a worker's runner fiber — a job costs a queue push and a
//   call, not a fiber, unless it parks. A job may park (lock a mutex, wait on
//   a wait_group, read a socket): only its runner parks; the worker goes on
//   with other jobs. Jobs are taken newest first by the worker that queued
//   them and oldest first by thieves (work stealing); no other order holds.
// - wait(): from a fiber of the runtime it first *helps* — runs queued jobs
//   (of any group) inline on the caller's stack while it has 64 KiB of stack
//   left, as oneTBB's wait does — and then parks until the group's last job
//   has finished. From a plain thread it blocks. A helped job that parks parks
//   the waiter with it. No spurious returns.
// - Errors: an exception escaping a job cancels the group; wait() rethrows the
//   first one (once) after every started job has finished. run() on a plain
//   thread with no runtime given, or on a runtime that is not running, throws
//   std::logic_error (the job is not queued).
// - Cancellation: cancel() (or a job's exception) makes queued jobs of the
//   group that have not started yet skip their body; running ones finish, and
//   may poll get_stop_token(). wait() returns task_group_status::canceled and
//   resets the group, which may then be reused.
// - Memory ordering: run() happens-before the job's body; every job's body
//   happens-before the return of the wait() that saw it finish.
// - Who may call: run() and cancel() from any fiber or thread, also from the
//   group's own jobs; wait() from one caller at a time (not from a job of the
//   same group: it would wait for itself). Destroying a group with jobs still
//   queued cancels them and waits (an exception then is dropped).
// - Priority: every job of a group has the group's priority (tessera/jobs.h).
#pragma once

#include <stop_token>
#include <utility>

#include "tessera/detail/job_scope.h"

namespace tessera {

class runtime;

/// What wait() saw (oneTBB's names).
enum class task_group_status { not_complete, complete, canceled };

class task_group {
 public:
  /// A group on the calling fiber's runtime (std::logic_error on a plain thread).
  explicit task_group(priority p = priority::normal)
      : scope_(detail::runtime_for("tessera::task_group"), p) {}
  /// A group on `rt`, usable from any thread; rt must be running when run() is called.
  explicit task_group(runtime& rt, priority p = priority::normal)
      : scope_(detail::impl_of(rt), p) {}
  task_group(const task_group&) = delete;
  task_group& operator=(const task_group&) = delete;
  ~task_group() {
    if (scope_.pending() != 0) {
      scope_.cancel();
      try {
        scope_.wait();
      } catch (...) {  // NOLINT(bugprone-empty-catch): documented: dropped
      }
    }
  }

  /// Queues f() as a job of this group.
  template <class F>
  void run(F&& f) {
    scope_.spawn(std::forward<F>(f));
  }
  /// Runs f() on the caller and then waits (oneTBB's run_and_wait).
  template <class F>
  task_group_status run_and_wait(F&& f) {
    scope_.run_inline(std::forward<F>(f));
    return wait();
  }
  /// Waits for every job of the group; see the contract above.
  task_group_status wait() {
    return scope_.wait() ? task_group_status::canceled : task_group_status::complete;
  }
  /// Jobs not yet started skip their body.
  void cancel() noexcept { scope_.cancel(); }
  bool is_canceling() const noexcept { return scope_.cancelled(); }
  /// A token whose stop is requested when the group is cancelled.
  std::stop_token get_stop_token() { return scope_.stop_token(); }

 private:
  detail::job_scope scope_;
};

}  // namespace tessera
