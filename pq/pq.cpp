// PostgreSQL from fibers (tessera/pq.h) on libpq's asynchronous API.
//
// libpq keeps its socket non-blocking itself; we wrap the number in an
// io::descriptor only to wait on it, and release() it (never close it) when
// libpq is done with it or changes it (a connection string with several hosts
// tries one socket after another while connecting).
//
// Waiting: libpq's protocol is "send, flush, then read until the result is
// complete". A flush that cannot finish (PQflush returns 1) may need the
// socket to become writable *or* the server's replies to be read first (a
// long pipeline fills both directions); a fiber waits on one direction at a
// time, so flush() waits for writability in slices of 10 ms and reads what
// has arrived between them.
//
// The poller is edge-triggered and libpq does not say whether its last call
// found the socket dry, so wait() polls the socket once (timeout 0) before
// parking: a system call per wait, against a hang when an edge was consumed
// and the socket is still ready.
#include "tessera/pq.h"

#include <libpq-fe.h>
#include <poll.h>

#include <stdexcept>

namespace tessera::pq {
namespace {

/// libpq's message without its trailing newline.
std::string trimmed(const char* text) {
  std::string m = text;
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

std::string message_of(const PGconn* c) {
  return c != nullptr ? trimmed(PQerrorMessage(c)) : "out of memory";
}

/// The server's error in a failed result.
error server_error(const PGresult* r, const char* what) {
  const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  return error(error_kind::server,
               std::string("tessera::pq::") + what + ": " + trimmed(PQresultErrorMessage(r)),
               state != nullptr ? state : "");
}

bool failed(const PGresult* r) {
  switch (PQresultStatus(r)) {
    case PGRES_BAD_RESPONSE:
    case PGRES_NONFATAL_ERROR:
    case PGRES_FATAL_ERROR:
      return true;
    default:
      return false;
  }
}

constexpr auto kCancelGrace = std::chrono::seconds(5);

}  // namespace

// ---- result --------------------------------------------------------------------
result& result::operator=(result&& o) noexcept {
  if (this != &o) {
    if (r_ != nullptr) PQclear(r_);
    r_ = std::exchange(o.r_, nullptr);
  }
  return *this;
}
result::~result() {
  if (r_ != nullptr) PQclear(r_);
}
int result::rows() const noexcept {
  return r_ != nullptr ? PQntuples(r_) : 0;
}
int result::columns() const noexcept {
  return r_ != nullptr ? PQnfields(r_) : 0;
}
std::string_view result::column_name(int col) const {
  const char* n = r_ != nullptr ? PQfname(r_, col) : nullptr;
  if (n == nullptr) {
    throw error(error_kind::usage, "tessera::pq::result: no column " + std::to_string(col) +
                                       " (the result has " + std::to_string(columns()) + ")");
  }
  return n;
}
int result::column(std::string_view name) const {
  for (int c = 0; c < columns(); ++c) {
    if (name == PQfname(r_, c)) return c;
  }
  throw error(error_kind::usage,
              "tessera::pq::result: no column named '" + std::string(name) + "'");
}
bool result::is_null(int row, int col) const {
  (void)text(row, col);  // range check
  return PQgetisnull(r_, row, col) != 0;
}
std::string_view result::text(int row, int col) const {
  if (row < 0 || row >= rows() || col < 0 || col >= columns()) {
    throw error(error_kind::usage, "tessera::pq::result: no value at row " + std::to_string(row) +
                                       ", column " + std::to_string(col) + " (the result has " +
                                       std::to_string(rows()) + " rows of " +
                                       std::to_string(columns()) + " columns)");
  }
  return {PQgetvalue(r_, row, col), static_cast<std::size_t>(PQgetlength(r_, row, col))};
}
std::size_t result::affected_rows() const noexcept {
  const char* n = r_ != nullptr ? PQcmdTuples(r_) : "";
  std::size_t v = 0;
  std::from_chars(n, n + std::char_traits<char>::length(n), v);
  return v;
}
void result::bad_value(int row, int col, const char* why) const {
  throw error(error_kind::usage, "tessera::pq::result: the value at row " + std::to_string(row) +
                                     ", column '" + std::string(column_name(col)) + "' " + why +
                                     " ('" + std::string(text(row, col)) + "')");
}

std::vector<const char*> detail::params::pointers() const {
  std::vector<const char*> p;
  p.reserve(values_.size());
  for (const auto& v : values_) p.push_back(v ? v->c_str() : nullptr);
  return p;
}

// ---- connection -----------------------------------------------------------------
connection::connection(connection&& o) noexcept
    : c_(std::exchange(o.c_, nullptr)),
      sock_(std::move(o.sock_)),
      deadline_(o.deadline_),
      stop_(std::move(o.stop_)) {}

connection& connection::operator=(connection&& o) noexcept {
  if (this != &o) {
    this->~connection();
    new (this) connection(std::move(o));
  }
  return *this;
}

connection::~connection() {
  (void)sock_.release();  // libpq closes it
  if (c_ != nullptr) PQfinish(c_);
  c_ = nullptr;
}

bool connection::ok() const noexcept {
  return c_ != nullptr && PQstatus(c_) == CONNECTION_OK;
}

bool connection::in_transaction() const noexcept {
  return c_ != nullptr && PQtransactionStatus(c_) != PQTRANS_IDLE;
}

void connection::track_socket() {
  const int fd = PQsocket(c_);
  if (fd == sock_.native_handle()) return;
  (void)sock_.release();
  if (fd >= 0) sock_ = io::descriptor(fd);
}

void connection::fail(const char* what) {
  throw error(error_kind::connection, std::string("tessera::pq::") + what + ": " + message_of(c_));
}

void connection::wait(bool write, io::clock::time_point deadline) {
  track_socket();
  if (!sock_.is_open()) fail("wait");
  // The poller reports edges; libpq asks to wait without saying whether its
  // last call found the socket dry (after connect() completes it asks for
  // writability again, which has long been there). So look first.
  pollfd p{sock_.native_handle(), static_cast<short>(write ? POLLOUT : POLLIN), 0};
  if (::poll(&p, 1, 0) > 0) return;
  std::optional<std::stop_callback<std::function<void()>>> cb;
  if (stop_.stop_possible()) {
    cb.emplace(stop_, std::function<void()>([this] { sock_.interrupt(); }));
  }
  const std::error_code ec = write ? sock_.wait_writable(deadline) : sock_.wait_readable(deadline);
  cb.reset();
  sock_.clear_interrupt();
  if (ec) throw std::system_error(ec);
}

connection connection::connect(const std::string& conninfo, std::chrono::milliseconds timeout) {
  const auto deadline = io::clock::now() + timeout;
  connection c;
  c.c_ = PQconnectStart(conninfo.c_str());
  if (c.c_ == nullptr || PQstatus(c.c_) == CONNECTION_BAD) c.fail("connect");
  for (PostgresPollingStatusType st = PGRES_POLLING_WRITING;;) {
    if (st == PGRES_POLLING_OK) break;
    if (st == PGRES_POLLING_FAILED) c.fail("connect");
    try {
      c.wait(st == PGRES_POLLING_WRITING, deadline);
    } catch (const std::system_error& e) {
      throw error(e.code() == std::errc::timed_out ? error_kind::timed_out : error_kind::canceled,
                  "tessera::pq::connect: " + e.code().message() + " after " +
                      std::to_string(timeout.count()) + " ms");
    }
    st = PQconnectPoll(c.c_);
  }
  c.track_socket();
  if (PQsetnonblocking(c.c_, 1) != 0) c.fail("connect");
  return c;
}

void connection::flush(io::clock::time_point deadline) {
  for (;;) {
    const int r = PQflush(c_);
    if (r == 0) return;
    if (r < 0) fail("flush");
    try {
      wait(true, std::min(deadline, io::clock::now() + std::chrono::milliseconds(10)));
    } catch (const std::system_error& e) {
      if (e.code() != std::errc::timed_out || io::clock::now() >= deadline) throw;
    }
    if (PQconsumeInput(c_) == 0) fail("flush");
  }
}

PGresult* connection::next_result(io::clock::time_point deadline) {
  while (PQisBusy(c_) != 0) {
    wait(false, deadline);
    if (PQconsumeInput(c_) == 0) fail("read");
  }
  return PQgetResult(c_);
}

void connection::abandon(std::error_code why, const char* what) {
  // Ask the server to stop, then read the rest of the statement's results
  // so that the connection can serve again. PQcancel opens a connection of
  // its own and blocks: it runs on io::blocking's helper threads.
  if (PGcancel* cancel = PQgetCancel(c_)) {
    io::blocking([cancel] {
      char buf[256];
      (void)PQcancel(cancel, buf, sizeof buf);
    });
    PQfreeCancel(cancel);
  }
  const auto saved = std::exchange(stop_, std::stop_token());
  try {
    const auto grace = io::clock::now() + kCancelGrace;
    flush(grace);
    while (PGresult* r = next_result(grace)) PQclear(r);
  } catch (...) {
    // The server did not stop in time: the connection is of no further use.
    (void)sock_.release();
    PQfinish(c_);
    c_ = nullptr;
  }
  stop_ = saved;
  throw error(why == std::errc::timed_out ? error_kind::timed_out : error_kind::canceled,
              std::string("tessera::pq::") + what + ": " + why.message());
}

result connection::finish(const char* what) {
  try {
    flush(deadline_);
    result last;
    std::optional<error> err;
    while (PGresult* r = next_result(deadline_)) {
      if (failed(r) && !err) err = server_error(r, what);
      last = result(r);
    }
    if (err) throw *err;
    if (!ok()) fail(what);
    return last;
  } catch (const std::system_error& e) {
    // A wait failed (deadline, stop request): cancel on the server, which
    // parks here in the handler, as a thread would block in one.
    if (!ok()) fail(what);
    abandon(e.code(), what);
  }
}

result connection::query(std::string_view sql) {
  if (c_ == nullptr) throw error(error_kind::usage, "tessera::pq::query: not connected");
  const std::string s(sql);
  if (PQsendQuery(c_, s.c_str()) == 0) fail("query");
  return finish("query");
}

void connection::send_query(std::string_view sql, const detail::params& p, const char* what) {
  const std::string s(sql);
  const auto v = p.pointers();
  if (PQsendQueryParams(c_, s.c_str(), p.size(), nullptr, v.data(), nullptr, nullptr, 0) == 0) {
    fail(what);
  }
}

void connection::send_prepared(const std::string& name, const detail::params& p, const char* what) {
  const auto v = p.pointers();
  if (PQsendQueryPrepared(c_, name.c_str(), p.size(), v.data(), nullptr, nullptr, 0) == 0) {
    fail(what);
  }
}

result connection::query_params(std::string_view sql, const detail::params& p) {
  if (c_ == nullptr) throw error(error_kind::usage, "tessera::pq::query: not connected");
  send_query(sql, p, "query");
  return finish("query");
}

void connection::prepare(const std::string& name, std::string_view sql) {
  if (c_ == nullptr) throw error(error_kind::usage, "tessera::pq::prepare: not connected");
  const std::string s(sql);
  if (PQsendPrepare(c_, name.c_str(), s.c_str(), 0, nullptr) == 0) fail("prepare");
  (void)finish("prepare");
}

result connection::execute_params(const std::string& name, const detail::params& p) {
  if (c_ == nullptr) throw error(error_kind::usage, "tessera::pq::execute: not connected");
  send_prepared(name, p, "execute");
  return finish("execute");
}

pipeline connection::pipeline() {
  return pq::pipeline(*this);
}

batch connection::batch() {
  return pq::batch(*this);
}

// ---- pipelines -----------------------------------------------------------------
// Both forms queue statements with libpq in pipeline mode and differ in where
// the Sync messages go. A Sync ends the server's implicit transaction: after
// each statement (pipeline), each commits alone and an error aborts only its
// own; after all (batch), an error aborts the rest and rolls back the earlier
// ones. libpq before 17 flushes at every PQpipelineSync, so the pipeline form
// costs a send(2) per statement where the batch costs one.
namespace detail {

pipeline_base::pipeline_base(connection& c, const char* what, bool sync_each)
    : c_(c), what_(what), sync_each_(sync_each) {
  if (c.c_ == nullptr) {
    throw error(error_kind::usage, std::string("tessera::pq::") + what + ": not connected");
  }
}

pipeline_base::~pipeline_base() {
  if (c_.c_ != nullptr && queued_ == 0) (void)PQexitPipelineMode(c_.c_);
  // Statements queued but never run: the connection cannot leave pipeline
  // mode with them pending, so it is closed (ok() turns false).
  if (c_.c_ != nullptr && queued_ != 0) {
    (void)c_.sock_.release();
    PQfinish(c_.c_);
    c_.c_ = nullptr;
  }
}

// Pipeline mode lasts from the first statement queued to the end of run(),
// so the connection takes plain calls between runs.
void pipeline_base::begin_statement() {
  if (c_.c_ == nullptr) {
    throw error(error_kind::usage, std::string("tessera::pq::") + what_ + ": not connected");
  }
  if (queued_ == 0 && PQenterPipelineMode(c_.c_) == 0) c_.fail(what_);
}

void pipeline_base::query_params(std::string_view sql, const params& p) {
  begin_statement();
  c_.send_query(sql, p, what_);
  ++queued_;
  if (sync_each_) sync();
}

void pipeline_base::execute_params(const std::string& name, const params& p) {
  begin_statement();
  c_.send_prepared(name, p, what_);
  ++queued_;
  if (sync_each_) sync();
}

void pipeline_base::sync() {
  if (PQpipelineSync(c_.c_) == 0) c_.fail(what_);
}

void pipeline_base::collect(std::size_t syncs, const std::function<void(pg_result*)>& each) {
  try {
    c_.flush(c_.deadline_);
    while (syncs != 0) {
      PGresult* r = c_.next_result(c_.deadline_);
      if (r != nullptr && PQresultStatus(r) == PGRES_PIPELINE_SYNC) {
        PQclear(r);
        --syncs;
        continue;
      }
      each(r);
    }
    // Every result is in: the connection is idle and leaves pipeline mode.
    if (PQexitPipelineMode(c_.c_) == 0) c_.fail(what_);
  } catch (const std::system_error& e) {
    queued_ = 0;
    if (!c_.ok()) c_.fail(what_);
    c_.abandon(e.code(), what_);  // parks in the handler (see finish())
  }
  queued_ = 0;
}

}  // namespace detail

const result& outcome::value() const& {
  if (error_) throw *error_;
  return value_;
}

result& outcome::value() & {
  if (error_) throw *error_;
  return value_;
}

const error& outcome::error() const {
  if (!error_) {
    throw pq::error(error_kind::usage, "tessera::pq::outcome::error: the statement succeeded");
  }
  return *error_;
}

std::vector<outcome> pipeline::run() {
  std::vector<outcome> out;
  out.reserve(queued_);
  // A statement's results end with a nullptr, then its Sync comes back. The
  // last result is the statement's (a failed one has only its error).
  std::optional<outcome> current;
  const std::size_t n = queued_;
  if (n == 0) return out;
  collect(n, [&](PGresult* r) {
    if (r == nullptr) {
      if (current) out.push_back(std::move(*current));
      current.reset();
    } else if (failed(r)) {
      current.emplace(server_error(r, "pipeline::run"));
      PQclear(r);
    } else {
      current.emplace(result(r));
    }
  });
  return out;
}

std::vector<result> batch::run() {
  std::vector<result> out;
  out.reserve(queued_);
  std::optional<error> err;
  if (queued_ == 0) return out;
  sync();
  // Each statement's results end with a nullptr; the one Sync ends all.
  collect(1, [&](PGresult* r) {
    if (r == nullptr) return;
    if (failed(r) && !err) err = server_error(r, "batch::run");
    if (PQresultStatus(r) != PGRES_PIPELINE_ABORTED && !failed(r)) {
      out.emplace_back(r);
    } else {
      PQclear(r);
    }
  });
  if (err) throw *err;
  return out;
}

// ---- pool ---------------------------------------------------------------------
pool::pool(std::string conninfo, std::size_t size, std::function<void(connection&)> on_connect)
    : conninfo_(std::move(conninfo)),
      size_(size),
      on_connect_(std::move(on_connect)),
      slots_(static_cast<std::ptrdiff_t>(size)) {
  if (size == 0) throw std::invalid_argument("tessera::pq::pool: size must be at least 1");
}

pool::~pool() = default;

pool::lease::~lease() {
  if (p_ != nullptr) p_->give_back(std::move(c_));
}

void pool::give_back(std::unique_ptr<connection> c) noexcept {
  if (c && c->ok() && !c->in_transaction()) {
    c->set_deadline(io::clock::time_point::max());
    c->set_stop_token({});
    std::lock_guard lock(mu_);
    idle_.push_back(std::move(c));
  }
  // A broken connection is dropped here: its slot opens a new one.
  slots_.release();
}

pool::lease pool::fill() {
  std::unique_ptr<connection> c;
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      c = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (!c) {
    try {
      c = std::make_unique<connection>(connection::connect(conninfo_));
      if (on_connect_) on_connect_(*c);
    } catch (...) {
      slots_.release();
      throw;
    }
  }
  return lease(this, std::move(c));
}

pool::lease pool::take() {
  slots_.acquire();
  return fill();
}

std::optional<pool::lease> pool::try_take_until(io::clock::time_point deadline) {
  if (!slots_.try_acquire_until(deadline)) return std::nullopt;
  return fill();
}

std::size_t pool::idle() const {
  std::lock_guard lock(mu_);
  return idle_.size();
}

}  // namespace tessera::pq
