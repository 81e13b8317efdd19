// A plain std::thread pool, the baseline people write themselves: one queue
// under a std::mutex, a condition variable, and a wait that helps (runs queued
// tasks while its own are unfinished). Good for flat work (parallel loops, a
// frame's systems), not for deep fork-join: see jobbench.cpp.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace jobbench {

class thread_pool {
 public:
  explicit thread_pool(unsigned n) {
    for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this] { loop(); });
  }
  ~thread_pool() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  /// A counter of unfinished tasks a caller waits on.
  struct group {
    std::atomic<long> pending{0};
  };

  void submit(group& g, std::function<void()> f) {
    g.pending.fetch_add(1, std::memory_order_relaxed);
    {
      std::lock_guard lock(mu_);
      queue_.push_back([&g, f = std::move(f)] {
        f();
        g.pending.fetch_sub(1, std::memory_order_acq_rel);
      });
    }
    cv_.notify_one();
  }
  /// Runs queued tasks until g's are done, nesting at most 64 deep (helping
  /// without a bound overflows the stack); otherwise yields.
  void wait(group& g) {
    thread_local int depth = 0;
    while (g.pending.load(std::memory_order_acquire) != 0) {
      std::function<void()> f;
      if (depth < 64) {
        std::lock_guard lock(mu_);
        if (!queue_.empty()) {
          f = std::move(queue_.front());
          queue_.pop_front();
        }
      }
      if (f) {
        ++depth;
        f();
        --depth;
      } else {
        std::this_thread::yield();
      }
    }
  }
  unsigned size() const { return static_cast<unsigned>(threads_.size()); }

 private:
  void loop() {
    for (;;) {
      std::function<void()> f;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (stop_ && queue_.empty()) return;
        f = std::move(queue_.front());
        queue_.pop_front();
      }
      f();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace jobbench
