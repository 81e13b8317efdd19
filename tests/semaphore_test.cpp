// Semaphores: the TWA counting_semaphore (behaviour, FIFO, timeouts, the timed-
// acquisition stress, misuse) and the Listing 1/2 baselines.
#include <tessera/semaphore.h>
#include "baseline/ticket_semaphore.h"
#include "baseline/twa_spin_semaphore.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "exec_env.h"
#include "test_util.h"

namespace tessera::test {
namespace {

// ---------------------------------------------------------------------------
// Behaviour common to all three semaphores, in OS threads. (ticket_semaphore and
// twa_spin_semaphore are the paper's pure-spin baselines: a waiter never parks,
// so on fibers it would hold its worker. Only the TWA semaphore below is meant
// for fibers, and its tests run in every environment.)
template <class S>
class AnySemaphore : public ::testing::Test {};
using SemaphoreTypes = ::testing::Types<counting_semaphore<>, ticket_semaphore, twa_spin_semaphore>;
TYPED_TEST_SUITE(AnySemaphore, SemaphoreTypes);

TYPED_TEST(AnySemaphore, InitialCountIsExactlyTheNumberOfFreePermits) {
  TypeParam s(3);
  EXPECT_TRUE(s.try_acquire());
  EXPECT_TRUE(s.try_acquire());
  EXPECT_TRUE(s.try_acquire());
  EXPECT_FALSE(s.try_acquire());
  s.release(2);
  EXPECT_TRUE(s.try_acquire());
  EXPECT_TRUE(s.try_acquire());
  EXPECT_FALSE(s.try_acquire());
}

TYPED_TEST(AnySemaphore, ActsAsMutexUnderContention) {
  watchdog dog("AnySemaphore mutex", 60s);
  TypeParam s(1);
  long shared = 0;  // protected by s: TSan checks the happens-before edges
  constexpr int kThreads = 2, kIters = 20000;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < kIters; ++k) {
        s.acquire();
        ++shared;
        s.release();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(shared, kThreads * kIters);
}

TYPED_TEST(AnySemaphore, NegativeInitialCountThrows) {
  EXPECT_THROW(TypeParam s(-1), std::invalid_argument);
}

TYPED_TEST(AnySemaphore, NegativeReleaseThrowsAndChangesNothing) {
  TypeParam s(0);
  EXPECT_THROW(s.release(-1), std::invalid_argument);
  EXPECT_FALSE(s.try_acquire());
}

// The spinning baselines admit in ticket order: arrivals sequenced by the
// tickets themselves, then one release at a time admits exactly the next one.
template <class S>
class TicketBaseline : public ::testing::Test {};
using TicketBaselineTypes = ::testing::Types<ticket_semaphore, twa_spin_semaphore>;
TYPED_TEST_SUITE(TicketBaseline, TicketBaselineTypes);

TYPED_TEST(TicketBaseline, AdmitsInTicketOrder) {
  watchdog dog("ticket baseline FIFO", 60s);
  constexpr int kThreads = 4;
  TypeParam s(0);
  std::mutex order_mu;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      s.acquire();
      std::lock_guard lock(order_mu);
      order.push_back(i);
    });
    ASSERT_TRUE(eventually([&] { return s.tickets_taken() == static_cast<std::uint64_t>(i + 1); }));
  }
  for (int k = 0; k < kThreads; ++k) {
    s.release();
    ASSERT_TRUE(eventually([&] {
      std::lock_guard lock(order_mu);
      return order.size() == static_cast<std::size_t>(k + 1);
    }));
  }
  for (auto& t : threads) t.join();
  const std::vector<int> want{0, 1, 2, 3};
  EXPECT_EQ(order, want);
}

// ---------------------------------------------------------------------------
// The TWA semaphore, under several waiting strategies.
struct tuning {
  std::uint32_t threshold;
  std::uint32_t spins;
  std::uint32_t window;  // admission_window: 0 is strict FIFO (no lobby)
  bool barging = false;  // admission::barging (no tickets; the rest is unused)
  bool faa = false;      // admission::faa (the segment queue; the rest is unused)
  bool faa_lobby = false;  // with faa: admission::faa_restricted
  bool handoff = false;    // admission::handoff (the locked queue; the rest is unused)
};

// Sets the process-wide TWA tuning for one test and restores it afterwards.
class scoped_tuning {
 public:
  explicit scoped_tuning(tuning t)
      : saved_{detail::twa_config().long_term_threshold.load(),
               detail::twa_config().spin_iterations.load(),
               detail::twa_config().admission_window.load()} {
    set(t);
  }
  ~scoped_tuning() { set(saved_); }
  scoped_tuning(const scoped_tuning&) = delete;
  scoped_tuning& operator=(const scoped_tuning&) = delete;

 private:
  static void set(tuning t) {
    detail::twa_config().long_term_threshold = t.threshold;
    detail::twa_config().spin_iterations = t.spins;
    detail::twa_config().admission_window = t.window;
  }
  tuning saved_;
};

