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

// One work_stealing pool of two threads for the whole process (Boost's
// work_stealing may be set up once per process). Jobs run on the main fiber
// of thread 0; thread 1 steals while a job runs. Between jobs both threads
// block in the OS: Boost's idle work_stealing thread polls without end, and
// a pool whose second thread stayed in its scheduler kept one of the two
// cores busy for the rest of the process (2.00 CPU seconds in 2 s of
// idleness), under every later figure — Tessera's, the threads' rows and
// Go's. Boost's own runs keep its default, polling, idle loop.
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
      bf::use_scheduling_algorithm<bf::algo::work_stealing>(2);
      for (;;) {
        {
          std::unique_lock lock(mu_);
          cv_.wait(lock, [this] { return helping_ || quit_; });
          if (quit_) return;
        }
        {  // in the scheduler (stealing) until the job is over
          std::unique_lock run(run_mu_);
          run_cv_.wait(run, [this] { return run_over_; });
        }
        {
          std::lock_guard lock(mu_);
          helping_ = false;
        }
        cv_.notify_all();
      }
    });
    t0_ = std::thread([this] {
      bf::use_scheduling_algorithm<bf::algo::work_stealing>(2);
      for (;;) {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return has_job_ || quit_; });
        if (quit_) return;
        auto job = std::move(job_);
        {
          std::lock_guard run(run_mu_);
          run_over_ = false;
        }
        helping_ = true;
        cv_.notify_all();
        lock.unlock();
        const double r = job();
        {
          std::lock_guard run(run_mu_);
          run_over_ = true;
        }
        run_cv_.notify_all();
        lock.lock();
        cv_.wait(lock, [this] { return !helping_; });  // thread 1 is back in the OS
        result_ = r;
        has_job_ = false;
        cv_.notify_all();
      }
    });
  }
  std::mutex mu_;  // guards job_, has_job_, quit_, helping_, result_
  std::condition_variable cv_;
  std::function<double()> job_;
  bool has_job_ = false, quit_ = false, helping_ = false;
  double result_ = 0;
  bf::mutex run_mu_;  // guards run_over_
  bf::condition_variable run_cv_;
  bool run_over_ = true;
  std::thread t0_, t1_;
};

}  // namespace tessera::bench
