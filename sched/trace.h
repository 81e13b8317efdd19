// sched/trace.h — the scheduler's event trace (runtime_options::trace_events;
// internal, not installed).
//
// Each worker writes its own ring of events, with no lock and no atomic
// read-modify-write; runtime::write_trace reads the rings once the workers
// have stopped (trace.cpp turns them into Chrome trace-event JSON). An event
// site costs a load of the worker's ring pointer and a predictable branch
// while tracing is off.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <vector>

namespace tessera::sched {

enum class trace_kind : std::uint8_t {
  run_begin,    // a = the fiber now running
  run_end,      // a = the fiber, b = why (trace_end), text = what it parked on
  unpark,       // a = the woken fiber, b = the waker (0: not a fiber)
  steal,        // a = the stolen fiber, b = the worker it came from
  create,       // a = the new fiber, b = its creator (0: not a fiber)
  sleep_begin,  // the worker goes to sleep
  sleep_end,
  io_ready,  // b = how many descriptors became ready
  job_begin,
  job_end,
};

/// Why a fiber's run ended (trace_kind::run_end's b).
enum class trace_end : std::uint8_t { parked, yielded, finished };

struct trace_event {
  std::int64_t ts_ns;  // steady_clock, nanoseconds since its epoch (in the ring: TSC ticks)
  std::uint64_t a;
  std::uint64_t b;
  const char* text;  // static storage, or null
  trace_kind kind;
};

/// One worker's ring: the last `capacity` events it recorded.
///
/// Events are stamped with the CPU's time-stamp counter (a few cycles, where
/// a steady_clock read costs a few tens of nanoseconds: a trace of a
/// million-job skynet paid more for its clock reads than for the rest), and
/// events() converts the stamps to steady_clock nanoseconds by the counter's
/// rate between the ring's creation and the call. x86-64's TSC is invariant
/// and synchronised between cores on the CPUs the project meets; elsewhere
/// the stamps are steady_clock's.
class trace_ring {
 public:
  explicit trace_ring(std::size_t capacity)
      : events_(capacity), tsc0_(stamp()), ns0_(steady_ns()) {}
  void add(trace_kind k, std::uint64_t a = 0, std::uint64_t b = 0,
           const char* text = nullptr) noexcept {
    events_[next_ % events_.size()] = {static_cast<std::int64_t>(stamp()), a, b, text, k};
    ++next_;
  }
  /// The events still held, oldest first, stamped in steady_clock nanoseconds.
  std::vector<trace_event> events() const;

  static std::uint64_t stamp() noexcept {
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#else
    return static_cast<std::uint64_t>(steady_ns());
#endif
  }
  static std::int64_t steady_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

 private:
  std::vector<trace_event> events_;
  std::uint64_t next_ = 0;  // events recorded so far
  std::uint64_t tsc0_;      // stamp() and steady_ns() at creation
  std::int64_t ns0_;
};

/// Writes the workers' rings as Chrome trace-event JSON: one track per
/// worker, a slice per fiber run (nested: the jobs it ran), a slice per
/// sleep, instants for the rest, and a flow arrow from each unpark to the
/// woken fiber's next run. Slices cut by a ring's wrap-around are dropped at
/// the start and closed at the end, so every slice nests.
/// `names`: fiber id and name, in the order given (the latest wins), for
/// the slices' titles.
void write_trace_json(std::ostream& os, const std::vector<const trace_ring*>& rings,
                      const std::vector<std::pair<std::uint64_t, std::string>>& names);

}  // namespace tessera::sched
