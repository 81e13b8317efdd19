// tessera::pq against a private PostgreSQL server (scripts/postgres.sh, started
// by the ctest fixture; its conninfo is in the file TESSERA_PQ_CONNINFO_FILE
// names): typed results, SQLSTATE errors, prepared statements, pipelines
// (a Sync per statement) and batches (one transaction),
// deadlines and stop tokens that cancel on the server, a query parking only
// its fiber, the pool's bound, FIFO wait and replacement of broken
// connections — in threads and in fibers on 1 and 2 workers.
#include <gtest/gtest.h>
#include <tessera/latch.h>
#include <tessera/net.h>
#include <tessera/pq.h>
#include <tessera/runtime.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "exec_env.h"

namespace tessera::test {
namespace {

using namespace std::chrono_literals;

const std::string& conninfo() {
  static const std::string info = [] {
    const char* file = std::getenv("TESSERA_PQ_CONNINFO_FILE");
    if (file == nullptr) {
      ADD_FAILURE() << "TESSERA_PQ_CONNINFO_FILE is not set (run through ctest: the "
                       "postgres_start fixture starts the server)";
      return std::string();
    }
    std::ifstream f(file);
    std::string line;
    std::getline(f, line);
    if (line.empty()) ADD_FAILURE() << "no conninfo in " << file;
    return line;
  }();
  return info;
}

class PqIn : public ::testing::TestWithParam<exec_kind> {};
INSTANTIATE_TEST_SUITE_P(Envs, PqIn,
                         ::testing::Values(exec_kind::threads, exec_kind::fibers_1w,
                                           exec_kind::fibers_2w),
                         [](const auto& p) { return to_string(p.param); });

// Runs `body` once in the environment and rethrows what it threw.
void run_one(exec_kind kind, const std::function<void()>& body) {
  std::exception_ptr err;
  run_all(kind, 1, [&](int) {
    try {
      body();
    } catch (...) {
      err = std::current_exception();
    }
  });
  if (err) std::rethrow_exception(err);
}

TEST_P(PqIn, TypedResultsAndUsageErrors) {
  run_one(GetParam(), [] {
    auto c = pq::connection::connect(conninfo());
    EXPECT_TRUE(c.ok());
    auto r = c.query(
        "SELECT 42::int AS n, 'héllo'::text AS s, NULL::int AS z, true AS b, "
        "2.5::float8 AS d, 9000000000::bigint AS big");
    ASSERT_EQ(r.rows(), 1);
    ASSERT_EQ(r.columns(), 6);
    EXPECT_EQ(r.get<int>(0, 0), 42);
    EXPECT_EQ(r.get<std::string>(0, r.column("s")), "héllo");
    EXPECT_EQ(r.get<std::optional<int>>(0, 2), std::nullopt);
    EXPECT_TRUE(r.is_null(0, 2));
    EXPECT_TRUE(r.get<bool>(0, 3));
    EXPECT_DOUBLE_EQ(r.get<double>(0, 4), 2.5);
    EXPECT_EQ(r.get<long long>(0, 5), 9000000000LL);
    EXPECT_EQ(r.column_name(1), "s");
    // Misuse: NULL into int, text into int, out of range, unknown name.
    auto kind_of = [&](auto f) {
      try {
        f();
      } catch (const pq::error& e) {
        EXPECT_NE(std::string(e.what()).find("tessera::pq::result"), std::string::npos) << e.what();
        return e.kind();
      }
      return pq::error_kind::server;  // nothing thrown: the EXPECTs below fail
    };
    EXPECT_EQ(kind_of([&] { (void)r.get<int>(0, 2); }), pq::error_kind::usage);
    EXPECT_EQ(kind_of([&] { (void)r.get<int>(0, 1); }), pq::error_kind::usage);
    EXPECT_EQ(kind_of([&] { (void)r.get<int>(1, 0); }), pq::error_kind::usage);
    EXPECT_EQ(kind_of([&] { (void)r.column("nope"); }), pq::error_kind::usage);
    // Parameters: integers, strings, NULL, optional, bool.
    auto p = c.query("SELECT $1::int + 1, $2::text || '!', $3::int IS NULL, $4::int, $5::bool", 41,
                     std::string_view("hi"), std::nullopt, std::optional<int>(7), false);
    EXPECT_EQ(p.get<int>(0, 0), 42);
    EXPECT_EQ(p.get<std::string_view>(0, 1), "hi!");
    EXPECT_TRUE(p.get<bool>(0, 2));
    EXPECT_EQ(p.get<int>(0, 3), 7);
    EXPECT_FALSE(p.get<bool>(0, 4));
  });
}

TEST_P(PqIn, ServerErrorsCarrySqlstateAndTheConnectionServesOn) {
  run_one(GetParam(), [] {
    auto c = pq::connection::connect(conninfo());
    try {
      (void)c.query("SELECT * FROM no_such_table");
      ADD_FAILURE() << "no error";
    } catch (const pq::error& e) {
      EXPECT_EQ(e.kind(), pq::error_kind::server);
      EXPECT_EQ(e.sqlstate(), "42P01");
      EXPECT_NE(std::string(e.what()).find("no_such_table"), std::string::npos) << e.what();
    }
    (void)c.query("CREATE TEMP TABLE t (id int PRIMARY KEY)");
    EXPECT_EQ(c.query("INSERT INTO t VALUES (1), (2)").affected_rows(), 2u);
    try {
      (void)c.query("INSERT INTO t VALUES ($1)", 1);
      ADD_FAILURE() << "no error";
    } catch (const pq::error& e) {
      EXPECT_EQ(e.sqlstate(), "23505");  // unique_violation
    }
    EXPECT_TRUE(c.ok());
    EXPECT_EQ(c.query("SELECT count(*) FROM t").get<int>(0, 0), 2);
  });
}

TEST_P(PqIn, PreparedStatementsAndPipelinesKeepOrder) {
  run_one(GetParam(), [] {
    auto c = pq::connection::connect(conninfo());
    c.prepare("world", "SELECT id, randomNumber FROM World WHERE id = $1");
    EXPECT_EQ(c.execute("world", 17).get<int>(0, 0), 17);
    auto p = c.pipeline();
    for (int id = 1; id <= 50; ++id) p.execute("world", id * 7);
    p.query("SELECT count(*) FROM Fortune");
    EXPECT_EQ(p.size(), 51u);
    const auto rs = p.run();
    ASSERT_EQ(rs.size(), 51u);
    for (int i = 0; i < 50; ++i) {
      EXPECT_EQ(rs[i].value().get<int>(0, 0), (i + 1) * 7);
      const int n = rs[i].value().get<int>(0, 1);
      EXPECT_TRUE(n >= 1 && n <= 10000) << n;
    }
    EXPECT_EQ(rs[50].value().get<int>(0, 0), 12);
    EXPECT_EQ(p.size(), 0u);
    EXPECT_TRUE(p.run().empty());
    // The same in a batch, reused after run().
    auto b = c.batch();
    for (int round = 0; round < 2; ++round) {
      for (int id = 1; id <= 20; ++id) b.execute("world", id);
      const auto bs = b.run();
      ASSERT_EQ(bs.size(), 20u);
      for (int i = 0; i < 20; ++i) EXPECT_EQ(bs[i].get<int>(0, 0), i + 1);
    }
  });
}

// A failing statement in the middle: in a pipeline it has its own error and
// the others run and commit; in a batch it throws, the later statements are
// skipped and the earlier ones' changes rolled back. Both connections serve on.
TEST_P(PqIn, APipelineRunsPastAFailureABatchRollsBack) {
  run_one(GetParam(), [] {
    auto c = pq::connection::connect(conninfo());
    c.query("CREATE TEMP TABLE t (n int)");
    auto p = c.pipeline();
    p.query("INSERT INTO t VALUES (1)");
    p.query("SELECT 1/0");
    p.query("INSERT INTO t VALUES (2)");
    p.query("SELECT * FROM no_such_table");
    p.query("SELECT count(*) FROM t");
    auto os = p.run();
    ASSERT_EQ(os.size(), 5u);
    EXPECT_TRUE(os[0].has_value());
    EXPECT_EQ(os[0].value().affected_rows(), 1u);
    ASSERT_FALSE(os[1].has_value());
    EXPECT_EQ(os[1].error().sqlstate(), "22012");  // division_by_zero
    EXPECT_NE(std::string(os[1].error().what()).find("tessera::pq::pipeline::run"),
              std::string::npos)
        << os[1].error().what();
    EXPECT_TRUE(os[2].has_value());
    ASSERT_FALSE(os[3]);
    EXPECT_EQ(os[3].error().sqlstate(), "42P01");  // undefined_table
    EXPECT_EQ(os[4].value().get<int>(0, 0), 2);
    // value() of a failed statement throws its error; error() of a
    // successful one is misuse.
    try {
      (void)os[1].value();
      ADD_FAILURE() << "value() of a failed statement returned";
    } catch (const pq::error& e) {
      EXPECT_EQ(e.sqlstate(), "22012");
    }
    EXPECT_THROW((void)os[0].error(), pq::error);

    auto b = c.batch();
    b.query("INSERT INTO t VALUES (3)");
    b.query("SELECT 1/0");
    b.query("INSERT INTO t VALUES (4)");
    try {
      (void)b.run();
      ADD_FAILURE() << "no error";
    } catch (const pq::error& e) {
      EXPECT_EQ(e.kind(), pq::error_kind::server);
      EXPECT_EQ(e.sqlstate(), "22012");
    }
    EXPECT_EQ(c.query("SELECT count(*) FROM t").get<int>(0, 0), 2);  // 3 undone, 4 skipped
    b.query("INSERT INTO t VALUES (5)");
    EXPECT_EQ(b.run().size(), 1u);
    EXPECT_EQ(c.query("SELECT count(*) FROM t").get<int>(0, 0), 3);
  });
}

// The server's own count (pg_stat_database.xact_commit of a database no
// other client uses): a pipeline of N statements commits N transactions, a
// batch of N one, beside a connection that does nothing.
TEST(Pq, APipelineCommitsEachStatementABatchCommitsOnce) {
  // The observer reads from another database, so its own commits are not counted.
  auto observer = pq::connection::connect(conninfo());
  const auto commits = [&] {
    return observer
        .query("SELECT xact_commit FROM pg_stat_database WHERE datname = 'tessera_counts'")
        .get<long long>(0, 0);
  };
  // What a connection of its own running `work` commits. A backend's counts
  // reach pg_stat_database when it flushes them, at the latest as it exits,
  // which is before it leaves pg_stat_activity.
  const auto committed_by = [&](const std::function<void(pq::connection&)>& work) {
    const long long before = commits();
    int pid = 0;
    {
      auto c = pq::connection::connect(conninfo() + " dbname=tessera_counts");
      pid = c.query("SELECT pg_backend_pid()").get<int>(0, 0);
      work(c);
    }
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (observer.query("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid)
               .get<int>(0, 0) != 0) {
      if (std::chrono::steady_clock::now() > give_up) {
        ADD_FAILURE() << "backend " << pid << " did not exit within 10 s";
        break;
      }
      std::this_thread::sleep_for(1ms);  // the server's state, polled with a bound
    }
    return commits() - before;
  };
  constexpr int kStatements = 20;
  const long long idle = committed_by([](pq::connection&) {});
  EXPECT_EQ(committed_by([&](pq::connection& c) {
              auto p = c.pipeline();
              for (int i = 0; i < kStatements; ++i) p.query("SELECT $1::int", i);
              EXPECT_EQ(p.run().size(), static_cast<std::size_t>(kStatements));
            }) - idle,
            kStatements);
  EXPECT_EQ(committed_by([&](pq::connection& c) {
              auto b = c.batch();
              for (int i = 0; i < kStatements; ++i) b.query("SELECT $1::int", i);
              EXPECT_EQ(b.run().size(), static_cast<std::size_t>(kStatements));
            }) - idle,
            1);
  // The same statements sent one at a time: what the pipeline stands for.
  EXPECT_EQ(committed_by([&](pq::connection& c) {
              for (int i = 0; i < kStatements; ++i) (void)c.query("SELECT $1::int", i);
            }) - idle,
            kStatements);
}

TEST_P(PqIn, DeadlineCancelsOnTheServerNeverEarly) {
  run_one(GetParam(), [] {
    auto c = pq::connection::connect(conninfo());
    const auto t0 = io::clock::now();
    c.set_deadline(t0 + 150ms);
    try {
      (void)c.query("SELECT pg_sleep(20)");
      ADD_FAILURE() << "no timeout";
    } catch (const pq::error& e) {
      EXPECT_EQ(e.kind(), pq::error_kind::timed_out) << e.what();
    }
    const auto took = io::clock::now() - t0;
    EXPECT_GE(took, 150ms);
    EXPECT_LT(took, 10s);  // the server stopped: not the 20 s sleep
    c.set_deadline(io::clock::time_point::max());
    EXPECT_TRUE(c.ok());
    EXPECT_EQ(c.query("SELECT 5").get<int>(0, 0), 5);
  });
}

TEST_P(PqIn, StopTokenCancelsTheQueryInProgress) {
  run_one(GetParam(), [] {
    auto c = pq::connection::connect(conninfo());
    std::stop_source stop;
    c.set_stop_token(stop.get_token());
    // The stop comes from another thread once the query is on the server.
    std::jthread stopper([&] {
      auto probe = pq::connection::connect(conninfo());
      const auto give_up = io::clock::now() + 20s;
      while (probe.query("SELECT count(*) FROM pg_stat_activity WHERE query LIKE "
                         "'SELECT pg_sleep(30)%' AND state = 'active'")
                     .get<int>(0, 0) == 0 &&
             io::clock::now() < give_up) {
        std::this_thread::sleep_for(5ms);
      }
      stop.request_stop();
    });
    const auto t0 = io::clock::now();
    try {
      (void)c.query("SELECT pg_sleep(30)");
      ADD_FAILURE() << "not cancelled";
    } catch (const pq::error& e) {
      EXPECT_EQ(e.kind(), pq::error_kind::canceled) << e.what();
    }
    EXPECT_LT(io::clock::now() - t0, 25s);
    c.set_stop_token({});
    EXPECT_EQ(c.query("SELECT 6").get<int>(0, 0), 6);
  });
}

// The deadline's error path cancels on the server from inside pq's own catch
// handler, parking there; fibers on two workers do it at once, each inside a
// handler of its own, and each ends with its own exceptions.
TEST(Pq, TimeoutsHandledInsideHandlersKeepEachFibersException) {
  runtime rt({.workers = 2});
  std::atomic<int> bad{0}, timed_out{0};
  constexpr int kFibers = 6;
  rt.run([&] {
    std::vector<fiber> fibers;
    for (int i = 0; i < kFibers; ++i) {
      fibers.emplace_back([&, i] {
        const std::string mine = "fiber " + std::to_string(i);
        try {
          throw std::runtime_error(mine);
        } catch (const std::runtime_error& outer) {
          try {
            auto c = pq::connection::connect(conninfo());
            c.set_deadline(io::clock::now() + 100ms);
            (void)c.query("SELECT pg_sleep(20)");
            ++bad;
          } catch (const pq::error& e) {
            if (e.kind() == pq::error_kind::timed_out) ++timed_out;
          }
          if (outer.what() != mine) ++bad;
          try {
            throw;
          } catch (const std::runtime_error& again) {
            if (&again != &outer) ++bad;
          }
        }
        if (std::current_exception() != nullptr) ++bad;
      });
    }
    for (auto& f : fibers) f.join();
  });
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(timed_out.load(), kFibers);
}

TEST(Pq, AQueryParksItsFiberNotTheWorker) {
  runtime rt({.workers = 1});
  std::atomic<int> ticks{0};
  std::atomic<bool> done{false};
  rt.run([&] {
    fiber ticker([&] {
      while (!done.load()) {
        this_fiber::sleep_for(1ms);
        ticks.fetch_add(1);
      }
    });
    try {
      auto c = pq::connection::connect(conninfo());
      (void)c.query("SELECT pg_sleep(0.3)");
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
    done = true;
    ticker.join();
  });
  // One worker: the ticker ran only if the query parked its fiber.
  EXPECT_GT(ticks.load(), 30);
}

TEST_P(PqIn, PoolBoundsConnectionsAndServesEveryTaker) {
  pq::pool db(conninfo(), 3,
              [](pq::connection& c) { c.prepare("world", "SELECT id FROM World WHERE id = $1"); });
  std::atomic<int> lent{0}, most{0}, served{0};
  run_all(GetParam(), 12, [&](int i) {
    for (int k = 0; k < 10; ++k) {
      auto c = db.take();
      const int now = lent.fetch_add(1) + 1;
      int m = most.load();
      while (now > m && !most.compare_exchange_weak(m, now)) {
      }
      const int id = 1 + (i * 10 + k) % 10000;
      if (c->execute("world", id).get<int>(0, 0) == id) served.fetch_add(1);
      lent.fetch_sub(1);
    }
  });
  EXPECT_EQ(served.load(), 120);
  EXPECT_LE(most.load(), 3);
  EXPECT_LE(db.idle(), 3u);
  EXPECT_GE(db.idle(), 1u);
}

TEST_P(PqIn, PoolWaitTimesOutAndABrokenConnectionIsReplaced) {
  run_one(GetParam(), [] {
    pq::pool db(conninfo(), 1);
    int pid = 0;
    {
      auto held = db.take();
      pid = held->query("SELECT pg_backend_pid()").get<int>(0, 0);
      const auto t0 = io::clock::now();
      EXPECT_FALSE(db.try_take_until(t0 + 100ms).has_value());
      EXPECT_GE(io::clock::now() - t0, 100ms);
      // Kill the lent connection's server process from another connection.
      auto admin = pq::connection::connect(conninfo());
      (void)admin.query("SELECT pg_terminate_backend($1)", pid);
      try {
        (void)held->query("SELECT 1");
        ADD_FAILURE() << "a killed connection answered";
      } catch (const pq::error& e) {
        EXPECT_EQ(e.kind(), pq::error_kind::connection) << e.what();
      }
      EXPECT_FALSE(held->ok());
    }
    EXPECT_EQ(db.idle(), 0u);  // not given back
    auto fresh = db.take();
    EXPECT_TRUE(fresh->ok());
    EXPECT_NE(fresh->query("SELECT pg_backend_pid()").get<int>(0, 0), pid);
  });
}

TEST_P(PqIn, ConnectErrorsSayWhatWentWrong) {
  run_one(GetParam(), [] {
    unsigned short port = 0;
    {
      // A listener that never answers: the connect times out.
      auto l = net::tcp_listener::listen("127.0.0.1:0");
      port = l.local_endpoint().port();
      try {
        (void)pq::connection::connect(
            "host=127.0.0.1 port=" + std::to_string(port) + " dbname=x user=x sslmode=disable",
            200ms);
        ADD_FAILURE() << "connected to a silent listener";
      } catch (const pq::error& e) {
        EXPECT_EQ(e.kind(), pq::error_kind::timed_out) << e.what();
      }
    }
    // The same port with nothing listening.
    try {
      (void)pq::connection::connect("host=127.0.0.1 port=" + std::to_string(port) +
                                    " dbname=x user=x sslmode=disable");
      ADD_FAILURE() << "connected to a closed port";
    } catch (const pq::error& e) {
      EXPECT_EQ(e.kind(), pq::error_kind::connection);
      EXPECT_NE(std::string(e.what()).find("onnection refused"), std::string::npos) << e.what();
    }
    EXPECT_THROW(pq::pool("", 0), std::invalid_argument);
  });
}

}  // namespace
}  // namespace tessera::test