class Strategy : public ::testing::TestWithParam<std::tuple<tuning, exec_kind>> {
 protected:
  void SetUp() override { tuned_.emplace(std::get<0>(GetParam())); }
  void TearDown() override { tuned_.reset(); }
  exec_kind kind() const { return std::get<1>(GetParam()); }
  /// The admission policy the tests build their semaphores with.
  admission mode() const {
    const tuning& tu = std::get<0>(GetParam());
    return tu.barging       ? admission::barging
           : tu.handoff     ? admission::handoff
           : tu.faa         ? (tu.faa_lobby ? admission::faa_restricted : admission::faa)
           : tu.window == 0 ? admission::fifo
                            : admission::restricted;
  }
  std::optional<scoped_tuning> tuned_;
};
/// What any counting_semaphore promises, whatever its admission policy.
class AnyAdmission : public Strategy {};
/// What the TWA semaphore adds: FIFO tickets.
class Twa : public Strategy {};

std::string strategy_name(const ::testing::TestParamInfo<std::tuple<tuning, exec_kind>>& p) {
  const tuning tu = std::get<0>(p.param);
  const std::string env = "_" + to_string(std::get<1>(p.param));
  if (tu.barging) return "barging" + env;
  if (tu.handoff) return "handoff" + env;
  if (tu.faa) return (tu.faa_lobby ? "faa_restricted" : "faa") + env;
  return "threshold" + std::to_string(tu.threshold) + "_spin" + std::to_string(tu.spins) +
         (tu.window == 0 ? std::string("_fifo") : "_window" + std::to_string(tu.window)) + env;
}

// Every TWA test runs under four waiting strategies and in every execution
// environment (threads, fibers on 1/2/4 workers, fibers and threads mixed): the
// defaults (restricted admission, window 1); strict FIFO parking at once, and
// with long-term waiting (threshold 3, the successor-of-successor poke); and a
// lobby behind a queue of 2 with long-term waiting. The AnyAdmission tests also
// run with admission::barging, admission::faa, admission::faa_restricted and
// admission::handoff.
const std::vector<tuning> kTwaStrategies{tuning{1, 1024, 1}, tuning{0, 0, 0}, tuning{3, 16, 0},
                                         tuning{3, 16, 2}};
std::vector<tuning> with_other_cores(std::vector<tuning> v) {
  v.push_back(tuning{1, 1024, 1, true});
  v.push_back(tuning{1, 1024, 1, false, true});
  v.push_back(tuning{1, 1024, 1, false, true, true});
  v.push_back(tuning{1, 1024, 1, false, false, false, true});
  return v;
}
INSTANTIATE_TEST_SUITE_P(Strategies, Twa,
                         ::testing::Combine(::testing::ValuesIn(kTwaStrategies),
                                            ::testing::ValuesIn(all_exec_kinds())),
                         strategy_name);
INSTANTIATE_TEST_SUITE_P(Strategies, AnyAdmission,
                         ::testing::Combine(::testing::ValuesIn(with_other_cores(kTwaStrategies)),
                                            ::testing::ValuesIn(all_exec_kinds())),
                         strategy_name);

// counting_semaphore as a lock, contended by participants of every kind.
TEST_P(AnyAdmission, ActsAsMutexUnderContention) {
  watchdog dog("semaphore as mutex", 60s);
  counting_semaphore<> s(1, mode());
  long shared = 0;  // protected by s: TSan checks the happens-before edges
  constexpr int kParticipants = 4, kIters = 5000;
  run_all(kind(), kParticipants, [&](int) {
    for (int k = 0; k < kIters; ++k) {
      s.acquire();
      ++shared;
      s.release();
    }
  });
  EXPECT_EQ(shared, kParticipants * kIters);
}

// Acquirers that arrive one at a time and record the order they got in.
struct arrivals {
  std::mutex mu;
  std::vector<int> order;  // read after the acquirers are joined

  // Spawns n acquirers of `s` in `g`, each only once the one before waits.
  bool queue_one_by_one(group& g, counting_semaphore<>& s, int n) {
    for (int i = 0; i < n; ++i) {
      g.spawn([this, &s, i] {
        s.acquire();
        std::lock_guard lock(mu);
        order.push_back(i);
      });
      if (!eventually([&] { return s.waiting() == i + 1; })) return false;
    }
    return true;
  }
  int admitted() {
    std::lock_guard lock(mu);
    return static_cast<int>(order.size());
  }
};

// Spawns in `g` one acquirer of `s` that sets `got` once it holds a permit.
void spawn_acquirer(group& g, counting_semaphore<>& s, std::atomic<bool>& got) {
  g.spawn([&s, &got] {
    s.acquire();
    got = true;
  });
}

std::vector<int> iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

// Arrivals are sequenced (thread i takes its ticket only after thread i-1 is
// queued); releases admit one at a time; admission order must be arrival order.
TEST_P(Twa, FifoAdmissionFollowsTicketOrder) {
  watchdog dog("FIFO", 60s);
  counting_semaphore<> s(0);
  constexpr int kThreads = 8;
  arrivals log;
  group g(kind());
  ASSERT_TRUE(log.queue_one_by_one(g, s, kThreads));
  for (int i = 0; i < kThreads; ++i) {
    s.release(1);
    ASSERT_TRUE(eventually([&] { return log.admitted() == i + 1; }));
  }
  g.join();
  EXPECT_EQ(log.order, iota(kThreads));
}

