// tessera/detail/job_scope.h — what the jobs of one group share: a counter of
// jobs not yet finished, the first exception, and cancellation. Internal to
// the jobs layer (task_group, the parallel algorithms and task_graph are built
// on it).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <stop_token>
#include <utility>

#include "tessera/detail/job_queue.h"
#include "tessera/detail/spin_lock.h"
#include "tessera/detail/unique_function.h"
#include "tessera/priority.h"
#include "tessera/runtime.h"
#include "tessera/wait_group.h"

namespace tessera {
namespace detail {

using sched::current_runtime;
using sched::job_node;
using sched::push_job;
using sched::run_one_job;
using sched::runtime_impl;
using sched::worker_count;

/// The runtime a job API called without one uses: the caller's — the worker's
/// it runs on, or, on a plain thread running a piece of a parallel call
/// inline, that call's. Throws std::logic_error naming `who` otherwise.
runtime_impl* runtime_for(const char* who);

/// While a plain thread runs a job's body inline, the runtime of that job
/// (so that nested calls without a runtime find it); null otherwise.
runtime_impl*& borrowed_runtime() noexcept;

class job_scope {
 public:
  explicit job_scope(runtime_impl* rt, priority p = priority::normal) noexcept
      : rt_(rt), priority_(p) {}
  job_scope(const job_scope&) = delete;
  job_scope& operator=(const job_scope&) = delete;

  runtime_impl* rt() const noexcept { return rt_; }
  priority job_priority() const noexcept { return priority_; }

  /// Queues f() as a job of this scope.
  template <class F>
  void spawn(F&& f) {
    spawn_with(priority_, std::forward<F>(f));
  }
  template <class F>
  void spawn_with(priority p, F&& f) {
    auto* j = new job(this, p, std::forward<F>(f));
    pending_.add(1);
    try {
      push_job(rt_, j);
    } catch (...) {
      delete j;
      pending_.done();
      throw;
    }
  }
  /// Runs f() here, as a job of this scope would run (skipped when cancelled;
  /// an exception is recorded, not thrown).
  template <class F>
  void run_inline(F&& f) noexcept {
    if (cancelled()) return;
    // Only a plain thread borrows: a worker finds its runtime itself, and a
    // fiber may finish f() on another worker than the one it began on.
    runtime_impl** borrowed = sched::current_runtime() == nullptr ? &borrowed_runtime() : nullptr;
    runtime_impl* const saved = borrowed != nullptr ? *borrowed : nullptr;
    if (borrowed != nullptr) *borrowed = rt_;
    try {
      f();
    } catch (...) {
      fail(std::current_exception());
    }
    if (borrowed != nullptr) *borrowed = saved;
  }

  /// Helps with queued jobs while this scope's jobs run (a fiber of the
  /// runtime with stack room left), then parks until they have all finished.
  /// Returns true if the scope was cancelled. Rethrows the first exception of
  /// a job (once) and then resets the scope for reuse.
  bool wait();
  /// Records the first exception and cancels the scope.
  void fail(std::exception_ptr e) noexcept;
  void cancel() noexcept;
  bool cancelled() const noexcept { return cancelled_.load(std::memory_order_relaxed); }
  std::stop_token stop_token();
  std::int64_t pending() const noexcept { return pending_.count(); }

 private:
  struct job : job_node {
    template <class F>
    job(job_scope* s, tessera::priority p, F&& f) : scope(s), fn(std::forward<F>(f)) {
      run = &job::execute;
      priority = static_cast<std::uint8_t>(p);
    }
    static void execute(job_node* n) noexcept;
    // From a per-thread cache of freed records (jobs/job_cache.cpp).
    static void* operator new(std::size_t size);
    static void operator delete(void* p, std::size_t size) noexcept;
    job_scope* scope;
    unique_function fn;
  };

  runtime_impl* rt_;
  priority priority_;
  wait_group pending_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;  // written once, by the job whose fail() set failed_
  spin_lock stop_mu_;         // guards the lazily made stop_source
  std::unique_ptr<std::stop_source> stop_;
};

}  // namespace detail
}  // namespace tessera
