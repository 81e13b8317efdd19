// tessera/tessera.h — everything Tessera offers, in one include.
//
// Per-area headers, if you prefer:
//   <tessera/park.h>               self/park/park_until/unpark (the park façade)
//   <tessera/runtime.h>            Runtime, fiber, spawn, this_fiber, fiber_local
//   <tessera/wait_chain.h>         address_wait_until, address_signal, key_monitor/key_wait/key_signal
//   <tessera/atomic_wait.h>        atomic_wait, atomic_notify_one/all (P0514)
//   <tessera/channel.h>            channel<T> (buffered or rendezvous, closable)
//   <tessera/condition_variable.h> condition_variable, condition_variable_any, condition_variable_atomic
//   <tessera/event.h>              auto_reset_event, manual_reset_event
//   <tessera/latch.h>              latch, barrier, wait_group
//   <tessera/mutex.h>              mutex, timed_mutex, recursive_mutex, recursive_timed_mutex
//   <tessera/shared_mutex.h>       shared_mutex, shared_timed_mutex, preshing_shared_mutex
//   <tessera/semaphore.h>          counting_semaphore, binary_semaphore (TWA)
//   <tessera/ticket_semaphore.h>   ticket_semaphore (Listing 1, baseline)
//   <tessera/twa_spin_semaphore.h> twa_spin_semaphore (Listing 2, spinning waiting array)
#pragma once

#include <tessera/atomic_wait.h>
#include <tessera/channel.h>
#include <tessera/condition_variable.h>
#include <tessera/event.h>
#include <tessera/latch.h>
#include <tessera/mutex.h>
#include <tessera/park.h>
#include <tessera/runtime.h>
#include <tessera/semaphore.h>
#include <tessera/shared_mutex.h>
#include <tessera/ticket_semaphore.h>
#include <tessera/twa_spin_semaphore.h>
#include <tessera/wait_chain.h>
#include <tessera/version.h>
