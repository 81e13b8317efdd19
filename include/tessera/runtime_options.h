// tessera/runtime_options.h — how a tessera::runtime is set up (a plain
// aggregate, shared by the public runtime and the engine under it).
#pragma once

#include <chrono>
#include <cstddef>

namespace tessera {

/// Which kernel interface a runtime's I/O uses (runtime_options::io).
/// - automatic: whichever measured faster on this kind of machine
///   (docs/benchmarks.md, "Completion or readiness"), if the kernel has it:
///   today epoll. The environment variable TESSERA_IO_BACKEND (`epoll`,
///   `io_uring` or `io_uring_poll`) overrides it.
/// - epoll: readiness by edge-triggered epoll; reads and writes are recv(2)
///   and send(2) calls that park on EAGAIN.
/// - io_uring: completion. Stream reads (tcp_stream::read_some, also over
///   Unix-domain sockets) complete in the ring: one multishot receive per
///   stream fills buffers from a provided-buffer ring (io_buffers of
///   io_buffer_size bytes, per runtime) and the reader copies from them with
///   no system call; writes from fibers are send SQEs, submitted together
///   with the worker's next poll of the ring; listeners accept by multishot
///   accept. Everything else waits for readiness as io_uring_poll does.
///   Needs Linux 6.0 (multishot receive, provided-buffer rings, asynchronous
///   cancel by descriptor).
/// - io_uring_poll: readiness by multishot IORING_OP_POLL_ADD (Linux 5.13),
///   with the same recv(2)/send(2) calls as epoll.
/// A probe checks, once per process, that a ring can be made and does what
/// the backend needs (containers often forbid io_uring); the runtime's
/// constructor throws std::system_error when an io_uring backend was asked
/// for and the kernel refuses it. All three keep io.h's contract: the same
/// deadlines, close() and cancellation, and no byte lost — see io.h for what
/// the completion backend adds. runtime::describe() says which one runs.
enum class io_backend { automatic, epoll, io_uring, io_uring_poll };

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
  /// How long an idle worker keeps looking for work before it sleeps, in µs,
  /// until the runtime does I/O (then io_idle_spin). 0: sleep at once.
  std::chrono::microseconds idle_spin{50};
  /// How long an idle worker of a runtime that does I/O keeps polling its
  /// descriptors (and looking for work) before it sleeps, in µs. Each
  /// microsecond is CPU spent while nothing arrives: at 20,000 requests/s
  /// over 100 connections, 50 µs doubled the HTTP server's CPU per request;
  /// 10 µs kept a one-connection round trip as fast as 50 (a sleeping
  /// worker's wake-up is what it saves) for a third of that cost
  /// (docs/benchmarks.md, "Completion or readiness"). 0: sleep at once.
  std::chrono::microseconds io_idle_spin{10};
  /// The I/O poller's kernel interface (see io_backend).
  io_backend io = io_backend::automatic;
  /// io_backend::io_uring: how many receive buffers the runtime's provided-
  /// buffer ring holds (a power of two, 1 to 32768). A buffer is taken when
  /// bytes arrive and given back once read_some has copied them out, so idle
  /// connections hold none; when all are taken, receives fall back to
  /// recv(2) until some come back (nothing is lost, only the saving). At
  /// 1,000 busy connections 1,024 ran dry now and then (1.15 system calls
  /// per HTTP request against 1.04 with 2,048; docs/benchmarks.md).
  unsigned io_buffers = 2048;
  /// io_backend::io_uring: bytes per receive buffer (256 to 1 MiB). The
  /// ring's memory is io_buffers × io_buffer_size, reserved when the first
  /// stream reads (and committed page by page as buffers are first used).
  std::size_t io_buffer_size = 4096;
  /// io_backend::io_uring: writes of at least this many bytes go out as
  /// zero-copy sends (IORING_OP_SEND_ZC; the writer resumes once the kernel
  /// no longer needs its buffer). 0: never. Off by default: over loopback
  /// that waits for the peer's reading and ACK — 16 KiB echoes ran at a
  /// hundredth of the rate (docs/benchmarks.md).
  std::size_t send_zc_threshold = 0;
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
