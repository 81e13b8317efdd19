// The execution environments every primitive is tested in (as marl does): plain
// OS threads; fibers on 1, 2 and 4 workers (4 on this 2-core machine is
// oversubscribed); and fibers and threads mixed on the same objects.
#pragma once

#include <tessera/runtime.h>
#include <tessera/semaphore.h>

#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessera::test {

enum class exec_kind { threads, fibers_1w, fibers_2w, fibers_4w, mixed };

inline const std::vector<exec_kind>& all_exec_kinds() {
  static const std::vector<exec_kind> kinds{exec_kind::threads, exec_kind::fibers_1w,
                                            exec_kind::fibers_2w, exec_kind::fibers_4w,
                                            exec_kind::mixed};
  return kinds;
}

inline std::string to_string(exec_kind k) {
  switch (k) {
    case exec_kind::threads: return "threads";
    case exec_kind::fibers_1w: return "fibers1w";
    case exec_kind::fibers_2w: return "fibers2w";
    case exec_kind::fibers_4w: return "fibers4w";
    case exec_kind::mixed: return "mixed";
  }
  return "?";
}

/// A set of concurrent participants of one kind. spawn() starts one at once
/// (as an OS thread, or as a fiber of the group's runtime; `mixed` alternates
/// fiber, thread, fiber, ...); join() waits for all. The test body itself runs
/// on the test's OS thread, so with fibers every test also crosses the
/// thread/fiber boundary.
class group {
 public:
  explicit group(exec_kind kind) : kind_(kind) {
    if (kind_ == exec_kind::threads) return;
    const unsigned workers = kind_ == exec_kind::fibers_1w   ? 1
                             : kind_ == exec_kind::fibers_4w ? 4
                                                             : 2;
    driver_ = std::thread([this, workers] {
      runtime rt({.workers = workers});
      // The root fiber starts the fibers the test thread asks for, then joins them.
      rt.run([this] {
        std::vector<fiber> fibers;
        for (;;) {
          pending_.acquire();
          std::function<void()> body;
          {
            std::lock_guard lock(mu_);
            if (queue_.empty()) break;  // closing
            body = std::move(queue_.front());
            queue_.pop_front();
          }
          fibers.emplace_back(std::move(body));
        }
        for (auto& f : fibers) f.join();
      });
    });
  }
  ~group() { join(); }
  group(const group&) = delete;
  group& operator=(const group&) = delete;

  void spawn(std::function<void()> body) {
    const bool as_thread =
        kind_ == exec_kind::threads || (kind_ == exec_kind::mixed && (count_ % 2) == 1);
    ++count_;
    if (as_thread) {
      threads_.emplace_back(std::move(body));
      return;
    }
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(body));
    }
    pending_.release();
  }

  void spawn_n(int n, const std::function<void(int)>& body) {
    for (int i = 0; i < n; ++i) spawn([body, i] { body(i); });
  }

  void join() {
    for (auto& t : threads_) t.join();
    threads_.clear();
    if (driver_.joinable()) {
      pending_.release();  // an empty queue tells the root fiber to stop
      driver_.join();
    }
  }

 private:
  exec_kind kind_;
  int count_ = 0;
  std::vector<std::thread> threads_;
  std::thread driver_;
  std::mutex mu_;
  std::deque<std::function<void()>> queue_;
  counting_semaphore<> pending_{0};
};

/// Runs body(0..n-1) concurrently in `kind` and waits for all.
inline void run_all(exec_kind kind, int n, const std::function<void(int)>& body) {
  group g(kind);
  g.spawn_n(n, body);
  g.join();
}

}  // namespace tessera::test