// `waiters` callers park; release(n) must admit exactly n of them (nobody
// else passes), and releasing the rest admits everyone.
void release_n_admits_exactly_n(exec_kind kind, admission mode, int waiters, int n) {
  watchdog dog("release(n)", 60s);
  counting_semaphore<> s(0, mode);
  std::atomic<int> admitted{0};
  group g(kind);
  g.spawn_n(waiters, [&](int) {
    s.acquire();
    admitted.fetch_add(1);
  });
  ASSERT_TRUE(eventually([&] { return s.waiting() == waiters; }));
  s.release(n);
  ASSERT_TRUE(eventually([&] { return admitted.load() == n; }))
      << admitted.load() << " of " << n << " admitted";
  // Nobody else may pass: give any wrongly admitted waiter time to show itself.
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(admitted.load(), n);
  EXPECT_EQ(s.waiting(), waiters - n);
  EXPECT_EQ(s.available(), 0);
  s.release(waiters - n);
  g.join();
  EXPECT_EQ(admitted.load(), waiters);
  EXPECT_EQ(s.available(), 0);
  EXPECT_EQ(s.waiting(), 0);
}

TEST_P(AnyAdmission, ReleaseNAdmitsExactlyN) {
  release_n_admits_exactly_n(kind(), mode(), 7, 3);
}

TEST_P(Twa, TryAcquireNeverBargesAheadOfAQueuedWaiter) {
  counting_semaphore<> s(0);
  std::atomic<bool> got{false};
  group g(kind());
  spawn_acquirer(g, s, got);
  ASSERT_TRUE(eventually([&] { return s.waiting() == 1; }));
  s.release(1);                   // the permit now belongs to the queued ticket
  EXPECT_FALSE(s.try_acquire());  // so this must not take it
  g.join();
  EXPECT_TRUE(got.load());
}

void check_timeouts(admission mode);

TEST_P(AnyAdmission, TimeoutsAreNeverEarlyNorGrosslyLate) {
  run_all(kind(), 1, [this](int) { check_timeouts(mode()); });
}

void check_timeouts(admission mode) {
  counting_semaphore<> s(0, mode);
  for (auto timeout : {1ms, 5ms, 30ms}) {
    const auto start = clock::now();
    EXPECT_FALSE(s.try_acquire_for(timeout));
    const auto elapsed = clock::now() - start;
    EXPECT_GE(elapsed, timeout);
    EXPECT_LT(elapsed, timeout + 500ms);
    const auto start2 = clock::now();
    EXPECT_FALSE(s.try_acquire_until(start2 + timeout));
    EXPECT_GE(clock::now(), start2 + timeout);
  }
  EXPECT_FALSE(s.try_acquire_for(0ms));
  EXPECT_FALSE(s.try_acquire_for(-5ms));
  // A non-steady clock works too.
  const auto sys_start = std::chrono::system_clock::now();
  EXPECT_FALSE(s.try_acquire_until(sys_start + 10ms));
  EXPECT_GE(std::chrono::system_clock::now(), sys_start + 10ms);
  EXPECT_EQ(s.waiting(), 0);
  s.release(1);
  EXPECT_TRUE(s.try_acquire_for(0ms));  // zero timeout still takes a free permit
}

TEST_P(AnyAdmission, TimedOutWaiterNeitherLosesAPermitNorBlocksLaterTickets) {
  watchdog dog("timed-out waiter", 60s);
  counting_semaphore<> s(0, mode());
  // Ticket 0 times out; ticket 1 queued behind it must get the next permit.
  group early(kind());
  early.spawn([&] { EXPECT_FALSE(s.try_acquire_for(100ms)); });
  ASSERT_TRUE(eventually([&] { return s.waiting() == 1; }));
  std::atomic<bool> later_got{false};
  group later(kind());
  spawn_acquirer(later, s, later_got);
  early.join();
  ASSERT_TRUE(eventually([&] { return s.waiting() == 1; }));  // only `later` remains
  EXPECT_FALSE(later_got.load());
  s.release(1);  // granted to the cancelled ticket 0, forwarded to ticket 1
  later.join();
  EXPECT_TRUE(later_got.load());
  EXPECT_EQ(s.available(), 0);
  s.release(1);
  EXPECT_EQ(s.available(), 1);
  EXPECT_TRUE(s.try_acquire());
}

TEST_P(AnyAdmission, MutexStyleTimeoutKeepsMutualExclusion) {
  binary_semaphore s(1, mode());
  s.acquire();  // held
  run_all(kind(), 1, [&](int) { EXPECT_FALSE(s.try_acquire_for(20ms)); });
  EXPECT_FALSE(s.try_acquire()) << "a timed-out waiter admitted someone while the holder holds";
  s.release();
  EXPECT_TRUE(s.try_acquire()) << "the permit forwarded past the cancelled ticket was lost";
  s.release();
}

