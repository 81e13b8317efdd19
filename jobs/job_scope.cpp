// The completion state of a group of jobs (tessera/detail/job_scope.h).
//
// A job frees itself *before* it counts itself done: once the counter reaches
// zero the waiter may return and destroy the scope, and with it whatever the
// job's callable captured by reference.
#include "tessera/detail/job_scope.h"

#include <mutex>

#include "tessera/detail/cpu.h"
#include "tessera/detail/tls_access.h"
#include <stdexcept>
#include <string>

namespace tessera::detail {

namespace {
// Spins of a waiting job_scope before it parks (each a PAUSE and a look for
// jobs to help with): some tens of µs, about what the jobs of one piece of a
// parallel_for take. Longer spins only burn the core of a fiber whose jobs
// wait on something else.
constexpr unsigned kWaitSpins = 2000;
}  // namespace

TESSERA_TLS_ACCESSOR runtime_impl*& borrowed_runtime() noexcept {
  constinit thread_local runtime_impl* rt = nullptr;
  return rt;
}

runtime_impl* runtime_for(const char* who) {
  runtime_impl* rt = current_runtime();
  if (rt == nullptr) rt = borrowed_runtime();
  if (rt == nullptr) {
    throw std::logic_error(std::string(who) +
                           ": called on a thread that is not a worker of a running "
                           "tessera::runtime; pass the runtime explicitly");
  }
  return rt;
}

void job_scope::job::execute(job_node* n) noexcept {
  auto* j = static_cast<job*>(n);
  job_scope* s = j->scope;
  if (!s->cancelled()) {
    try {
      j->fn();
    } catch (...) {
      s->fail(std::current_exception());
    }
  }
  delete j;
  s->pending_.done();
}

void job_scope::fail(std::exception_ptr e) noexcept {
  if (!failed_.exchange(true, std::memory_order_acq_rel)) error_ = std::move(e);
  cancel();
}

void job_scope::cancel() noexcept {
  cancelled_.store(true, std::memory_order_relaxed);
  std::lock_guard lock(stop_mu_);
  if (stop_) stop_->request_stop();
}

std::stop_token job_scope::stop_token() {
  std::lock_guard lock(stop_mu_);
  if (!stop_) {
    stop_ = std::make_unique<std::stop_source>();
    if (cancelled()) stop_->request_stop();
  }
  return stop_->get_token();
}

bool job_scope::wait() {
  // Help while there is something to take; then, while the last jobs run on
  // other workers, spin a while (looking for new jobs to help with) before
  // parking. Parking would hand the waiter to the worker that ends the last
  // job (the waker's runnext), and the caller's next parallel_for would then
  // split its range from the other core: the halves change cores each call,
  // and with them the cache lines they touch (parallel_for over 4 MB on two
  // workers took twice oneTBB's time so, whose waiting thread stays put).
  for (unsigned idle = 0; pending_.count() != 0;) {
    if (run_one_job(rt_)) {
      idle = 0;
      continue;
    }
    if (++idle > kWaitSpins) break;
    cpu_relax();
  }
  if (pending_.count() != 0) {
    const wait_scope scope("task_group", this);
    pending_.wait();  // acquire: the jobs' effects happen-before our return
  } else {
    pending_.wait();  // the same acquire, without a wait to record
  }
  const bool was_cancelled = cancelled();
  cancelled_.store(false, std::memory_order_relaxed);
  {
    std::lock_guard lock(stop_mu_);
    stop_.reset();
  }
  if (failed_.exchange(false, std::memory_order_acq_rel)) {
    std::rethrow_exception(std::exchange(error_, nullptr));
  }
  return was_cancelled;
}

}  // namespace tessera::detail
