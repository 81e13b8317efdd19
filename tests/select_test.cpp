// select() over channel<T> and over lockfree_channel<T>, in every execution
// environment: a ready case is carried out at once and the others untouched; a
// waiting select is claimed by exactly one counterpart; two selects meet each
// other; close, default and deadline; fairness among ready cases; cases a
// select cannot serve are refused; and a stress of selects racing each
// other, plain sends, receives and timeouts, after which every item was
// received exactly once.
#include <gtest/gtest.h>
#include <tessera/latch.h>
#include <tessera/select.h>

#include <array>
#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "exec_env.h"
#include "test_util.h"

namespace tessera::test {
namespace {

/// The two channel kinds a select works over.
struct spin_lock_kind {
  template <class T>
  using of = channel<T>;
};
struct lock_free_kind {
  template <class T>
  using of = lockfree_channel<T>;
};

template <class Kind>
class Select : public ::testing::Test {};
struct kind_names {
  template <class Kind>
  static std::string GetName(int) {
    return std::is_same_v<Kind, lock_free_kind> ? "lockfree_channel" : "channel";
  }
};
using kinds = ::testing::Types<spin_lock_kind, lock_free_kind>;
TYPED_TEST_SUITE(Select, kinds, kind_names);

/// Environment, capacity, and which channel (true: lockfree_channel).
class SelectIn : public ::testing::TestWithParam<std::tuple<exec_kind, std::size_t, bool>> {
 protected:
  exec_kind kind() const { return std::get<0>(GetParam()); }
  std::size_t capacity() const { return std::get<1>(GetParam()); }
  /// Runs `body.template operator()<Kind>()` for this parameter's channel kind.
  template <class Body>
  void over_channel(Body&& body) const {
    if (std::get<2>(GetParam())) {
      body.template operator()<lock_free_kind>();
    } else {
      body.template operator()<spin_lock_kind>();
    }
  }
};
INSTANTIATE_TEST_SUITE_P(Envs, SelectIn,
                         ::testing::Combine(::testing::ValuesIn(all_exec_kinds()),
                                            ::testing::Values(std::size_t{0}, std::size_t{4}),
                                            ::testing::Bool()),
                         [](const auto& p) {
                           return to_string(std::get<0>(p.param)) + "_capacity" +
                                  std::to_string(std::get<1>(p.param)) +
                                  (std::get<2>(p.param) ? "_lockfree" : "_spinlock");
                         });

TYPED_TEST(Select, AReadyCaseIsCarriedOutAndTheOthersLeftAlone) {
    typename TypeParam::template of<int> a(1), b(1);
  typename TypeParam::template of<std::string> c(1);
  ASSERT_TRUE(b.send(7));
  int x = -1, y = -1;
  std::string msg = "kept";
  std::string full = "fill";
  ASSERT_TRUE(c.send(std::move(full)));  // c is full: its send case is not ready
  const auto r = select(recv_case(a, x), recv_case(b, y), send_case(c, msg));
  EXPECT_EQ(r.index, 1u);
  EXPECT_EQ(r.status, channel_status::success);
  EXPECT_EQ(y, 7);
  EXPECT_EQ(x, -1);
  EXPECT_EQ(msg, "kept");
  EXPECT_EQ(c.size(), 1u);
}

TYPED_TEST(Select, DefaultCaseAndDisabledCases) {
  typename TypeParam::template of<int> a(0), b(1);
  int x = 0;
  std::vector<select_case> cases;
  cases.push_back(recv_case(a, x));
  cases.push_back(recv_case(b, x));
  EXPECT_EQ(try_select(cases).index, select_result::kNone);
  EXPECT_EQ(try_select(cases).status, channel_status::empty);
  ASSERT_TRUE(b.send(3));
  cases[1].disable();
  EXPECT_EQ(try_select(cases).index, select_result::kNone);  // b is left out
  cases[1].enable();
  const auto r = try_select(cases);
  EXPECT_EQ(r.index, 1u);
  EXPECT_EQ(x, 3);
  cases[0].disable();
  cases[1].disable();
  EXPECT_THROW((void)select(cases), std::invalid_argument);
  EXPECT_EQ(select_for(cases, 5ms).status, channel_status::timeout);
}

TYPED_TEST(Select, ClosedChannelsAreReportedPerCase) {
  typename TypeParam::template of<int> a(2), b(0);
  ASSERT_TRUE(a.send(1));
  a.close();
  int x = 0, v = 9;
  // A closed channel's buffered value is still received; then `closed`.
  auto r = select(recv_case(a, x));
  EXPECT_EQ(r.status, channel_status::success);
  EXPECT_EQ(x, 1);
  r = select(recv_case(a, x));
  EXPECT_EQ(r.status, channel_status::closed);
  b.close();
  r = select(send_case(b, v));
  EXPECT_EQ(r.status, channel_status::closed);
  EXPECT_EQ(v, 9);
}

TYPED_TEST(Select, AmongReadyCasesTheChoiceIsFair) {
  using chan = typename TypeParam::template of<int>;
  constexpr int kCases = 4, kRounds = 4000;
  std::vector<std::unique_ptr<chan>> chs;
  std::vector<select_case> cases;
  int x = 0;
  for (int i = 0; i < kCases; ++i) {
    chs.push_back(std::make_unique<chan>(1));
    cases.push_back(recv_case(*chs.back(), x));
  }
  std::array<int, kCases> chosen{};
  for (int k = 0; k < kRounds; ++k) {
    for (auto& c : chs) {
      if (c->size() == 0) {
        ASSERT_TRUE(c->send(1));
      }
    }
    ++chosen[select(cases).index];
  }
  // Uniform: each about 1000 of 4000; 800..1200 is more than 7 sigma wide.
  for (int i = 0; i < kCases; ++i) {
    EXPECT_GT(chosen[i], 800) << "case " << i;
    EXPECT_LT(chosen[i], 1200) << "case " << i;
  }
}

TEST(SelectRefuses, MixedChannelKindsAndBothWaysOnOneLockFreeChannel) {
  channel<int> a(1);
  lockfree_channel<int> b(1), c(0);
  int x = 0, y = 1;
  try {
    (void)select(recv_case(a, x), recv_case(b, x));
    ADD_FAILURE() << "a mixed select was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("mixed"), std::string::npos) << e.what();
  }
  try {
    (void)select(recv_case(c, x), send_case(c, y));
    ADD_FAILURE() << "a select both sending to and receiving from one lockfree_channel";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("one lockfree_channel"), std::string::npos) << e.what();
  }
  EXPECT_EQ(y, 1);
  // Both ways on one channel<T> is Go's rule, and served.
  channel<int> d(1);
  const auto r = select(recv_case(d, x), send_case(d, y));
  EXPECT_EQ(r.index, 1u);
  EXPECT_EQ(d.size(), 1u);
}

// A select waiting on three channels; three senders come at once, one per
// channel: exactly one value is taken by the select, the others stay sendable
// (buffered, or still waiting for a receiver), and nothing is lost.
template <class Kind>
void claimed_by_one(exec_kind kind, std::size_t capacity) {
  using chan = typename Kind::template of<int>;
  watchdog dog("select claim", 60s);
  for (int round = 0; round < stress_rounds(50); ++round) {
    std::array<chan, 3> chs{chan(capacity), chan(capacity), chan(capacity)};
    int got = -1;
    select_result r;
    std::atomic<bool> selected{false};
    group g(kind);
    latch parked(1);
    g.spawn([&] {
      std::vector<select_case> cases;
      for (auto& c : chs) cases.push_back(recv_case(c, got));
      parked.count_down();
      r = select(cases);
      selected = true;
    });
    parked.wait();
    ASSERT_TRUE(eventually([&] {
      return chs[0].waiting_receivers() == 1 && chs[1].waiting_receivers() == 1 &&
             chs[2].waiting_receivers() == 1;
    }));
    for (int i = 0; i < 3; ++i) {
      g.spawn([&, i] { EXPECT_TRUE(chs[i].send(100 + i)); });
    }
    ASSERT_TRUE(eventually([&] { return selected.load(); }));
    // The other two values are still there (buffered, or their senders
    // parked): receive them, so that every sender finishes.
    for (std::size_t i = 0; i < 3; ++i) {
      if (i == r.index) continue;
      EXPECT_EQ(chs[i].receive(), std::optional<int>(100 + static_cast<int>(i)));
    }
    g.join();
    ASSERT_LT(r.index, 3u);
    EXPECT_EQ(r.status, channel_status::success);
    EXPECT_EQ(got, 100 + static_cast<int>(r.index));
    int left = 0;
    EXPECT_EQ(chs[r.index].try_receive(left), channel_status::empty);
    for (auto& c : chs) EXPECT_EQ(c.waiting_receivers(), 0u);
  }
}
TEST_P(SelectIn, AWaitingSelectIsClaimedByExactlyOneCounterpart) {
  over_channel([&]<class Kind>() { claimed_by_one<Kind>(kind(), capacity()); });
}

template <class Kind>
void deadline_passes(exec_kind kind, std::size_t capacity) {
  watchdog dog("select deadline", 60s);
  typename Kind::template of<int> a(capacity), b(capacity);
  for (std::size_t i = 0; i < capacity; ++i) ASSERT_TRUE(b.send(0));  // b full
  run_all(kind, 3, [&](int) {
    std::vector<select_case> cases;
    int mine_x = 0, mine_v = 5;
    cases.push_back(recv_case(a, mine_x));
    cases.push_back(send_case(b, mine_v));
    const auto t0 = clock::now();
    const auto r = select_for(cases, 20ms);
    EXPECT_GE(clock::now() - t0, 20ms);
    EXPECT_EQ(r.status, channel_status::timeout);
    EXPECT_EQ(r.index, select_result::kNone);
    EXPECT_EQ(mine_v, 5);
  });
  EXPECT_EQ(a.waiting_receivers(), 0u);
  EXPECT_EQ(b.waiting_senders(), 0u);
}
TEST_P(SelectIn, DeadlinePassesNeverEarlyAndTakesBackEveryNode) {
  over_channel([&]<class Kind>() { deadline_passes<Kind>(kind(), capacity()); });
}

// A select served just as it starts waiting (an OS thread is then still
// polling its claim, so the counterpart's unpark leaves a permit behind)
// still waits out the whole of its next timed select.
template <class Kind>
void hand_off_while_waiting(exec_kind kind, std::size_t capacity) {
  watchdog dog("select hand-off then timed wait", 60s);
  typename Kind::template of<int> a(capacity), b(capacity);
  constexpr int kRounds = 20;
  std::atomic<int> ready{-1};  // the round whose select the receiver is in
  group g(kind);
  g.spawn([&] {
    for (int i = 0; i < kRounds; ++i) {
      int x = -1, y = -1;
      std::vector<select_case> cases;
      cases.push_back(recv_case(a, x));
      cases.push_back(recv_case(b, y));
      ready.store(i);
      const auto got = select(cases);
      ASSERT_EQ(got.status, channel_status::success);
      EXPECT_EQ(got.index == 0 ? x : y, i);
      const auto t0 = clock::now();
      const auto r = select_for(cases, 2ms);
      EXPECT_GE(clock::now() - t0, 2ms);
      EXPECT_EQ(r.status, channel_status::timeout);
    }
  });
  for (int i = 0; i < kRounds; ++i) {
    auto& ch = i % 2 == 0 ? a : b;
    ASSERT_TRUE(eventually([&] { return ready.load() == i && ch.waiting_receivers() == 1; }));
    ASSERT_TRUE(ch.send(i));
  }
  g.join();
}
TEST_P(SelectIn, HandOffWhileWaitingLeavesNoEarlyTimeout) {
  over_channel([&]<class Kind>() { hand_off_while_waiting<Kind>(kind(), capacity()); });
}

// Selects over two channels (receive from either, or send a reply on the
// other), against plain senders and receivers, some timed: every item is
// received exactly once, and nothing is left parked.
template <class Kind>
void stress_every_item_once(exec_kind kind, std::size_t capacity) {
  using chan = typename Kind::template of<int>;
  watchdog dog("select stress", 120s);
  constexpr int kSenders = 2, kItems = 1500;
  chan in1(capacity), in2(capacity), out(capacity);
  std::vector<std::atomic<int>> seen(kSenders * kItems);
  std::atomic<int> forwarded{0}, senders_left{kSenders};
  group g(kind);
  for (int s = 0; s < kSenders; ++s) {
    g.spawn([&, s] {
      for (int i = 0; i < kItems; ++i) {
        chan& ch = (i % 2 == 0) ? in1 : in2;
        int v = s * kItems + i;
        while (ch.send_for(std::move(v), 1ms) == channel_status::timeout) {
        }
      }
      if (senders_left.fetch_sub(1) == 1) {
        in1.close();
        in2.close();
      }
    });
  }
  // Two selecting forwarders: receive from in1 or in2, send to out.
  for (int f = 0; f < 2; ++f) {
    g.spawn([&] {
      int v = 0;
      std::vector<select_case> cases;
      cases.push_back(recv_case(in1, v));
      cases.push_back(recv_case(in2, v));
      int open = 2;
      while (open > 0) {
        const auto r = select_for(cases, 2ms);
        if (r.status == channel_status::timeout) continue;
        if (r.status == channel_status::closed) {
          cases[r.index].disable();
          --open;
          continue;
        }
        int fwd = v;
        std::vector<select_case> send_one;
        send_one.push_back(send_case(out, fwd));
        while (select_for(send_one, 1ms).status == channel_status::timeout) {
        }
        if (forwarded.fetch_add(1) + 1 == kSenders * kItems) out.close();
      }
    });
  }
  std::atomic<int> received{0};
  for (int c = 0; c < 2; ++c) {
    g.spawn([&] {
      for (int v : out) {
        seen[v].fetch_add(1);
        ++received;
      }
    });
  }
  g.join();
  EXPECT_EQ(received.load(), kSenders * kItems);
  for (std::size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i].load(), 1) << "item " << i;
  EXPECT_EQ(in1.waiting_receivers() + in2.waiting_receivers() + out.waiting_senders(), 0u);
}
TEST_P(SelectIn, StressEveryItemOnceWithTimeoutsMixedIn) {
  over_channel([&]<class Kind>() { stress_every_item_once<Kind>(kind(), capacity()); });
}

