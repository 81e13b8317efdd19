// Drop-in conformance with the standard: constant initialisation of the types
// whose std:: counterparts have constexpr constructors (constinit globals used
// from fibers and threads), and every public type's special members checked
// against the standard's (copy/move deleted where std deletes them, noexcept
// where std says so).
#include <tessera/tessera.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <stop_token>
#include <thread>
#include <type_traits>
#include <utility>

#include "exec_env.h"
#include "test_util.h"

namespace tessera::test {
namespace {

// ---- special members --------------------------------------------------------
template <class T>
constexpr bool kNoCopyNoMove = !std::is_copy_constructible_v<T> && !std::is_copy_assignable_v<T> &&
                               !std::is_move_constructible_v<T> && !std::is_move_assignable_v<T>;

// [thread.mutex.class] and friends: not copyable, not movable; the default
// constructor of mutex is constexpr and noexcept; destructors are noexcept.
static_assert(kNoCopyNoMove<mutex> && kNoCopyNoMove<timed_mutex> &&
              kNoCopyNoMove<recursive_mutex> && kNoCopyNoMove<recursive_timed_mutex>);
static_assert(kNoCopyNoMove<shared_mutex> && kNoCopyNoMove<shared_timed_mutex>);
static_assert(std::is_nothrow_default_constructible_v<mutex>);
static_assert(std::is_nothrow_destructible_v<mutex> &&
              std::is_nothrow_destructible_v<shared_mutex>);
// [thread.condition]: not copyable or movable.
static_assert(kNoCopyNoMove<condition_variable> && kNoCopyNoMove<condition_variable_any> &&
              kNoCopyNoMove<condition_variable_atomic>);
// [thread.sema], [thread.latch], [thread.barrier]: not copyable or movable;
// max() is constexpr noexcept.
static_assert(kNoCopyNoMove<counting_semaphore<>> && kNoCopyNoMove<binary_semaphore>);
static_assert(kNoCopyNoMove<latch> && kNoCopyNoMove<barrier<>>);
static_assert(noexcept(counting_semaphore<>::max()) && binary_semaphore::max() == 1);
static_assert(noexcept(latch::max()) && latch::max() > 0);
static_assert(noexcept(barrier<>::max()) && barrier<>::max() > 0);
// The standard's noexcept members.
static_assert(noexcept(std::declval<binary_semaphore&>().try_acquire()));
static_assert(noexcept(std::declval<condition_variable&>().notify_one()) && noexcept(
    std::declval<condition_variable&>().notify_all()));
static_assert(noexcept(std::declval<condition_variable_any&>().notify_one()) && noexcept(
    std::declval<condition_variable_any&>().notify_all()));
static_assert(noexcept(std::declval<const latch&>().try_wait()));
// Tessera's own: events, wait_group, channel, fiber (movable like std::thread).
static_assert(kNoCopyNoMove<auto_reset_event> && kNoCopyNoMove<manual_reset_event> &&
              kNoCopyNoMove<wait_group> && kNoCopyNoMove<channel<int>>);
static_assert(!std::is_copy_constructible_v<fiber> && std::is_nothrow_move_constructible_v<fiber> &&
              std::is_nothrow_move_assignable_v<fiber>);
// Lockable requirements, as std::lock_guard / std::shared_lock need them.
static_assert(std::is_same_v<decltype(std::declval<mutex&>().try_lock()), bool>);
static_assert(std::is_same_v<decltype(std::declval<shared_mutex&>().try_lock_shared()), bool>);

// ---- constant initialisation ---------------------------------------------------
// Each of these has a constexpr constructor in the standard (or, for Tessera's
// own types, is built like one): a `constinit` global must compile, and must
// work from fibers and threads with no dynamic initialisation having run.
constinit counting_semaphore<> g_semaphore(0);
constinit binary_semaphore g_binary(1);
constinit counting_semaphore<> g_barging(0, admission::barging);
constinit counting_semaphore<> g_fifo(0, admission::fifo);
constinit mutex g_mutex;
// Beyond the standard (whose constructors of these are not constexpr), but
// as cheap to make constant: the other mutexes and the reader-writer locks.
constinit timed_mutex g_timed_mutex;
constinit recursive_mutex g_recursive_mutex;
constinit shared_mutex g_shared_mutex;
constinit shared_timed_mutex g_shared_timed_mutex;
constinit latch g_latch(4);
constinit barrier<> g_barrier(4);
constinit wait_group g_wait_group;
constinit auto_reset_event g_auto_event;
constinit manual_reset_event g_manual_event;
constinit condition_variable_any g_cv_any;
constinit condition_variable g_cv;
constinit condition_variable_atomic g_cv_atomic;

class ConstinitIn : public ::testing::TestWithParam<exec_kind> {};
INSTANTIATE_TEST_SUITE_P(Envs, ConstinitIn, ::testing::ValuesIn(all_exec_kinds()),
                         [](const auto& p) { return to_string(p.param); });

TEST_P(ConstinitIn, GlobalSemaphoresHandPermitsAround) {
  watchdog dog("constinit semaphores", 60s);
  constexpr int kRounds = 2000;
  long in_section = 0, entries = 0;
  run_all(GetParam(), 4, [&](int who) {
    for (int i = 0; i < kRounds; ++i) {
      g_binary.acquire();
      EXPECT_EQ(++in_section, 1);
      ++entries;
      --in_section;
      g_binary.release();
    }
    // Hand permits round the other semaphores too (each participant one).
    counting_semaphore<>& s = who % 3 == 0 ? g_semaphore : who % 3 == 1 ? g_barging : g_fifo;
    s.release();
    s.acquire();
  });
  EXPECT_EQ(entries, 4L * kRounds);
  EXPECT_FALSE(g_semaphore.try_acquire());
  EXPECT_FALSE(g_barging.try_acquire());
  EXPECT_FALSE(g_fifo.try_acquire());
}

TEST_P(ConstinitIn, GlobalMutexAndConditionVariablesPassATurn) {
  watchdog dog("constinit mutex and condition variables", 60s);
  constexpr int kRounds = 500;
  int turn = 0;
  run_all(GetParam(), 2, [&](int who) {
    for (int i = 0; i < kRounds; ++i) {
      std::unique_lock lock(g_mutex);
      g_cv_any.wait(lock, [&] { return turn == who; });
      turn = 1 - who;
      g_cv_any.notify_all();
    }
  });
  EXPECT_EQ(turn, 0);
}

TEST_P(ConstinitIn, GlobalMutexesExclude) {
  watchdog dog("constinit mutexes", 60s);
  constexpr int kRounds = 1000;
  long count = 0;
  run_all(GetParam(), 4, [&](int who) {
    for (int i = 0; i < kRounds; ++i) {
      if (who % 2 == 0) {
        std::scoped_lock lock(g_timed_mutex, g_recursive_mutex);
        std::lock_guard again(g_recursive_mutex);
        ++count;
      } else {
        std::unique_lock lock(g_shared_mutex);
        std::lock_guard inner(g_shared_timed_mutex);
        std::scoped_lock both(g_timed_mutex, g_recursive_mutex);
        ++count;
      }
    }
  });
  EXPECT_EQ(count, 4L * kRounds);
  std::shared_lock reader(g_shared_mutex);
  EXPECT_FALSE(g_shared_mutex.try_lock());
}

TEST(Constinit, GlobalConditionVariableWaitsForANotification) {
  watchdog dog("constinit condition_variable", 60s);
  runtime rt({.workers = 2});
  rt.run([] {
    std::atomic<int> state{0};
    bool ready = false;
    fiber waiter([&] {
      std::unique_lock lock(g_mutex);
      g_cv.wait(lock, [&] { return ready; });
      state = 1;
    });
    {
      std::lock_guard lock(g_mutex);
      ready = true;
    }
    g_cv.notify_one();
    waiter.join();
    EXPECT_EQ(state.load(), 1);
    // condition_variable_atomic: wait on a value of one atomic.
    std::atomic<int> word{0};
    fiber w2([&] { g_cv_atomic.wait(word, 0); });
    word.store(7);
    g_cv_atomic.notify_all(word);
    w2.join();
  });
}

TEST_P(ConstinitIn, GlobalLatchBarrierWaitGroupAndEventsRelease) {
  watchdog dog("constinit latch, barrier, wait_group, events", 60s);
  // The latch is single-use: only the first environment counts it down; the
  // later ones find it open.
  static std::atomic<bool> latch_used{false};
  const bool count_latch = !latch_used.exchange(true);
  std::atomic<int> phases_done{0};
  g_wait_group.add(4);
  // Once every participant is done(), the helper sets the manual event they
  // wait on, then signals the auto-reset event the test waits on.
  std::thread helper([] {
    g_wait_group.wait();
    g_manual_event.set();
    g_auto_event.signal();
  });
  run_all(GetParam(), 4, [&](int) {
    if (count_latch) g_latch.count_down();
    g_latch.wait();
    for (int p = 0; p < 3; ++p) g_barrier.arrive_and_wait();
    phases_done.fetch_add(1);
    g_wait_group.done();
    g_manual_event.wait();
  });
  g_auto_event.wait();
  helper.join();
  EXPECT_EQ(phases_done.load(), 4);
  EXPECT_TRUE(g_latch.try_wait());
  EXPECT_EQ(g_wait_group.count(), 0);
  EXPECT_FALSE(g_auto_event.try_wait()) << "an auto-reset event's signal is consumed once";
  g_manual_event.reset();
}

// ---- condition_variable_any: a lock that cannot be re-taken terminates ----------
// [thread.condvarany.wait]: if re-acquiring the lock on the way out of a wait
// throws, std::terminate is called. A lock whose lock() throws after its first
// use stands for a user lock that fails; each wait form must die, not let the
// exception reach the caller without the lock.
struct lock_that_fails_again {
  int locks = 0;
  void lock() {
    if (++locks > 1) throw std::runtime_error("lock_that_fails_again: cannot lock again");
  }
  void unlock() noexcept {}
};

// Runs `wait` on a fresh condition_variable_any, notified every millisecond by
// a helper thread, and reports if the wait returned or threw past it.
template <class Wait>
void wait_with_failing_relock(Wait wait) {
  condition_variable_any cv;
  std::atomic<bool> stop{false};
  std::thread notifier([&] {
    while (!stop.load()) {
      cv.notify_all();
      std::this_thread::sleep_for(1ms);
    }
  });
  lock_that_fails_again lock;
  lock.lock();
  try {
    wait(cv, lock);
    std::fprintf(stderr, "the wait returned\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "the wait threw: %s\n", e.what());
  }
  stop = true;
  notifier.join();
  std::_Exit(0);  // not reached when the wait terminates, as it must
}

TEST(ConditionVariableAnyDeathTest, ALockThatThrowsOnRelockTerminatesEveryWaitForm) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  using L = lock_that_fails_again;
  using cv_t = condition_variable_any;
  // "terminat": libstdc++ says "terminate called", libc++abi "terminating".
  EXPECT_DEATH(wait_with_failing_relock([](cv_t& cv, L& l) { cv.wait(l); }), "terminat");
  EXPECT_DEATH(wait_with_failing_relock([](cv_t& cv, L& l) {
                 bool once = false;
                 cv.wait(l, [&] { return std::exchange(once, true); });
               }),
               "terminat");
  EXPECT_DEATH(wait_with_failing_relock([](cv_t& cv, L& l) { (void)cv.wait_for(l, 50ms); }),
               "terminat");
  EXPECT_DEATH(wait_with_failing_relock([](cv_t& cv, L& l) {
                 (void)cv.wait_until(l, std::chrono::system_clock::now() + 50ms);
               }),
               "terminat");
  EXPECT_DEATH(wait_with_failing_relock(
                   [](cv_t& cv, L& l) { (void)cv.wait_for(l, 50ms, [] { return false; }); }),
               "terminat");
  EXPECT_DEATH(wait_with_failing_relock([](cv_t& cv, L& l) {
                 std::stop_source src;
                 bool once = false;
                 (void)cv.wait(l, src.get_token(), [&] { return std::exchange(once, true); });
               }),
               "terminat");
}

}  // namespace
}  // namespace tessera::test
