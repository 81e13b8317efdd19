// sched/trace.cpp — the workers' trace rings as Chrome trace-event JSON.
//
// The format (the Trace Event Format document of the Chromium project): an
// object with a "traceEvents" array; "B"/"E" open and close a slice on a
// thread's track, "i" is an instant, "s"/"f" draw a flow arrow between two
// points, timestamps in microseconds. Perfetto reads it as chrome://tracing
// does. We write it by hand: a trace holds up to millions of events, each a
// few fixed fields, and only fiber names need escaping.
#include "trace.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <ostream>
#include <string>

namespace tessera::sched {

std::vector<trace_event> trace_ring::events() const {
  // The stamps' rate, from the ring's creation to now.
  const std::uint64_t tsc1 = stamp();
  const std::int64_t ns1 = steady_ns();
  const double ns_per_tick =
      tsc1 > tsc0_ ? static_cast<double>(ns1 - ns0_) / static_cast<double>(tsc1 - tsc0_) : 1.0;
  std::vector<trace_event> out;
  const std::size_t cap = events_.size();
  const std::uint64_t first = next_ > cap ? next_ - cap : 0;
  out.reserve(static_cast<std::size_t>(next_ - first));
  for (std::uint64_t i = first; i < next_; ++i) {
    trace_event e = events_[i % cap];
    const double ticks = static_cast<double>(static_cast<std::uint64_t>(e.ts_ns) - tsc0_);
    e.ts_ns = ns0_ + static_cast<std::int64_t>(ticks * ns_per_tick);
    out.push_back(e);
  }
  return out;
}

namespace {

std::string escaped(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char u[8];
      std::snprintf(u, sizeof u, "\\u%04x", static_cast<unsigned>(c));
      out += u;
    } else {
      out += c;
    }
  }
  return out;
}

const char* end_reason(std::uint64_t b) {
  switch (static_cast<trace_end>(b)) {
    case trace_end::parked:
      return "parked";
    case trace_end::yielded:
      return "yielded";
    default:
      return "finished";
  }
}

class json_writer {
 public:
  json_writer(std::ostream& os, std::int64_t origin) : os_(os), origin_(origin) {}
  // One event: ph, name, the worker's track, its time, and extra fields
  // (`more`, already JSON, without braces).
  void event(char ph, const std::string& name, unsigned tid, std::int64_t ts,
             const std::string& more = {}) {
    char head[160];
    std::snprintf(head, sizeof head, "%s{\"ph\":\"%c\",\"pid\":1,\"tid\":%u,\"ts\":%.3f,",
                  first_ ? "" : ",\n", ph, tid, static_cast<double>(ts - origin_) / 1e3);
    first_ = false;
    os_ << head << "\"name\":\"" << escaped(name) << '"';
    if (!more.empty()) os_ << ',' << more;
    os_ << '}';
  }

 private:
  std::ostream& os_;
  std::int64_t origin_;
  bool first_ = true;
};

}  // namespace

