// Boost.Fiber's side of the fiber benchmarks (fiberbench, chanbench): a
// work_stealing pool of two threads, as Tessera's runtime has two workers.
#pragma once

#include <boost/fiber/algo/work_stealing.hpp>
#include <boost/fiber/all.hpp>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace tessera::bench {

namespace bf = boost::fibers;

// One work_stealing pool of two threads for the whole process. Jobs run on the
// main fiber of thread 0; thread 1 steals. Both are built with `suspend`: an
// idle thread sleeps on a condition variable until a fiber is ready. Without
// it (the default) an idle thread polls without end, and after the pool's
// first job it kept one core busy for the rest of the process, under every
// later figure of Tessera's, of the threads' rows and of Go's.
class boost_pool {
 public:
  static boost_pool& get() {
    static boost_pool pool;
    return pool;
  }
  double run(std::function<double()> job) {
    std::unique_lock lock(mu_);
    job_ = std::move(job);
    has_job_ = true;
    cv_.notify_all();
    cv_.wait(lock, [this] { return !has_job_; });
    return result_;
  }
  ~boost_pool() {
    {
      std::lock_guard lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    t0_.join();
    t1_.join();
  }

 private:
  boost_pool() {
    t1_ = std::thread([this] {
      bf::use_scheduling_algorithm<bf::algo::work_stealing>(2, true);
      std::unique_lock lock(done_mu_);
      done_cv_.wait(lock, [this] { return done_; });
    });
    t0_ = std::thread([this] {
      bf::use_scheduling_algorithm<bf::algo::work_stealing>(2, true);
      for (;;) {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return has_job_ || quit_; });
        if (quit_) break;
        auto job = std::move(job_);
        lock.unlock();
        const double r = job();
        lock.lock();
        result_ = r;
        has_job_ = false;
        cv_.notify_all();
      }
      {
        std::lock_guard lock(done_mu_);
        done_ = true;
      }
      done_cv_.notify_all();
    });
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<double()> job_;
  bool has_job_ = false, quit_ = false;
  double result_ = 0;
  bf::mutex done_mu_;
  bf::condition_variable done_cv_;
  bool done_ = false;
  std::thread t0_, t1_;
};

}  // namespace tessera::bench