// Selects on both sides of the same channels: senders select over two
// channels to send each item on either, receivers select over both to take
// it, all with deadlines short enough to expire often, while the selects
// meet each other while registering and while waiting. Every item arrives
// exactly once, and nothing is left waiting.
template <class Kind>
void selects_meet_selects(exec_kind kind, std::size_t capacity) {
  using chan = typename Kind::template of<int>;
  watchdog dog("selects meet selects", 120s);
  constexpr int kSenders = 2, kReceivers = 2, kItems = 1000;
  chan a(capacity), b(capacity);
  std::vector<std::atomic<int>> seen(kSenders * kItems);
  std::atomic<int> received{0}, timeouts{0};
  group g(kind);
  for (int s = 0; s < kSenders; ++s) {
    g.spawn([&, s] {
      for (int i = 0; i < kItems; ++i) {
        int v = s * kItems + i, w = v;
        std::vector<select_case> cases;
        cases.push_back(send_case(a, v));
        cases.push_back(send_case(b, w));
        for (;;) {
          const auto r = select_for(cases, 200us);
          if (r.status == channel_status::success) break;
          ASSERT_EQ(r.status, channel_status::timeout);
          ASSERT_EQ(v, s * kItems + i) << "a send case that timed out moved its value";
          timeouts.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  }
  for (int c = 0; c < kReceivers; ++c) {
    g.spawn([&] {
      int x = -1, y = -1;
      std::vector<select_case> cases;
      cases.push_back(recv_case(a, x));
      cases.push_back(recv_case(b, y));
      while (received.load() < kSenders * kItems) {
        const auto r = select_for(cases, 1ms);
        if (r.status == channel_status::timeout) continue;
        ASSERT_EQ(r.status, channel_status::success);
        const int v = r.index == 0 ? x : y;
        ASSERT_GE(v, 0);
        ASSERT_LT(v, kSenders * kItems);
        seen[v].fetch_add(1);
        received.fetch_add(1);
      }
    });
  }
  g.join();
  EXPECT_EQ(received.load(), kSenders * kItems);
  for (std::size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i].load(), 1) << "item " << i;
  EXPECT_EQ(a.waiting_senders() + a.waiting_receivers() + b.waiting_senders() +
                b.waiting_receivers(),
            0u);
  int left = 0;
  EXPECT_EQ(a.try_receive(left), channel_status::empty);
  EXPECT_EQ(b.try_receive(left), channel_status::empty);
}
TEST_P(SelectIn, SelectsOnBothSidesMeetAndEveryItemArrivesOnce) {
  over_channel([&]<class Kind>() { selects_meet_selects<Kind>(kind(), capacity()); });
}

}  // namespace
}  // namespace tessera::test
