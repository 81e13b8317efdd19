// tfb_server — the six test types of the TechEmpower Framework Benchmarks on
// Tessera: a fiber per connection (samples/http_serve.h), PostgreSQL through
// tessera::pq's pool and pipelines, JSON with nlohmann-json.
//
//   tfb_server --port 8080 --workers 2 --db "host=127.0.0.1 port=5432 dbname=hello_world
//              user=benchmarkdbuser password=benchmarkdbpass" [--db-pool 16]
//
//   /plaintext          "Hello, World!" (text/plain), pipelined requests answered together
//   /json               {"message":"Hello, World!"}
//   /db                 one random World row: {"id":…,"randomNumber":…}
//   /queries?queries=N  N random rows, one pipeline (one round trip, a Sync and
//                       so a transaction per statement, as TechEmpower requires)
//   /fortunes           the Fortune rows plus one added at request time, sorted
//                       by message, as an HTML table (escaped, UTF-8)
//   /updates?queries=N  N random rows read, each given a new random number,
//                       written back in one statement, returned
//
// N: missing, zero or not a number → 1; over 500 → 500 (the requirements).
// Every response carries Server, Date (refreshed once a second), Content-Type
// and Content-Length. A database error answers 500 with the server's message
// and the connection serves on; without --db the database types answer 503.
// Prints "listening on HOST:PORT" and the I/O backend; SIGINT/SIGTERM stop it
// gracefully.
#include <tessera/pq.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "../http_serve.h"

namespace {

namespace pq = tessera::pq;
using tessera::samples::append_response;
using tessera::samples::http_request;

std::optional<pq::pool> g_db;

void reply(std::string& out, std::string_view status, std::string_view content_type,
           std::string_view body, bool keep_alive) {
  std::string headers = "Content-Type: ";
  headers += content_type;
  headers += "\r\n";
  append_response(out, status, headers, body, keep_alive);
}

/// A random World id (and random number): 1…10000.
int random_id() {
  thread_local std::minstd_rand rng(std::random_device{}());
  return std::uniform_int_distribution<int>(1, 10000)(rng);
}

/// The `queries` parameter, clamped as the requirements say.
int query_count(std::string_view url) {
  const auto q = url.find('?');
  if (q == std::string_view::npos) return 1;
  std::string_view rest = url.substr(q + 1);
  for (;;) {
    const auto amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    if (pair.rfind("queries=", 0) == 0) {
      const std::string_view v = pair.substr(8);
      int n = 0;
      const auto r = std::from_chars(v.data(), v.data() + v.size(), n);
      if (r.ec == std::errc::result_out_of_range && !v.empty() && v[0] != '-') return 500;
      if (r.ec != std::errc{} || n < 1) return 1;
      return std::min(n, 500);
    }
    if (amp == std::string_view::npos) return 1;
    rest = rest.substr(amp + 1);
  }
}

void prepare(pq::connection& c) {
  c.prepare("world", "SELECT id, randomNumber FROM World WHERE id = $1");
  c.prepare("fortunes", "SELECT id, message FROM Fortune");
  // Rows in id order, so that concurrent updates lock them in one order.
  c.prepare("update",
            "UPDATE World SET randomNumber = v.r FROM "
            "(SELECT unnest($1::int[]) AS id, unnest($2::int[]) AS r ORDER BY 1) AS v "
            "WHERE World.id = v.id");
}

/// N random rows, read through one pipeline.
std::vector<std::pair<int, int>> random_rows(pq::connection& c, int n) {
  std::vector<std::pair<int, int>> rows;
  rows.reserve(n);
  if (n == 1) {
    const auto r = c.execute("world", random_id());
    rows.emplace_back(r.get<int>(0, 0), r.get<int>(0, 1));
    return rows;
  }
  // A Sync after each statement (General Requirement #7): each SELECT is its
  // own transaction, as if sent alone; value() throws a failed one's error.
  auto p = c.pipeline();
  for (int i = 0; i < n; ++i) p.execute("world", random_id());
  for (const auto& o : p.run()) {
    const pq::result& r = o.value();
    rows.emplace_back(r.get<int>(0, 0), r.get<int>(0, 1));
  }
  return rows;
}

std::string rows_json(const std::vector<std::pair<int, int>>& rows) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& [id, number] : rows) a.push_back({{"id", id}, {"randomNumber", number}});
  return a.dump();
}