void write_trace_json(std::ostream& os, const std::vector<const trace_ring*>& rings,
                      const std::vector<std::pair<std::uint64_t, std::string>>& names) {
  std::vector<std::vector<trace_event>> per(rings.size());
  std::int64_t origin = INT64_MAX;
  for (std::size_t w = 0; w < rings.size(); ++w) {
    per[w] = rings[w]->events();
    if (!per[w].empty()) origin = std::min(origin, per[w].front().ts_ns);
  }
  if (origin == INT64_MAX) origin = 0;
  std::map<std::uint64_t, std::string> name_of;
  for (const auto& [id, name] : names) name_of[id] = name;  // the latest name wins
  auto fiber_title = [&](std::uint64_t id) {
    std::string t = "fiber " + std::to_string(id);
    if (const auto it = name_of.find(id); it != name_of.end() && !it->second.empty()) {
      t += " \"" + it->second + '"';
    }
    return t;
  };
  // Each fiber's runs, for the flow arrows: unpark → the woken fiber's next run.
  std::map<std::uint64_t, std::vector<std::pair<std::int64_t, unsigned>>> runs;
  for (std::size_t w = 0; w < per.size(); ++w)
    for (const auto& e : per[w])
      if (e.kind == trace_kind::run_begin)
        runs[e.a].emplace_back(e.ts_ns, static_cast<unsigned>(w));
  for (auto& [id, r] : runs) std::sort(r.begin(), r.end());

  os << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  json_writer out(os, origin);
  for (std::size_t w = 0; w < per.size(); ++w) {
    out.event('M', "thread_name", static_cast<unsigned>(w), origin,
              "\"args\":{\"name\":\"worker " + std::to_string(w) + "\"}");
  }
  std::uint64_t flow = 0;
  for (std::size_t wi = 0; wi < per.size(); ++wi) {
    const auto tid = static_cast<unsigned>(wi);
    std::vector<std::string> open;  // the slices open on this track, innermost last
    std::int64_t last = origin;
    auto close_to = [&](std::size_t depth, std::int64_t ts, const std::string& more = {}) {
      while (open.size() > depth) {
        out.event('E', open.back(), tid, ts, open.size() == depth + 1 ? more : std::string());
        open.pop_back();
      }
    };
    // A job or sleep slice: opened; closed if it is still the innermost.
    auto begin_slice = [&](const char* name, const char* cat, std::int64_t ts) {
      open.emplace_back(name);
      out.event('B', name, tid, ts, std::string("\"cat\":\"") + cat + '"');
    };
    auto end_slice = [&](const char* name, std::int64_t ts) {
      if (!open.empty() && open.back() == name) close_to(open.size() - 1, ts);
    };
    // An instant about fiber e.a, with e.b under `key`.
    auto instant = [&](const char* name, const trace_event& e, const char* key) {
      out.event('i', name, tid, e.ts_ns,
                "\"cat\":\"fiber\",\"s\":\"t\",\"args\":{\"fiber\":" + std::to_string(e.a) + ",\"" +
                    key + "\":" + std::to_string(e.b) + "}");
    };
    for (const auto& e : per[wi]) {
      last = e.ts_ns;
      switch (e.kind) {
        case trace_kind::run_begin:
          open.push_back(fiber_title(e.a));
          out.event('B', open.back(), tid, e.ts_ns,
                    "\"cat\":\"fiber\",\"args\":{\"fiber\":" + std::to_string(e.a) + "}");
          break;
        case trace_kind::run_end: {
          // Close this fiber's run, and a job it parked in (the job's own end
          // comes later, in another run: dropped below).
          const std::string title = fiber_title(e.a);
          const auto at = std::find(open.begin(), open.end(), title);
          if (at == open.end()) break;  // began before the ring's oldest event
          std::string why = end_reason(e.b);
          if (e.text != nullptr) why += std::string(" on ") + e.text;
          close_to(static_cast<std::size_t>(at - open.begin()), e.ts_ns,
                   "\"args\":{\"ended\":\"" + escaped(why) + "\"}");
          break;
        }
        case trace_kind::job_begin:
          begin_slice("job", "job", e.ts_ns);
          break;
        case trace_kind::job_end:
          end_slice("job", e.ts_ns);
          break;
        case trace_kind::sleep_begin:
          begin_slice("sleep", "worker", e.ts_ns);
          break;
        case trace_kind::sleep_end:
          end_slice("sleep", e.ts_ns);
          break;
        case trace_kind::unpark: {
          instant("unpark", e, "by");
          // The arrow to the woken fiber's next run, if the trace holds it.
          const auto it = runs.find(e.a);
          if (it == runs.end()) break;
          const auto next =
              std::upper_bound(it->second.begin(), it->second.end(), std::make_pair(e.ts_ns, 0u));
          if (next == it->second.end()) break;
          const std::string id = "\"cat\":\"wake\",\"id\":" + std::to_string(++flow);
          out.event('s', "wake", tid, e.ts_ns, id);
          out.event('f', "wake", next->second, next->first, id + ",\"bp\":\"e\"");
          break;
        }
        case trace_kind::steal:
          instant("steal", e, "from_worker");
          break;
        case trace_kind::create:
          instant("create", e, "by");
          break;
        case trace_kind::io_ready:
          out.event(
              'i', "I/O ready", tid, e.ts_ns,
              "\"cat\":\"io\",\"s\":\"t\",\"args\":{\"descriptors\":" + std::to_string(e.b) + "}");
          break;
      }
    }
    close_to(0, last);  // slices the trace ends inside
  }
  os << "\n]}\n";
}

}  // namespace tessera::sched
