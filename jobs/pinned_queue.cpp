// pinned_queue (tessera/pinned_queue.h).
#include "tessera/pinned_queue.h"

#include <mutex>
#include <sstream>
#include <stdexcept>

#include "tessera/runtime.h"

namespace tessera {

void pinned_queue::check_owner(const char* who) const {
  // A fiber is never the owner, even on the owner's thread id: it may move.
  const bool fiber = this_fiber::get_id() != fiber::id{};
  if (std::this_thread::get_id() != owner_ || fiber) {
    std::ostringstream msg;
    msg << "tessera::pinned_queue::" << who << ": called from thread " << std::this_thread::get_id()
        << (fiber ? " (a fiber)" : "") << ", but only the queue's owner, thread " << owner_
        << ", may run its jobs";
    throw std::logic_error(msg.str());
  }
}

void pinned_queue::push(std::function<void()> f) {
  {
    std::lock_guard lock(mu_);
    jobs_.push_back(std::move(f));
  }
  cv_.notify_one();
}

std::size_t pinned_queue::run_pending() {
  check_owner("run_pending");
  std::size_t n;
  {
    std::lock_guard lock(mu_);
    n = jobs_.size();
  }
  for (std::size_t i = 0; i < n; ++i) {
    std::function<void()> job;
    {
      std::lock_guard lock(mu_);
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
  return n;
}

bool pinned_queue::wait_until_steady(std::chrono::steady_clock::time_point deadline) {
  check_owner("wait_pending_for");
  std::unique_lock lock(mu_);
  return cv_.wait_until(lock, deadline, [this] { return !jobs_.empty(); });
}

std::size_t pinned_queue::size() const {
  std::lock_guard lock(mu_);
  return jobs_.size();
}

}  // namespace tessera