void html_escape(std::string& out, std::string_view s) {
  for (const char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += ch;
    }
  }
}

std::string fortunes_page(pq::connection& c) {
  const auto r = c.execute("fortunes");
  std::vector<std::pair<int, std::string>> rows;
  rows.reserve(r.rows() + 1);
  for (int i = 0; i < r.rows(); ++i) rows.emplace_back(r.get<int>(i, 0), r.get<std::string>(i, 1));
  rows.emplace_back(0, "Additional fortune added at request time.");
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  std::string page =
      "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
      "<tr><th>id</th><th>message</th></tr>";
  for (const auto& [id, message] : rows) {
    page += "<tr><td>";
    page += std::to_string(id);
    page += "</td><td>";
    html_escape(page, message);
    page += "</td></tr>";
  }
  page += "</table></body></html>";
  return page;
}

std::string updated_rows(pq::connection& c, int n) {
  auto rows = random_rows(c, n);
  // Each id once in the statement; a repeated id keeps one new number.
  std::vector<std::pair<int, int>> changes;
  changes.reserve(rows.size());
  for (auto& row : rows) {
    const auto same = std::find_if(changes.begin(), changes.end(),
                                   [&](const auto& ch) { return ch.first == row.first; });
    if (same != changes.end()) {
      row.second = same->second;
    } else {
      row.second = random_id();
      changes.emplace_back(row);
    }
  }
  std::string ids = "{", numbers = "{";
  for (const auto& [id, number] : changes) {
    if (ids.size() > 1) {
      ids += ',';
      numbers += ',';
    }
    ids += std::to_string(id);
    numbers += std::to_string(number);
  }
  ids += '}';
  numbers += '}';
  (void)c.execute("update", ids, numbers);
  return rows_json(rows);
}

void handle(const http_request& req, std::string& out) {
  const std::string_view path = req.url.substr(0, req.url.find('?'));
  if (path == "/plaintext") {
    reply(out, "200 OK", "text/plain", "Hello, World!", req.keep_alive);
    return;
  }
  if (path == "/json") {
    const nlohmann::json j = {{"message", "Hello, World!"}};
    reply(out, "200 OK", "application/json", j.dump(), req.keep_alive);
    return;
  }
  const bool db = path == "/db" || path == "/queries" || path == "/fortunes" || path == "/updates";
  if (!db) {
    reply(out, "404 Not Found", "text/plain", "Not Found", req.keep_alive);
    return;
  }
  if (!g_db) {
    reply(out, "503 Service Unavailable", "text/plain", "no database (--db)", req.keep_alive);
    return;
  }
  try {
    auto c = g_db->take();
    if (path == "/db") {
      const auto row = random_rows(*c, 1).front();
      const nlohmann::json j = {{"id", row.first}, {"randomNumber", row.second}};
      reply(out, "200 OK", "application/json", j.dump(), req.keep_alive);
    } else if (path == "/queries") {
      reply(out, "200 OK", "application/json", rows_json(random_rows(*c, query_count(req.url))),
            req.keep_alive);
    } else if (path == "/fortunes") {
      reply(out, "200 OK", "text/html; charset=utf-8", fortunes_page(*c), req.keep_alive);
    } else {
      reply(out, "200 OK", "application/json", updated_rows(*c, query_count(req.url)),
            req.keep_alive);
    }
  } catch (const std::exception& e) {
    reply(out, "500 Internal Server Error", "text/plain", e.what(), req.keep_alive);
  }
}

void serve(tessera::samples::connection& conn, std::chrono::seconds idle) {
  (void)conn.stream.set_no_delay(true);
  tessera::samples::serve_http(conn, conn.stream, idle, handle);
}

}  // namespace

int main(int argc, char** argv) {
  static std::string conninfo;
  static std::size_t pool_size = 16;
  return tessera::samples::serve_main(
      argc, argv, "tfb_server: TechEmpower's six test types on Tessera fibers and PostgreSQL", 8080,
      10, serve,
      [](CLI::App& app) {
        tessera::samples::add_http_options(app);
        app.add_option("--db", conninfo, "libpq connection string of the hello_world database");
        app.add_option("--db-pool", pool_size, "Database connections at most")
            ->capture_default_str()
            ->check(CLI::PositiveNumber);
        app.callback([] {
          if (!conninfo.empty()) g_db.emplace(conninfo, pool_size, prepare);
        });
      },
      [] { g_db.reset(); });
}