// The timed-acquisition stress: threads mix acquire, try_acquire and
// timed acquires (zero, tiny and long timeouts, both clocks' forms) with
// release(n). Afterwards: permits in == permits out + count, nobody queued, and
// at no time more holders than permits.
TEST_P(AnyAdmission, StressMixedTimedAcquisitionConservesPermits) {
  watchdog dog("timed-acquisition stress", 120s);
  constexpr std::ptrdiff_t kInitial = 3;
  constexpr int kThreads = 6;
  constexpr int kIters = 20000;
  const auto time_budget = clock::now() + stress_time(3s);
  counting_semaphore<> s(kInitial, mode());
  std::atomic<long> acquired{0}, released{0};
  std::atomic<int> holders{0}, max_holders{0};
  run_all(kind(), kThreads, [&](int id) {
    std::mt19937 rng(1234u + static_cast<unsigned>(id));
    for (int it = 0; it < kIters && clock::now() < time_budget; ++it) {
      int got = 0;
      switch (rng() % 7) {
        case 0:
          s.acquire();
          got = 1;
          break;
        case 1:
          got = s.try_acquire();
          break;
        case 2:
          got = s.try_acquire_for(0ms);
          break;
        case 3:
          got = s.try_acquire_for(std::chrono::microseconds(rng() % 20));
          break;
        case 4:
          got = s.try_acquire_until(clock::now() + std::chrono::microseconds(rng() % 200));
          break;
        case 5:
          got = s.try_acquire_for(50ms);
          break;
        case 6:  // take two, give both back with one release(2)
          if (s.try_acquire_for(1ms)) {
            got = 1;
            if (s.try_acquire_for(std::chrono::microseconds(100))) got = 2;
          }
          break;
      }
      if (got == 0) continue;
      acquired.fetch_add(got);
      const int h = holders.fetch_add(got) + got;
      int m = max_holders.load();
      while (h > m && !max_holders.compare_exchange_weak(m, h)) {
      }
      if (rng() % 4 == 0) yield_now();
      holders.fetch_sub(got);
      released.fetch_add(got);
      s.release(got);
    }
  });
  EXPECT_LE(max_holders.load(), kInitial) << "more holders than permits";
  EXPECT_EQ(acquired.load(), released.load());
  EXPECT_EQ(s.waiting(), 0);
  // permits in (initial + releases) == permits out (acquisitions) + count
  EXPECT_EQ(kInitial + released.load(), acquired.load() + s.available());
  EXPECT_GT(acquired.load(), 0);
}

// ---------------------------------------------------------------------------
// Restricted admission: the lobby (semaphore.h, "Concurrency restriction"), in
// front of the TWA semaphore's tickets (admission::restricted) and of the FAA
// semaphore's segment queue (admission::faa_restricted).
class Lobby : public ::testing::TestWithParam<std::tuple<admission, exec_kind>> {
 protected:
  scoped_tuning tuned_{tuning{1, 1024, 1}};
  admission mode() const { return std::get<0>(GetParam()); }
  exec_kind kind() const { return std::get<1>(GetParam()); }
};
INSTANTIATE_TEST_SUITE_P(Envs, Lobby,
                         ::testing::Combine(::testing::Values(admission::restricted,
                                                              admission::faa_restricted),
                                            ::testing::ValuesIn(all_exec_kinds())),
                         [](const auto& p) {
                           return (std::get<0>(p.param) == admission::restricted ? "twa_"
                                                                                 : "faa_") +
                                  to_string(std::get<1>(p.param));
                         });

// With window 1, the first blocked acquirer takes a ticket and the rest wait in
// the lobby; release(n) then admits exactly n of them, in arrival order.
TEST_P(Lobby, SurplusAcquirersWaitInTheLobbyAndReleaseNAdmitsThemInOrder) {
  watchdog dog("lobby", 60s);
  counting_semaphore<> s(0, mode());
  constexpr int kThreads = 5;
  arrivals log;
  group g(kind());
  ASSERT_TRUE(log.queue_one_by_one(g, s, kThreads));
  EXPECT_EQ(s.queued(), 1);
  EXPECT_EQ(s.lobby(), kThreads - 1);
  auto admitted = [&] { return log.admitted(); };
  s.release(3);  // the queued ticket and the lobby's two oldest
  ASSERT_TRUE(eventually([&] { return admitted() == 3; }));
  // The two left stay out (give them 50 ms to err): no permit is free and the
  // grant stands still, so they stay in the lobby. (One may have taken a ticket
  // already: the oldest's fairness timer can fire just as release(3) moves the
  // grant, and it then enters beside the two that release(3) calls in.)
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(s.lobby() + s.queued(), 2);
  EXPECT_GE(s.lobby(), 1);
  EXPECT_EQ(admitted(), 3);
  EXPECT_EQ(s.available(), 0);
  for (int i = 3; i < kThreads; ++i) {
    s.release(1);
    ASSERT_TRUE(eventually([&] { return admitted() == i + 1; }));
  }
  g.join();
  // The first three were admitted by one release(3): they record in any order.
  std::sort(log.order.begin(), log.order.begin() + 3);
  EXPECT_EQ(log.order, iota(kThreads));
  EXPECT_EQ(s.waiting(), 0);
  EXPECT_EQ(s.available(), 0);
}

