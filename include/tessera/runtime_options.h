// tessera/runtime_options.h — how a tessera::runtime is set up (a plain
// aggregate, shared by the public runtime and the engine under it).
#pragma once

#include <chrono>
#include <cstddef>

namespace tessera {

/// Which kernel interface a runtime's I/O poller uses (runtime_options::io).
/// - automatic: epoll, the faster of the two as measured (docs/benchmarks.md).
///   The environment variable TESSERA_IO_BACKEND (`epoll` or `io_uring`)
///   overrides it.
/// - epoll: edge-triggered epoll.
/// - io_uring: multishot IORING_OP_POLL_ADD through liburing (Linux 5.13; a
///   probe checks that a ring can be made and a multishot poll stays armed —
///   containers often forbid io_uring); the runtime's constructor throws
///   std::system_error when the kernel refuses it.
/// Both deliver the same readiness to the same waiters; runtime::describe()
/// says which one runs.
enum class io_backend { automatic, epoll, io_uring };

/// What a runtime does when it finds itself deadlocked (runtime_options::on_deadlock).
/// - raise: print the deadlock report to stderr; run() — or stop(), for a
///   runtime started with start() — then throws tessera::deadlock_error,
///   whose what() is the report. The parked fibers are abandoned: they never
///   resume, and their stacks are not reclaimed.
/// - abort: print the report, then std::abort() (a core dump to look at).
/// - report: print the report and go on waiting; a later deadlock, or the
///   same one after something changed, is reported again.
/// - off: do not look.
enum class deadlock_policy { raise, abort, report, off };

/// How a runtime is set up. An aggregate: `runtime rt({.workers = 2});`.
struct runtime_options {
  /// Worker threads; 0 means one per core that hwloc reports among the CPUs
  /// the process may run on (its affinity mask: `taskset -c 1 app` gets one
  /// worker, pinned to CPU 1).
  unsigned workers = 0;
  /// Pin each worker to its hardware thread (hwloc_set_cpubind), within the
  /// process's affinity mask. Ignored where the topology is unknown.
  bool pin_workers = true;
  /// Usable stack bytes per fiber, rounded up to whole pages (minimum 16 KiB).
  /// Pages are committed on first touch, so unused stack costs address space only.
  std::size_t stack_size = 256 * 1024;
  /// Put a PROT_NONE guard page below every stack, so an overflow is reported
  /// (naming the fiber) instead of corrupting memory. Each guarded stack takes two
  /// kernel mappings; Linux's default vm.max_map_count (65530) then caps a process
  /// near 32,000 live fibers.
  bool guard_pages = true;
  /// Bytes of the PROT_NONE guard region below each stack (rounded up to whole
  /// pages; at least one page) when guard_pages is set. A function whose frame
  /// is larger than the guard could jump over it into other memory, so the
  /// guard should be at least the largest frame fiber code makes. Code built
  /// with -fstack-clash-protection (the flag tessera::tessera passes on to
  /// its users' GCC and Clang builds) probes every page of a large frame and
  /// cannot jump it whatever its size. Costs address space, not memory.
  std::size_t guard_size = 64 * 1024;
  /// How long an idle worker keeps looking for work before it sleeps, in µs.
  /// Once the runtime does I/O, the look is a non-blocking poll of its
  /// descriptors, not a PAUSE loop. 0: sleep at once — on a machine whose
  /// cores are shared (a VM), a latency-bound client with one connection
  /// runs faster so (bench/netbench.sh's load generator does).
  std::chrono::microseconds idle_spin{50};
  /// The I/O poller's kernel interface (see io_backend).
  io_backend io = io_backend::automatic;
  /// What to do on a deadlock (see deadlock_policy). A runtime is deadlocked
  /// when something waits for it to finish (run(), or stop()), fibers are
  /// left, every one of them is parked, and nothing the runtime knows of can
  /// wake them: no timer is pending (so no sleep and no timed wait), no fiber
  /// waits on a descriptor or in io::blocking(), no job is queued and every
  /// worker sleeps — and all of that has held, with no fiber's wait changing
  /// and no OS thread sleeping or waking in a primitive (threads outside the
  /// runtime that still use them may yet wake a fiber), for `deadlock_grace`.
  deadlock_policy on_deadlock = deadlock_policy::raise;
  /// How long a deadlock must hold before it is reported, in milliseconds. A
  /// plain OS thread outside the runtime may still unpark a fiber: one that
  /// does so within the grace is never taken for a deadlock; one that waits
  /// longer is indistinguishable from one, so a program whose fibers wait on
  /// such a thread raises the grace or chooses deadlock_policy::report.
  std::chrono::milliseconds deadlock_grace{1000};
  /// Report a stall: a fiber (or a job) that has held its worker this long
  /// without parking or yielding, in milliseconds — scheduling is
  /// cooperative, so it keeps every other fiber of that worker waiting. The
  /// report ("tessera: stall: fiber 7 has held worker 1 for 512 ms without
  /// parking or yielding") goes to stderr once per stall, from the runtime's
  /// watchdog thread; the switch path only counts its switches. 0: off.
  std::chrono::milliseconds stall_threshold{500};
  /// On SIGQUIT (Ctrl-\\ in a terminal), write this runtime's dump
  /// (runtime::dump) to stderr and go on running — Go prints its goroutines
  /// and exits; we leave that choice to the program. Installs a process-wide
  /// SIGQUIT handler (async-signal-safe: it only wakes a dumper thread)
  /// when the first such runtime is built; the handler stays.
  bool dump_on_sigquit = false;
  /// Record a trace of scheduler events: each worker keeps its last
  /// `trace_events` events (a ring; older ones are dropped) — fiber runs
  /// (with why each ended: parked on what, yielded, finished), unparks (who
  /// woke whom), steals, fiber creations, worker sleeps, I/O readiness and
  /// jobs. runtime::write_trace() writes them as Chrome trace-event JSON for
  /// Perfetto (ui.perfetto.dev) or chrome://tracing. 0: off, and then each
  /// event site costs one predictable branch. 48 bytes per event.
  std::size_t trace_events = 0;
};

}  // namespace tessera
