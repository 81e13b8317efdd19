// Linearizability of the channels, the semaphore's admissions and the blocking
// stack under random concurrent histories (tests/linearizability.h): three
// participants, four random operations each, a few hundred histories per
// object and environment, bounded in time. Each history must have an order
// that real time allows and the sequential specification accepts.
//
// Rendezvous channels are left out: a send that waits for its receiver is not
// linearizable to any sequential specification (Koval & Elizarov, "Dual Data
// Structures"). The lock-free channel is checked with its try_ operations
// only: a timed receive that gives up in its cell while the sender of that
// cell is delayed between taking its index and leaving its value can miss a
// later value that was already sent (the cell order is the FIFO order), which
// a history counts against it; docs/design.md ("Channels") says so.
#include <gtest/gtest.h>
#include <tessera/blocking_stack.h>
#include <tessera/channel.h>
#include <tessera/latch.h>
#include <tessera/lockfree_channel.h>
#include <tessera/semaphore.h>

#include <chrono>
#include <deque>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "exec_env.h"
#include "linearizability.h"
#include "test_util.h"

namespace tessera::test {
namespace {

constexpr int kThreads = 3, kOpsPerThread = 4, kHistories = 300;
// Each object and environment gets kMinHistories histories whatever they take
// (a runtime per history is slow under the sanitizers), then more up to
// kHistories while the time budget lasts.
constexpr int kMinHistories = 20;
constexpr auto kBudget = stress_time(4s);

// ---- sequential specifications ------------------------------------------------
enum chan_op { kTrySend, kTryReceive, kSendFor, kReceiveFor };
struct queue_spec {
  std::deque<long> items;
  std::size_t capacity = 2;
  bool apply(const lin::op& o) {
    switch (o.kind) {
      case kTrySend:
      case kSendFor:
        if (items.size() == capacity) return o.result == 0;
        items.push_back(o.arg);
        return o.result == 1;
      default:
        if (items.empty()) return o.result == -1;
        if (o.result != items.front()) return false;
        items.pop_front();
        return true;
    }
  }
  bool operator<(const queue_spec& b) const { return items < b.items; }
};
const char* chan_name(int k) {
  return k == kTrySend      ? "try_send"
         : k == kTryReceive ? "try_receive"
         : k == kSendFor    ? "send_for"
                            : "receive_for";
}

enum sem_op { kTryAcquire, kTryAcquireFor, kRelease };
struct count_spec {
  long permits = 1;
  bool apply(const lin::op& o) {
    if (o.kind == kRelease) {
      ++permits;
      return true;
    }
    if (permits == 0) return o.result == 0;
    --permits;
    return o.result == 1;
  }
  bool operator<(const count_spec& b) const { return permits < b.permits; }
};
// The FAA semaphore is linearizable as a dual data structure (Koval &
// Elizarov, "Dual Data Structures"), not as a plain counter: an acquirer that
// found no permit is a waiter from its fetch-and-add on, and a release that
// finds waiters gives its permit to a cell, not to the counter. The waiter
// that takes that cell may be a later one that overtook a waiter delayed
// between its fetch-and-add and its cell, and that delayed waiter can then
// time out. So a try_acquire can fail while a permit sits reserved for a
// waiter, and the waiter it was released for can still time out if another
// waiter took it. The specification: a timed acquire either completes in one
// step or registers as a waiter; a release serves a waiter without a reserved
// permit first; a waiter completes by taking a reserved permit, or gives up
// only while another waiter is left to take every reserved permit.
struct dual_count_spec {
  long permits = 1, waiters = 0, reserved = 0;
  bool apply(const lin::op& o) {
    if (o.kind == kRelease) {
      ++(waiters > reserved ? reserved : permits);
      return true;
    }
    if (permits == 0) return o.result == 0;
    --permits;
    return o.result == 1;
  }
  bool request(const lin::op& o) {
    if (o.kind != kTryAcquireFor || permits != 0) return false;
    ++waiters;
    return true;
  }
  bool follow_up(const lin::op& o) {
    if (o.result == 1) {
      if (reserved == 0) return false;
      --reserved;
    } else if (reserved >= waiters) {
      return false;
    }
    --waiters;
    return true;
  }
  bool operator<(const dual_count_spec& b) const {
    return std::tie(permits, waiters, reserved) < std::tie(b.permits, b.waiters, b.reserved);
  }
};
const char* sem_name(int k) {
  return k == kTryAcquire ? "try_acquire" : k == kTryAcquireFor ? "try_acquire_for" : "release";
}

enum stack_op { kPush, kTryPop, kTryPopFor };
struct stack_spec {
  std::vector<long> items;
  bool apply(const lin::op& o) {
    if (o.kind == kPush) {
      items.push_back(o.arg);
      return true;
    }
    if (items.empty()) return o.result == -1;
    if (o.result != items.back()) return false;
    items.pop_back();
    return true;
  }
  bool operator<(const stack_spec& b) const { return items < b.items; }
};
const char* stack_name(int k) {
  return k == kPush ? "push" : k == kTryPop ? "try_pop" : "try_pop_for";
}

// ---- the harness --------------------------------------------------------------
/// Runs kMinHistories histories on fresh objects, then more until kHistories or
/// kBudget: `make()` makes an object, `step(obj, rec, thread, rng)` performs
/// one random operation.
template <class Make, class Step, class Spec, class Names>
void check_histories(exec_kind kind, Make make, Step step, const Spec& initial, Names names) {
  watchdog dog("linearizability", 120s);
  const auto stop = clock::now() + kBudget;
  for (int h = 0; another_round(h, kMinHistories, kHistories, stop); ++h) {
    auto obj = make();
    lin::recorder rec(kThreads);
    {
      group g(kind);
      latch start(kThreads);
      for (int t = 0; t < kThreads; ++t) {
        g.spawn([&, t] {
          std::mt19937 rng(static_cast<unsigned>(h * 7919 + t));
          start.arrive_and_wait();
          for (int k = 0; k < kOpsPerThread; ++k) step(*obj, rec, t, rng);
        });
      }
    }
    const auto history = rec.history();
    ASSERT_TRUE(lin::linearizable(history, initial))
        << "history " << h << " has no linearization:\n"
        << lin::describe(history, names);
  }
}

class Linearizable : public ::testing::TestWithParam<exec_kind> {};
INSTANTIATE_TEST_SUITE_P(Envs, Linearizable,
                         ::testing::Values(exec_kind::threads, exec_kind::fibers_2w,
                                           exec_kind::mixed),
                         [](const auto& p) { return to_string(p.param); });

template <class Ch>
void channel_step(Ch& ch, lin::recorder& rec, int t, std::mt19937& rng, bool timed) {
  const int kind = static_cast<int>(rng() % (timed ? 4 : 2));
  const long v = static_cast<long>(t * 100 + rng() % 100);
  rec.call(t, kind, v, [&]() -> long {
    switch (kind) {
      case kTrySend:
        return ch.try_send(static_cast<int>(v)) == channel_status::success ? 1 : 0;
      case kSendFor: {
        int x = static_cast<int>(v);
        return ch.send_for(std::move(x), 1ms) == channel_status::success ? 1 : 0;
      }
      case kTryReceive: {
        int out = 0;
        return ch.try_receive(out) == channel_status::success ? out : -1;
      }
      default: {
        int out = 0;
        return ch.receive_for(out, 1ms) == channel_status::success ? out : -1;
      }
    }
  });
}

TEST_P(Linearizable, BufferedChannel) {
  check_histories(
      GetParam(), [] { return std::make_unique<channel<int>>(2); },
      [](auto& ch, lin::recorder& rec, int t, std::mt19937& rng) {
        channel_step(ch, rec, t, rng, true);
      },
      queue_spec{}, chan_name);
}

TEST_P(Linearizable, BufferedLockfreeChannel) {
  check_histories(
      GetParam(), [] { return std::make_unique<lockfree_channel<int>>(2); },
      [](auto& ch, lin::recorder& rec, int t, std::mt19937& rng) {
        channel_step(ch, rec, t, rng, false);
      },
      queue_spec{}, chan_name);
}

template <admission A, class Spec>
void semaphore_histories(exec_kind kind, const Spec& spec) {
  check_histories(
      kind, [] { return std::make_unique<counting_semaphore<>>(1, A); },
      [](auto& s, lin::recorder& rec, int t, std::mt19937& rng) {
        const int op = static_cast<int>(rng() % 3);
        rec.call(t, op, 0, [&]() -> long {
          if (op == kRelease) {
            s.release();
            return 0;
          }
          return op == kTryAcquire ? s.try_acquire() : s.try_acquire_for(1ms);
        });
      },
      spec, sem_name);
}
TEST_P(Linearizable, SemaphoreFaa) {
  semaphore_histories<admission::faa>(GetParam(), dual_count_spec{});
}
TEST_P(Linearizable, SemaphoreFaaRestricted) {
  semaphore_histories<admission::faa_restricted>(GetParam(), dual_count_spec{});
}
TEST_P(Linearizable, SemaphoreFifo) {
  semaphore_histories<admission::fifo>(GetParam(), count_spec{});
}
TEST_P(Linearizable, SemaphoreHandoff) {
  semaphore_histories<admission::handoff>(GetParam(), count_spec{});
}
TEST_P(Linearizable, SemaphoreRestricted) {
  semaphore_histories<admission::restricted>(GetParam(), count_spec{});
}

TEST_P(Linearizable, BlockingStack) {
  check_histories(
      GetParam(), [] { return std::make_unique<blocking_stack<long>>(); },
      [](auto& st, lin::recorder& rec, int t, std::mt19937& rng) {
        const int op = static_cast<int>(rng() % 3);
        const long v = static_cast<long>(t * 100 + rng() % 100);
        rec.call(t, op, v, [&]() -> long {
          if (op == kPush) {
            st.push(v);
            return 0;
          }
          const auto got = op == kTryPop ? st.try_pop() : st.try_pop_for(1ms);
          return got ? *got : -1;
        });
      },
      stack_spec{}, stack_name);
}

// The checker itself must be able to say no.
TEST(LinearizabilityChecker, RejectsAHistoryNoOrderExplains) {
  // Sequential: push(1) returns, then try_pop returns 2 — impossible.
  std::vector<lin::op> h{{kPush, 1, 0, 0, 1, 0}, {kTryPop, 0, 2, 2, 3, 1}};
  EXPECT_FALSE(lin::linearizable(h, stack_spec{}));
  // Overlapping: a receive that returns the value of a send still in flight is fine.
  std::vector<lin::op> q{{kTrySend, 5, 1, 0, 3, 0}, {kTryReceive, 0, 5, 1, 2, 1}};
  EXPECT_TRUE(lin::linearizable(q, queue_spec{}));
  // FIFO: two sends in order, receives in the other order — rejected.
  std::vector<lin::op> f{{kTrySend, 1, 1, 0, 1, 0},
                         {kTrySend, 2, 1, 2, 3, 0},
                         {kTryReceive, 0, 2, 4, 5, 1},
                         {kTryReceive, 0, 1, 6, 7, 1}};
  EXPECT_FALSE(lin::linearizable(f, queue_spec{}));
  // Dual: a release completes while one timed acquire waits, a try_acquire
  // then fails (the permit is reserved), and the waiter times out with nobody
  // else to take the permit — rejected; with a later waiter that takes it —
  // accepted.
  std::vector<lin::op> d{{kTryAcquire, 0, 1, 0, 1, 0},
                         {kTryAcquireFor, 0, 0, 2, 9, 1},
                         {kRelease, 0, 0, 3, 4, 2},
                         {kTryAcquire, 0, 0, 5, 6, 2}};
  EXPECT_FALSE(lin::linearizable(d, dual_count_spec{}));
  d.push_back({kTryAcquireFor, 0, 1, 7, 8, 0});
  EXPECT_TRUE(lin::linearizable(d, dual_count_spec{}));
  EXPECT_FALSE(lin::linearizable(d, count_spec{}));
}

}  // namespace
}  // namespace tessera::test