// A timed acquirer whose deadline passes in the lobby leaves holding nothing and
// disturbs nobody: the queued ticket still gets the next permit, none is lost.
TEST_P(Lobby, TimedOutLobbyMemberLeavesWithoutTouchingTheQueue) {
  watchdog dog("lobby timeout", 60s);
  counting_semaphore<> s(0, mode());
  std::atomic<bool> first_got{false};
  group first(kind());
  spawn_acquirer(first, s, first_got);
  ASSERT_TRUE(eventually([&] { return s.queued() == 1; }));
  run_all(kind(), 1, [&](int) {
    const auto start = clock::now();
    EXPECT_FALSE(s.try_acquire_for(30ms));
    EXPECT_GE(clock::now() - start, 30ms);
  });
  EXPECT_EQ(s.lobby(), 0);
  EXPECT_EQ(s.queued(), 1);
  EXPECT_FALSE(first_got.load());
  s.release(1);
  first.join();
  EXPECT_TRUE(first_got.load());
  EXPECT_EQ(s.available(), 0);
  s.release(1);
  EXPECT_TRUE(s.try_acquire());
}

// Long-term fairness. Three participants share a binary semaphore, and each
// holder keeps the permit until someone has queued behind it, so every release
// has a waiter to serve and a permit is never free for long: with restricted
// admission (window 1) the third participant, in the lobby, can get in only
// through the fairness timer (with the timer disabled by hand, one participant
// stayed at its first few rounds and this test failed at its time limit); with
// barging, the releaser takes the permit straight back unless the fairness
// hand-off gives it to the oldest waiter. Every participant must keep going.
void every_participant_progresses(exec_kind kind, admission mode) {
  binary_semaphore s(1, mode);
  constexpr int kParticipants = 3;
  constexpr long kRounds = 300;
  std::array<std::atomic<long>, kParticipants> rounds{};
  std::atomic<bool> stop{false};
  const auto give_up = clock::now() + 5s * kSanitizerSlowdown;
  auto all_done = [&] {
    return std::all_of(rounds.begin(), rounds.end(), [](auto& r) { return r.load() >= kRounds; });
  };
  run_all(kind, kParticipants, [&](int id) {
    while (!stop.load()) {
      s.acquire();
      rounds[id].fetch_add(1);
      if (all_done() || clock::now() > give_up) stop = true;
      while (s.queued() == 0 && !stop.load()) yield_now();  // hold until someone queues
      s.release();
    }
  });
  for (int i = 0; i < kParticipants; ++i) {
    EXPECT_GE(rounds[i].load(), kRounds) << "participant " << i << " was shut out";
  }
  EXPECT_EQ(s.available(), 1);
}

TEST_P(Lobby, EveryParticipantProgressesThoughAPermitIsNeverFree) {
  watchdog dog("lobby fairness", 60s);
  every_participant_progresses(kind(), mode());
}

// ---------------------------------------------------------------------------
// admission::barging (semaphore.h, "Barging admission").
class Barging : public ::testing::TestWithParam<exec_kind> {
 protected:
  exec_kind kind() const { return GetParam(); }
};
INSTANTIATE_TEST_SUITE_P(Envs, Barging, ::testing::ValuesIn(all_exec_kinds()),
                         [](const auto& p) { return to_string(p.param); });

TEST_P(Barging, EveryParticipantProgressesThoughTheReleaserTakesThePermitBack) {
  watchdog dog("barging fairness", 60s);
  every_participant_progresses(kind(), admission::barging);
}

// A release wakes at most one batch of waiters (8) at once; the woken that win
// wake the next, so release(n) must reach n waiters however many are queued.
TEST_P(Barging, ReleaseNReachesNWaitersBeyondOneWakeBatch) {
  release_n_admits_exactly_n(kind(), admission::barging, 20, 13);
}

// Barging itself: a waiter woken by a release competes for the permit; until it
// runs, anyone may take it. On one worker the woken fiber cannot run before the
// releasing fiber parks or yields, so the releaser's try_acquire must win —
// unless the fairness hand-off (after 1 ms of waiting) gave the permit to the
// waiter, which a preempted worker thread can cause: so up to 10 attempts.
TEST(BargingOneWorker, TryAcquireTakesAPermitBeforeTheWokenWaiterRuns) {
  watchdog dog("barging try_acquire", 60s);
  int barged = 0;
  for (int attempt = 0; attempt < 10 && barged == 0; ++attempt) {
    binary_semaphore s(1, admission::barging);
    std::atomic<bool> holding{false}, waiter_got{false};
    bool took = false;
    run_all(exec_kind::fibers_1w, 2, [&](int id) {
      if (id == 0) {
        s.acquire();
        holding = true;
        while (s.waiting() == 0) yield_now();  // the other fiber parks in acquire()
        s.release();                           // wakes it; it cannot run yet
        took = s.try_acquire();
        if (took) s.release();  // now it may have the permit
      } else {
        while (!holding.load()) yield_now();
        s.acquire();
        waiter_got = true;
        s.release();
      }
    });
    EXPECT_TRUE(waiter_got.load()) << "the woken waiter never got the permit";
    EXPECT_EQ(s.available(), 1);
    barged += took ? 1 : 0;
  }
  EXPECT_EQ(barged, 1) << "try_acquire never took the permit ahead of the woken waiter";
}

