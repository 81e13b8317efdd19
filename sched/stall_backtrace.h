// sched/stall_backtrace.h — the backtrace of what another thread runs right
// now, for the stall report (internal; not installed).
//
// A stalled fiber is running, so its registers are live in its worker, not
// saved anywhere: the watchdog sends the worker SIGURG (as Go's preemption
// does: ignored by default, and rarely used for its original purpose, a
// socket's urgent data) and the handler records the interrupted stack with
// glibc's backtrace(). A SIGURG that does not answer our request goes on to
// the handler installed before ours, or is ignored as by default.
#pragma once

#include <pthread.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace tessera::sched {

/// The code addresses of what `thread` runs, innermost first (starting at
/// the interrupted instruction), or empty if it did not answer within
/// `timeout` (a thread blocked with SIGURG masked, or under
/// ThreadSanitizer, which delivers signals late). Any thread but `thread`;
/// concurrent calls take turns.
std::vector<std::uintptr_t> backtrace_of_thread(pthread_t thread,
                                                std::chrono::milliseconds timeout);

}  // namespace tessera::sched
