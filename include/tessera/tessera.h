// tessera/tessera.h — everything Tessera offers, in one include.
// clang-format off
//
// Per-area headers, if you prefer:
//   <tessera/park.h>               self/park/park_until/unpark (the park façade)
//   <tessera/runtime.h>            runtime, fiber, spawn, this_fiber, fiber_local
//   <tessera/io.h>                 io::descriptor (fiber-aware reads and writes, deadlines), io::blocking
//   <tessera/net.h>                net::tcp_listener, net::tcp_stream (Go's net, Asio's names)
//   <tessera/wait_chain.h>         address_wait_until, address_signal, key_monitor/key_wait/key_signal
//   <tessera/location_wait.h>      location_wait, location_wake_all (Listing 5)
//   <tessera/atomic_wait.h>        atomic_wait(_explicit), atomic_notify_one/all (P0514)
//   <tessera/semaphore.h>          counting_semaphore, binary_semaphore (TWA)
//   <tessera/mutex.h>              mutex, timed_mutex, recursive_mutex, recursive_timed_mutex
//   <tessera/shared_mutex.h>       shared_mutex, shared_timed_mutex
//   <tessera/condition_variable.h> condition_variable, condition_variable_any, condition_variable_atomic
//   <tessera/event.h>              auto_reset_event, manual_reset_event
//   <tessera/latch.h>              latch
//   <tessera/barrier.h>            barrier
//   <tessera/wait_group.h>         wait_group
//   <tessera/channel.h>            channel<T> (buffered or rendezvous, closable)
//   <tessera/lockfree_channel.h>   lockfree_channel<T> (channel<T>'s contract, no lock on any path)
//   <tessera/select.h>             select, try_select, select_for/until, recv_case, send_case
//   <tessera/blocking_pool.h>      blocking_pool<T, pool_order> (take waits while empty)
//   <tessera/blocking_stack.h>     blocking_stack<T> (pop waits while empty)
//   <tessera/jobs.h>               task_group, parallel_for/_each/_reduce/_invoke, task_graph, pinned_queue, priority
//   <tessera/version.h>            TESSERA_VERSION_*, tessera::version
// clang-format on
#pragma once

#include <tessera/atomic_wait.h>
#include <tessera/barrier.h>
#include <tessera/blocking_pool.h>
#include <tessera/blocking_stack.h>
#include <tessera/channel.h>
#include <tessera/condition_variable.h>
#include <tessera/event.h>
#include <tessera/io.h>
#include <tessera/jobs.h>
#include <tessera/latch.h>
#include <tessera/location_wait.h>
#include <tessera/lockfree_channel.h>
#include <tessera/mutex.h>
#include <tessera/net.h>
#include <tessera/park.h>
#include <tessera/runtime.h>
#include <tessera/select.h>
#include <tessera/semaphore.h>
#include <tessera/shared_mutex.h>
#include <tessera/version.h>
#include <tessera/wait_chain.h>
#include <tessera/wait_group.h>