// ---------------------------------------------------------------------------
// Misuse: clear errors that name the object and the rule, and lose nothing.
template <class Fn>
std::string what_of(Fn&& fn) {
  try {
    fn();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<no exception>";
}

TEST(SemaphoreMisuse, InitialCountOutsideRangeIsRejectedWithMessage) {
  EXPECT_NE(
      what_of([] { counting_semaphore<> s(-1); }).find("initial count -1 is outside [0, max()]"),
      std::string::npos);
  EXPECT_NE(what_of([] { binary_semaphore s(2); }).find("tessera::counting_semaphore<1>"),
            std::string::npos);
}

TEST(SemaphoreMisuse, ReleaseOutsideRangeIsRejectedAndLosesNothing) {
  binary_semaphore s(0);
  EXPECT_NE(what_of([&] { s.release(-1); }).find("update -1 is outside [0, max()]"),
            std::string::npos);
  EXPECT_NE(what_of([&] { s.release(2); }).find("update 2"), std::string::npos);
  s.release(1);
  EXPECT_NE(what_of([&] { s.release(1); }).find("would exceed max()"), std::string::npos);
  EXPECT_EQ(s.available(), 1) << "a rejected release changed the count";
  EXPECT_TRUE(s.try_acquire());
  EXPECT_FALSE(s.try_acquire());
}

TEST(SemaphoreMisuse, MaxIsLeastMaxValue) {
  static_assert(binary_semaphore::max() == 1);
  static_assert(counting_semaphore<5>::max() == 5);
  counting_semaphore<5> s(5);
  EXPECT_THROW(s.release(1), std::invalid_argument);
  EXPECT_EQ(s.available(), 5);
}

TEST(SemaphoreMisuse, BargingRejectsBadCountsAlikeAndLosesNothing) {
  EXPECT_NE(what_of([] {
              binary_semaphore s(2, admission::barging);
            }).find("tessera::counting_semaphore<1>: initial count 2 is outside [0, max()]"),
            std::string::npos);
  // The barging word holds 2^62-1 permits: more is refused up front, with the reason.
  EXPECT_NE(what_of([] {
              counting_semaphore<> s(PTRDIFF_MAX, admission::barging);
            }).find("barging admission holds at most 2^62-1"),
            std::string::npos);
  binary_semaphore s(0, admission::barging);
  EXPECT_NE(what_of([&] { s.release(-1); }).find("update -1 is outside [0, max()]"),
            std::string::npos);
  s.release(1);
  EXPECT_NE(what_of([&] { s.release(1); }).find("releasing 1 with count 1 would exceed max()"),
            std::string::npos);
  EXPECT_EQ(s.available(), 1) << "a rejected release changed the count";
  EXPECT_TRUE(s.try_acquire());
  EXPECT_FALSE(s.try_acquire());
}

#if TESSERA_CHECKS
TEST(SemaphoreMisuseDeathTest, DestroyingWithWaitersAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (admission mode : {admission::restricted, admission::barging}) {
    EXPECT_DEATH(
        {
          auto* s = new counting_semaphore<>(0, mode);
          std::thread([s] { s->acquire(); }).detach();
          while (s->waiting() == 0) std::this_thread::yield();
          delete s;
        },
        "counting_semaphore destroyed while threads or fibers wait on it");
  }
}
#endif

}  // namespace
}  // namespace tessera::test

