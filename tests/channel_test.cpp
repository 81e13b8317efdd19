// channel<T>: buffered and rendezvous, in every execution environment (threads,
// fibers on 1/2/4 workers, mixed). lockfree_channel_test.cpp runs the same
// tests on lockfree_channel<T> (the same contract).
#ifndef TEST_CHANNEL
#include <tessera/channel.h>
#define TEST_CHANNEL channel
#define ChannelIn ChannelIn
#define ChannelDeathTest ChannelDeathTest
#define kChannelName "tessera::channel"
#endif

#include <atomic>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "exec_env.h"
#include "test_util.h"

namespace tessera::test {
namespace {

using namespace std::chrono_literals;

template <class T>
using channel = TEST_CHANNEL<T>;

// (environment, capacity): capacity 0 is the rendezvous channel.
using channel_param = std::tuple<exec_kind, std::size_t>;

class ChannelIn : public ::testing::TestWithParam<channel_param> {
 protected:
  exec_kind kind() const { return std::get<0>(GetParam()); }
  std::size_t capacity() const { return std::get<1>(GetParam()); }
};
INSTANTIATE_TEST_SUITE_P(Envs, ChannelIn,
                         ::testing::Combine(::testing::ValuesIn(all_exec_kinds()),
                                            ::testing::Values(std::size_t{0}, std::size_t{1},
                                                              std::size_t{8})),
                         [](const auto& p) {
                           return to_string(std::get<0>(p.param)) + "_capacity" +
                                  std::to_string(std::get<1>(p.param));
                         });

// Several producers and consumers: every item arrives exactly once, and each
// consumer sees every producer's items in the order they were sent.
TEST_P(ChannelIn, EveryItemArrivesOnceAndInEachSendersOrder) {
  watchdog dog("channel mpmc", 90s);
  channel<int> ch(capacity());
  constexpr int kProducers = 3, kConsumers = 3, kItems = 2000;
  std::vector<std::atomic<int>> seen(kProducers * kItems);
  std::atomic<int> producers_left{kProducers};
  std::atomic<int> order_violations{0};
  run_all(kind(), kProducers + kConsumers, [&](int id) {
    if (id < kProducers) {
      for (int i = 0; i < kItems; ++i) ASSERT_TRUE(ch.send(id * kItems + i));
      if (producers_left.fetch_sub(1) == 1) ch.close();
      return;
    }
    std::vector<int> last(kProducers, -1);
    for (int item : ch) {  // until closed and drained
      const int from = item / kItems, index = item % kItems;
      if (index <= last[from]) order_violations.fetch_add(1);
      last[from] = index;
      seen[item].fetch_add(1);
    }
  });
  for (auto& s : seen) ASSERT_EQ(s.load(), 1);
  EXPECT_EQ(order_violations.load(), 0);
  EXPECT_EQ(ch.size(), 0u);
}

// Arrivals sequenced: receiver i parks only after receiver i-1 has; sends then
// serve them oldest first. Then the same for senders (a full buffer, or
// capacity 0), whose values arrive in the order they parked.
TEST_P(ChannelIn, ParkedReceiversAndSendersAreServedOldestFirst) {
  watchdog dog("channel fifo", 60s);
  channel<int> ch(capacity());
  constexpr int kWaiters = 6;
  std::vector<int> got(kWaiters, -1);
  {
    group g(kind());
    for (int i = 0; i < kWaiters; ++i) {
      g.spawn([&, i] { got[i] = ch.receive().value_or(-2); });
      ASSERT_TRUE(eventually([&] { return ch.waiting_receivers() == std::size_t(i) + 1; }));
    }
    for (int i = 0; i < kWaiters; ++i) ASSERT_TRUE(ch.send(100 + i));
    g.join();
  }
  for (int i = 0; i < kWaiters; ++i) EXPECT_EQ(got[i], 100 + i) << "receiver " << i;

  for (std::size_t i = 0; i < capacity(); ++i) ASSERT_TRUE(ch.send(-1));  // fill the buffer
  group g(kind());
  for (int i = 0; i < kWaiters; ++i) {
    g.spawn([&, i] { EXPECT_TRUE(ch.send(i)); });
    ASSERT_TRUE(eventually([&] { return ch.waiting_senders() == std::size_t(i) + 1; }));
  }
  for (std::size_t i = 0; i < capacity(); ++i) EXPECT_EQ(ch.receive(), -1);
  for (int i = 0; i < kWaiters; ++i) EXPECT_EQ(ch.receive(), i);
  g.join();
  EXPECT_EQ(ch.size(), 0u);
}

// A send returns once its value is buffered — or, with capacity 0, once a
// receiver has taken it; until then the sender stays parked.
TEST_P(ChannelIn, SendParksExactlyWhileTheBufferIsFull) {
  watchdog dog("channel send parks", 60s);
  channel<int> ch(capacity());
  for (std::size_t i = 0; i < capacity(); ++i) {
    EXPECT_EQ(ch.try_send(int(i)), channel_status::success);  // room: never parks
  }
  EXPECT_EQ(ch.try_send(99), channel_status::full);
  std::atomic<bool> sent{false};
  group g(kind());
  g.spawn([&] {
    EXPECT_TRUE(ch.send(7));
    sent = true;
  });
  ASSERT_TRUE(eventually([&] { return ch.waiting_senders() == 1; }));
  EXPECT_FALSE(sent.load());
  for (std::size_t i = 0; i < capacity(); ++i) EXPECT_EQ(ch.receive(), int(i));
  EXPECT_EQ(ch.receive(), 7);
  g.join();
  EXPECT_TRUE(sent.load());
}

// try_receive takes what is there and never waits; with capacity 0 it takes
// only from a parked sender, and try_send succeeds only into a parked receiver.
TEST_P(ChannelIn, TryVariantsNeverWait) {
  channel<int> ch(capacity());
  int out = -1;
  EXPECT_EQ(ch.try_receive(out), channel_status::empty);
  EXPECT_EQ(out, -1);
  group g(kind());
  if (capacity() == 0) {
    EXPECT_EQ(ch.try_send(1), channel_status::full);
    g.spawn([&] { EXPECT_EQ(ch.receive(), 2); });
    ASSERT_TRUE(eventually([&] { return ch.waiting_receivers() == 1; }));
    EXPECT_EQ(ch.try_send(2), channel_status::success);
    g.spawn([&] { EXPECT_TRUE(ch.send(3)); });
    ASSERT_TRUE(eventually([&] { return ch.waiting_senders() == 1; }));
    EXPECT_EQ(ch.try_receive(out), channel_status::success);
    EXPECT_EQ(out, 3);
  } else {
    EXPECT_EQ(ch.try_send(5), channel_status::success);
    EXPECT_EQ(ch.try_receive(out), channel_status::success);
    EXPECT_EQ(out, 5);
  }
  g.join();
  EXPECT_EQ(ch.try_receive(out), channel_status::empty);
}

// close(): buffered values stay receivable, then receives report closed;
// parked senders fail with their values untouched, parked receivers wake empty;
// later sends fail and keep their values; close is idempotent.
TEST_P(ChannelIn, CloseDrainsTheBufferAndFailsEveryWaiterLosingNothing) {
  watchdog dog("channel close", 60s);
  channel<std::unique_ptr<int>> ch(capacity());
  for (std::size_t i = 0; i < capacity(); ++i) ASSERT_TRUE(ch.send(std::make_unique<int>(int(i))));
  constexpr int kWaiters = 3;
  std::atomic<int> kept{0};
  {
    group g(kind());
    for (int i = 0; i < kWaiters; ++i) {
      g.spawn([&, i] {
        auto v = std::make_unique<int>(100 + i);
        EXPECT_FALSE(ch.send(std::move(v)));
        if (v != nullptr && *v == 100 + i) kept.fetch_add(1);  // untouched
      });
    }
    ASSERT_TRUE(eventually([&] { return ch.waiting_senders() == kWaiters; }));
    ch.close();
    g.join();
  }
  EXPECT_EQ(kept.load(), kWaiters);
  EXPECT_TRUE(ch.is_closed());
  auto late = std::make_unique<int>(7);
  EXPECT_FALSE(ch.send(std::move(late)));
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(ch.try_send(std::move(late)), channel_status::closed);
  ASSERT_NE(late, nullptr);
  for (std::size_t i = 0; i < capacity(); ++i) {
    auto v = ch.receive();
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(**v, int(i));
  }
  EXPECT_EQ(ch.receive(), std::nullopt);
  std::unique_ptr<int> out;
  EXPECT_EQ(ch.try_receive(out), channel_status::closed);
  EXPECT_EQ(ch.receive_for(out, 1s), channel_status::closed);  // at once, not after 1 s

  channel<int> empty(capacity());
  group g(kind());
  for (int i = 0; i < kWaiters; ++i) {
    g.spawn([&] { EXPECT_EQ(empty.receive(), std::nullopt); });
  }
  ASSERT_TRUE(eventually([&] { return empty.waiting_receivers() == kWaiters; }));
  empty.close();
  empty.close();  // idempotent
  g.join();
}

// Timed sends and receives time out no earlier than their deadlines, keep the
// value of a send that timed out, and still succeed when served in time.
TEST_P(ChannelIn, TimedCallsTimeOutNeverEarlyAndKeepTheirValues) {
  watchdog dog("channel timeouts", 60s);
  channel<std::unique_ptr<int>> ch(capacity());
  run_all(kind(), 1, [&](int) {
    std::unique_ptr<int> out;
    for (auto d : {0ms, 1ms, 20ms}) {
      const auto start = std::chrono::steady_clock::now();
      EXPECT_EQ(ch.receive_for(out, d), channel_status::timeout);
      EXPECT_GE(std::chrono::steady_clock::now() - start, d);
      EXPECT_EQ(out, nullptr);
    }
    for (std::size_t i = 0; i < capacity(); ++i) {
      EXPECT_EQ(ch.send_for(std::make_unique<int>(1), 0ms), channel_status::success);
    }
    for (auto d : {0ms, 1ms, 20ms}) {
      auto v = std::make_unique<int>(42);
      const auto start = std::chrono::steady_clock::now();
      EXPECT_EQ(ch.send_until(std::move(v), start + d), channel_status::timeout);
      EXPECT_GE(std::chrono::steady_clock::now() - start, d);
      ASSERT_NE(v, nullptr);
      EXPECT_EQ(*v, 42);
    }
  });
  // Served before the deadline: a long timeout returns success at once.
  group g(kind());
  g.spawn([&] {
    std::unique_ptr<int> out;
    for (std::size_t i = 0; i < capacity(); ++i)
      ASSERT_EQ(ch.receive_for(out, 10s), channel_status::success);
    ASSERT_EQ(ch.receive_for(out, 10s), channel_status::success);
    EXPECT_EQ(*out, 5);
  });
  EXPECT_EQ(ch.send_for(std::make_unique<int>(5), 10s), channel_status::success);
  g.join();
}

// A receiver served just as it starts waiting (an OS thread is then still
// polling its node; a sender that unparks it anyway leaves a permit behind)
// still waits out the whole of its next timed receive: a leftover permit is a
// spurious wake-up, and the wait re-checks and parks again.
TEST_P(ChannelIn, HandOffWhileWaitingLeavesNoEarlyTimeout) {
  watchdog dog("channel hand-off then timed wait", 60s);
  channel<int> ch(capacity());
  constexpr int kRounds = 20;
  std::atomic<int> ready{-1};  // the round whose receive() the receiver is in
  group g(kind());
  g.spawn([&] {
    for (int i = 0; i < kRounds; ++i) {
      ready.store(i);
      ASSERT_EQ(ch.receive(), std::optional<int>(i));
      int out = -1;
      const auto start = std::chrono::steady_clock::now();
      EXPECT_EQ(ch.receive_for(out, 2ms), channel_status::timeout);
      EXPECT_GE(std::chrono::steady_clock::now() - start, 2ms);
      EXPECT_EQ(out, -1);
    }
  });
  for (int i = 0; i < kRounds; ++i) {
    ASSERT_TRUE(eventually([&] { return ready.load() == i && ch.waiting_receivers() == 1; }));
    ASSERT_TRUE(ch.send(i));
  }
  g.join();
}

// A sender that finds an OS thread still polling its node does not unpark it;
// the receiver says under the channel's lock when it stops polling. Sends land
// at random points around the end of the poll: a wake-up lost there would
// leave the receiver parked for good.
TEST_P(ChannelIn, SendsAroundTheEndOfAPollLoseNoWakeUp) {
  watchdog dog("channel poll end", 60s);
  channel<int> ch(capacity());
  constexpr int kRounds = 200;
  std::atomic<int> got{0};
  group g(kind());
  g.spawn([&] {
    for (int i = 0; i < kRounds; ++i) {
      ASSERT_EQ(ch.receive(), std::optional<int>(i));
      got.fetch_add(1);
    }
  });
  std::mt19937 rng(11);
  const auto poll = std::chrono::nanoseconds(detail::kThreadPollNanos);
  for (int i = 0; i < kRounds; ++i) {
    ASSERT_TRUE(eventually([&] { return ch.waiting_receivers() == 1; }));
    spin_for(poll * (rng() % 2001) / 1000);  // 0-2x the poll
    ASSERT_TRUE(ch.send(i));
    ASSERT_TRUE(eventually([&] { return got.load() == i + 1; }));
  }
  g.join();
}

// close() takes the parked callers one by one. One that an OS thread still
// polls is taken without an unpark; close() must go on to the ones behind it.
// Receivers that take items in a tight loop re-queue at once, so when the last
// producer closes the channel a thread among them is often polling at the
// front with others parked behind: many short rounds of that. A close() that
// stopped at the polling node would leave the others parked for good (the
// runtime's deadlock report, or the watchdog).
TEST_P(ChannelIn, CloseReachesReceiversBehindOneStillPolling) {
  watchdog dog("channel close behind a poll", 60s);
  const auto until = std::chrono::steady_clock::now() + stress_time(5s);
  for (int round = 0; round < stress_rounds(100) && std::chrono::steady_clock::now() < until;
       ++round) {
    channel<int> ch(capacity());
    std::atomic<int> closed_seen{0}, producers_left{2};
    run_all(kind(), 6, [&](int id) {
      if (id < 2) {
        for (int i = 0; i < 50; ++i) ASSERT_TRUE(ch.send(i));
        if (producers_left.fetch_sub(1) == 1) ch.close();
        return;
      }
      while (ch.receive()) {
      }
      closed_seen.fetch_add(1);
    });
    ASSERT_EQ(closed_seen.load(), 4) << "round " << round;
  }
}

// Senders and receivers with tiny timeouts race each other: whatever the
// timeouts do, every value sent with success is received exactly once.
TEST_P(ChannelIn, TimedStressLosesAndDuplicatesNothing) {
  watchdog dog("channel timed stress", 90s);
  channel<int> ch(capacity());
  constexpr int kPairs = 3, kItems = 1500;
  std::vector<std::atomic<int>> received(kPairs * kItems);
  std::atomic<int> sent_ok{0}, got{0}, senders_left{kPairs};
  run_all(kind(), 2 * kPairs, [&](int id) {
    if (id < kPairs) {
      for (int i = 0; i < kItems; ++i) {
        const auto d = std::chrono::microseconds((i * 7 + id) % 50);
        if (ch.send_for(id * kItems + i, d) == channel_status::success) sent_ok.fetch_add(1);
      }
      if (senders_left.fetch_sub(1) == 1) ch.close();
      return;
    }
    for (int i = 0;; ++i) {
      int v = -1;
      const auto s = ch.receive_for(v, std::chrono::microseconds((i * 13 + id) % 50));
      if (s == channel_status::closed) return;
      if (s == channel_status::success) {
        received[v].fetch_add(1);
        got.fetch_add(1);
      }
    }
  });
  for (auto& r : received) ASSERT_LE(r.load(), 1);
  EXPECT_EQ(got.load(), sent_ok.load());
  EXPECT_GT(sent_ok.load(), 0);
}

// close() lands while every kind of call is in flight (send, try_send,
// send_for, receive, try_receive, receive_for) on values that own memory:
// each value is received exactly once or is back with its sender, whose
// failed call left it untouched. The close comes after a different number
// of sends each round.
TEST_P(ChannelIn, CloseRacingEveryKindOfCallLosesNothing) {
  watchdog dog("channel close racing every call", 90s);
  constexpr int kSenders = 3, kReceivers = 3, kEach = 60;
  const auto until = clock::now() + stress_time(3s);
  std::mt19937 rng(static_cast<unsigned>(capacity()) * 31 + static_cast<unsigned>(kind()));
  int rounds = 0;
  for (; another_round(rounds, 3, stress_rounds(30), until); ++rounds) {
    channel<std::unique_ptr<int>> ch(capacity());
    std::vector<std::atomic<int>> received(kSenders * kEach), kept(kSenders * kEach);
    std::atomic<int> attempts{0};
    const int close_after = static_cast<int>(rng() % (kSenders * kEach));
    run_all(kind(), kSenders + kReceivers + 1, [&](int id) {
      if (id == kSenders + kReceivers) {  // the closer
        EXPECT_TRUE(eventually([&] { return attempts.load() >= close_after; }));
        ch.close();
        return;
      }
      if (id < kSenders) {
        for (int i = 0; i < kEach; ++i) {
          const int v = id * kEach + i;
          auto p = std::make_unique<int>(v);
          channel_status st = channel_status::closed;
          switch ((i + id) % 3) {
            case 0:
              st = ch.send(std::move(p)) ? channel_status::success : channel_status::closed;
              break;
            case 1:
              st = ch.try_send(std::move(p));
              break;
            default:
              st = ch.send_for(std::move(p), 20us);
              break;
          }
          attempts.fetch_add(1);
          if (st == channel_status::success) continue;
          ASSERT_NE(p, nullptr) << "a failed send lost value " << v;
          ASSERT_EQ(*p, v);
          kept[v].fetch_add(1);
        }
        return;
      }
      for (int i = 0;; ++i) {
        std::unique_ptr<int> out;
        channel_status st;
        switch ((i + id) % 3) {
          case 0: {
            auto got = ch.receive();
            st = got ? channel_status::success : channel_status::closed;
            if (got) out = std::move(*got);
            break;
          }
          case 1:
            st = ch.try_receive(out);
            break;
          default:
            st = ch.receive_for(out, 20us);
            break;
        }
        if (st == channel_status::closed) return;
        if (st == channel_status::success) {
          ASSERT_NE(out, nullptr);
          received[*out].fetch_add(1);
        }
      }
    });
    for (int v = 0; v < kSenders * kEach; ++v) {
      ASSERT_EQ(received[v].load() + kept[v].load(), 1)
          << "round " << rounds << ", value " << v << ": received " << received[v].load()
          << " times, kept by its sender " << kept[v].load() << " times";
    }
  }
}

#if TESSERA_CHECKS  // the check exists in debug builds only (as the mutex's)
TEST(ChannelDeathTest, DestroyedWithWaitersAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto* ch = new channel<int>(0);
        std::thread t([ch] { (void)ch->receive(); });
        while (ch->waiting_receivers() == 0) std::this_thread::yield();
        delete ch;
      },
      kChannelName " destroyed while senders or receivers wait on it");
}
#endif

}  // namespace
}  // namespace tessera::test
