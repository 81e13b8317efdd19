// sched/stall_backtrace.h — the registers of what another thread runs right
// now, for the stall report (internal; not installed).
//
// A stalled fiber is running, so its registers are live in its worker, not
// saved anywhere: the watchdog sends the worker SIGURG (as Go's preemption
// does: ignored by default, and rarely used for its original purpose, a
// socket's urgent data) and the handler copies the interrupted registers out
// of its ucontext — plain stores, nothing else, so the handler is safe
// wherever it lands (an unwinder or the allocator called from a signal
// handler can deadlock on a lock the interrupted code holds). The watchdog
// then walks the stack from those registers itself (stack_trace.h), reading
// within the fiber's stack only. A SIGURG that does not answer our request
// goes on to the handler installed before ours, or is ignored as by default.
#pragma once

#include <pthread.h>

#include <chrono>
#include <optional>

#include "stack_trace.h"

namespace tessera::sched {

/// The registers of what `thread` runs, taken by a signal, or nothing if it
/// did not answer within `timeout` (a thread blocked with SIGURG masked).
/// Any thread but `thread`; concurrent calls take turns. Not called in a
/// ThreadSanitizer build (sched/watchdog.cpp says why).
std::optional<register_set> registers_of_thread(pthread_t thread,
                                                std::chrono::milliseconds timeout);

}  // namespace tessera::sched