namespace tessera::test {
namespace {
// Regression: twa_spin_semaphore's release shortcut compared the *new* grant with
// the ticket counter, so with exactly one far waiter (ticket == old grant + 1)
// it skipped the poke and that waiter spun forever on its bucket. Four threads
// contending a lock-style semaphore hung within milliseconds.
TEST(TwaSpinSemaphore, SoleFarWaiterIsPokedWhenItComesWithinThreshold) {
  watchdog dog("twa_spin far waiter", 60s);
  twa_spin_semaphore s(0);
  std::atomic<int> admitted{0};
  std::thread near([&] {
    s.acquire();
    admitted.fetch_add(1);
  });  // ticket 0: near
  // Sequenced by the tickets themselves: `far` starts only once `near` holds
  // ticket 0, and the release comes only once `far` holds ticket 1.
  ASSERT_TRUE(eventually([&] { return s.tickets_taken() == 1; }));
  std::thread far([&] {
    s.acquire();
    admitted.fetch_add(1);
  });  // ticket 1: far
  ASSERT_TRUE(eventually([&] { return s.tickets_taken() == 2; }));
  ASSERT_EQ(admitted.load(), 0);
  s.release();  // admits ticket 0; ticket 1 comes within the threshold: must be poked
  ASSERT_TRUE(eventually([&] { return admitted.load() == 1; }));
  s.release();
  near.join();
  far.join();
  EXPECT_EQ(admitted.load(), 2);
}

TEST(TwaSpinSemaphore, FourThreadsContendingALockMakeProgress) {
  watchdog dog("twa_spin 4 threads", 60s);
  twa_spin_semaphore s(1);
  long shared = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 2000; ++k) {
        s.acquire();
        ++shared;
        s.release();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(shared, 8000);
}
// ---------------------------------------------------------------------------
// admission::handoff: strict FIFO, permits handed straight to the oldest
// waiter (never seen in the count while anybody waits).

class Handoff : public ::testing::TestWithParam<exec_kind> {};
INSTANTIATE_TEST_SUITE_P(Envs, Handoff, ::testing::ValuesIn(all_exec_kinds()),
                         [](const auto& p) { return to_string(p.param); });

// Six acquirers queue one by one; six single releases must admit them in
// that order (the strict-FIFO admissions: faa and handoff).
void admits_in_arrival_order(exec_kind kind, admission mode) {
  watchdog dog("arrival order", 60s);
  counting_semaphore<> s(0, mode);
  arrivals a;
  group g(kind);
  ASSERT_TRUE(a.queue_one_by_one(g, s, 6));
  for (int k = 0; k < 6; ++k) {
    s.release();
    ASSERT_TRUE(eventually([&] { return a.admitted() == k + 1; }));
  }
  g.join();
  EXPECT_EQ(a.order, iota(6));
}

TEST_P(Handoff, AdmitsInArrivalOrder) {
  admits_in_arrival_order(GetParam(), admission::handoff);
}

// The permit a release hands to a queued waiter is that waiter's: a newcomer's
// try_acquire fails, and the count never shows it.
TEST_P(Handoff, AHandedPermitIsNeverFreeForANewcomer) {
  watchdog dog("handoff no barging", 60s);
  counting_semaphore<> s(0, admission::handoff);
  std::atomic<bool> got{false};
  group g(GetParam());
  spawn_acquirer(g, s, got);
  ASSERT_TRUE(eventually([&] { return s.waiting() == 1; }));
  s.release(1);
  EXPECT_EQ(s.available(), 0);
  EXPECT_FALSE(s.try_acquire());
  g.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(s.available(), 0);
}

// release(n) hands out permits a batch of 16 at a time: 37 of 40 waiters must
// get in, and they must be the 37 oldest (they then run in any order); the
// last three get in with the next release(4), which leaves one permit.
TEST_P(Handoff, ReleaseNReachesWaitersBeyondOneBatchInOrder) {
  watchdog dog("handoff release(n)", 60s);
  counting_semaphore<> s(0, admission::handoff);
  arrivals a;
  group g(GetParam());
  ASSERT_TRUE(a.queue_one_by_one(g, s, 40));
  s.release(37);
  ASSERT_TRUE(eventually([&] { return a.admitted() == 37; }));
  EXPECT_EQ(s.waiting(), 3);
  EXPECT_EQ(s.available(), 0);
  std::vector<int> first;
  {
    std::lock_guard lock(a.mu);
    first = a.order;
  }
  std::sort(first.begin(), first.end());
  EXPECT_EQ(first, iota(37));
  s.release(4);
  g.join();
  EXPECT_EQ(a.admitted(), 40);
  EXPECT_EQ(s.available(), 1);
}

// An OS thread polls its node before it parks; a permit handed meanwhile
// leaves an unpark permit behind. The next timed acquire must still wait out
// its whole timeout.
TEST_P(Handoff, HandOffWhileWaitingLeavesNoEarlyTimeout) {
  watchdog dog("handoff then timed wait", 60s);
  binary_semaphore s(0, admission::handoff);
  constexpr int kRounds = 20;
  std::atomic<int> ready{-1};  // the round whose acquire() the waiter is in
  group g(GetParam());
  g.spawn([&] {
    for (int i = 0; i < kRounds; ++i) {
      ready.store(i);
      s.acquire();
      const auto start = std::chrono::steady_clock::now();
      EXPECT_FALSE(s.try_acquire_for(2ms));
      EXPECT_GE(std::chrono::steady_clock::now() - start, 2ms);
    }
  });
  for (int i = 0; i < kRounds; ++i) {
    ASSERT_TRUE(eventually([&] { return ready.load() == i && s.waiting() == 1; }));
    s.release();
  }
  g.join();
  EXPECT_EQ(s.available(), 0);
}

// A thread waiter polls before it parks, and a release that finds it polling
// does not unpark it; the waiter says under the lock when it stops. Releases
// land at random points around the poll's end: a wake-up lost there would
// leave the waiter parked for good (the watchdog's failure).
TEST_P(Handoff, ReleasesAroundTheEndOfAPollLoseNoWakeUp) {
  watchdog dog("handoff poll end", 60s);
  counting_semaphore<> s(0, admission::handoff);
  constexpr int kRounds = 200;
  std::atomic<int> got{0};
  group g(GetParam());
  g.spawn([&] {
    for (int i = 0; i < kRounds; ++i) {
      s.acquire();
      got.fetch_add(1);
    }
  });
  std::mt19937 rng(7);
  const auto poll = std::chrono::nanoseconds(detail::handoff_semaphore::kPollNanos);
  for (int i = 0; i < kRounds; ++i) {
    ASSERT_TRUE(eventually([&] { return s.waiting() == 1; }));
    spin_for(poll * (rng() % 2001) / 1000);  // 0-2x the poll
    s.release();
    ASSERT_TRUE(eventually([&] { return got.load() == i + 1; }));
  }
  g.join();
  EXPECT_EQ(s.available(), 0);
}

// ---------------------------------------------------------------------------
// admission::faa: what the segment queue adds — strict FIFO, timed-out cells
// paid for by later releases, segments reclaimed.
class Faa : public ::testing::TestWithParam<exec_kind> {};
INSTANTIATE_TEST_SUITE_P(Envs, Faa, ::testing::ValuesIn(all_exec_kinds()),
                         [](const auto& p) { return to_string(p.param); });

TEST_P(Faa, AdmitsInArrivalOrder) {
  admits_in_arrival_order(GetParam(), admission::faa);
}

TEST_P(Faa, TimedOutCellsArePaidForByLaterReleases) {
  watchdog dog("faa cancelled cells", 60s);
  counting_semaphore<> s(0, admission::faa);
  std::atomic<int> got{0};
  // 40 participants each time out twice: 80 cancelled cells, the count at -80.
  run_all(GetParam(), 40, [&](int) {
    for (int k = 0; k < 2; ++k) {
      if (s.try_acquire_for(1ms)) got.fetch_add(1);
    }
  });
  EXPECT_EQ(got.load(), 0);
  EXPECT_EQ(s.available(), 0);
  EXPECT_EQ(s.waiting(), 0);
  // Five releases pay all 80 debts back and leave five permits, no more.
  s.release(3);
  s.release(2);
  EXPECT_EQ(s.available(), 5);
  for (int k = 0; k < 5; ++k) EXPECT_TRUE(s.try_acquire());
  EXPECT_FALSE(s.try_acquire());
  // And a waiter behind the cancelled cells is reached.
  group g(GetParam());
  std::atomic<bool> in{false};
  spawn_acquirer(g, s, in);
  ASSERT_TRUE(eventually([&] { return s.waiting() == 1; }));
  s.release();
  g.join();
  EXPECT_TRUE(in.load());
}

TEST_P(Faa, SegmentsBehindBothIndicesAreReclaimed) {
  watchdog dog("faa reclamation", 60s);
  detail::faa_semaphore s(1, std::numeric_limits<std::ptrdiff_t>::max());
  long shared = 0;
  // 4 x 5000 contended acquisitions pass ~600 segments' worth of cells.
  run_all(GetParam(), 4, [&](int) {
    for (int k = 0; k < 5000; ++k) {
      if (k % 7 == 0) {
        if (!s.try_acquire_until(std::chrono::steady_clock::now() + 50us)) continue;
      } else {
        s.acquire();
      }
      ++shared;
      s.release(1, std::numeric_limits<std::ptrdiff_t>::max());
    }
  });
  EXPECT_GT(shared, 4 * 4000);
  EXPECT_EQ(s.available(), 1);
  // What stays: the segments the two indices are in, and any a late
  // reclamation attempt found held.
  EXPECT_LE(s.live_segments(), 8u);
}

TEST_P(Faa, SegmentsOfTimedOutWaitersAreRemovedWithoutARelease) {
  watchdog dog("faa segment removal", 60s);
  detail::faa_semaphore s(0, std::numeric_limits<std::ptrdiff_t>::max());
  // 4 x 400 waits that all time out, and no release: 50 segments' worth of
  // cancelled cells between the two indices.
  run_all(GetParam(), 4, [&](int) {
    for (int k = 0; k < 400; ++k) {
      EXPECT_FALSE(s.try_acquire_until(std::chrono::steady_clock::now() + 5us));
    }
  });
  // Removed from the middle of the list and reused: what stays is the
  // segment each index is in and a few a late scan found held.
  EXPECT_LE(s.live_segments(), 8u);
  // The debts are all still paid, through the removed segments: 1,600
  // cancelled cells, then one permit free.
  s.release(1, std::numeric_limits<std::ptrdiff_t>::max());
  EXPECT_EQ(s.available(), 1);
  EXPECT_TRUE(s.try_acquire());
  // And a waiter after them is reached.
  std::atomic<bool> in{false};
  group g(GetParam());
  g.spawn([&] {
    s.acquire();
    in = true;
  });
  ASSERT_TRUE(eventually([&] { return s.waiting() == 1; }));
  s.release(1, std::numeric_limits<std::ptrdiff_t>::max());
  g.join();
  EXPECT_TRUE(in.load());
  EXPECT_LE(s.live_segments(), 8u);
}

}  // namespace
}  // namespace tessera::test
