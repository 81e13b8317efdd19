// tessera/pinned_queue.h — pinned_queue: jobs that must run on one particular
// thread (a game's main or render thread, which is not a worker), drained by
// that thread at a point it chooses (enkiTS's pinned tasks and RunPinnedTasks).
//
//   tessera::pinned_queue main_thread;              // made on the main thread
//   // ... in a job on a worker:
//   main_thread.post([&] { upload_to_gpu(mesh); });
//   // ... on the main thread, once per frame:
//   main_thread.run_pending();
//
// Contract
// - Owner: the thread that constructs the queue. Only it may call
//   run_pending() and wait_pending_for(); from any other thread (or a fiber,
//   which may move between workers) they throw std::logic_error — so a posted
//   job runs on the owner and nowhere else.
// - post(f): from any thread or fiber, never blocks for long (a short critical
//   section). Jobs run in the order posted (FIFO).
// - run_pending(): runs the jobs queued at the moment of the call, in order,
//   and returns how many ran; jobs posted meanwhile wait for the next call. An
//   exception escaping a job propagates after that job is removed; the jobs
//   behind it stay queued for the next call (none is lost).
// - wait_pending_for(d): blocks the owner until a job is queued or `d` (any
//   std::chrono duration) has passed; returns whether one is queued. A post()
//   wakes it. No spurious `true`.
// - Destroying a queue with jobs in it destroys them unrun.
// - Memory ordering: post() happens-before the posted job's body.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <utility>

#include "tessera/condition_variable.h"
#include "tessera/detail/deadline.h"
#include "tessera/mutex.h"

namespace tessera {

class pinned_queue {
 public:
  pinned_queue() : owner_(std::this_thread::get_id()) {}
  pinned_queue(const pinned_queue&) = delete;
  pinned_queue& operator=(const pinned_queue&) = delete;

  template <class F>
  void post(F&& f) {
    push(std::function<void()>(std::forward<F>(f)));
  }
  std::size_t run_pending();
  template <class Rep, class Period>
  bool wait_pending_for(const std::chrono::duration<Rep, Period>& d) {
    return wait_until_steady(*detail::deadline::after(d));
  }
  /// Jobs queued right now (a snapshot).
  std::size_t size() const;
  std::thread::id owner() const noexcept { return owner_; }

 private:
  void push(std::function<void()> f);
  bool wait_until_steady(std::chrono::steady_clock::time_point deadline);
  void check_owner(const char* who) const;

  const std::thread::id owner_;
  mutable mutex mu_;
  condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
};

}  // namespace tessera
