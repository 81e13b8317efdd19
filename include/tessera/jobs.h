// tessera/jobs.h — the job system: everything a game engine's frame needs,
// on Tessera's scheduler.
//
//   task_group        run jobs, wait for them (tessera/task_group.h)
//   parallel_for, parallel_for_each, parallel_reduce, parallel_invoke,
//   blocked_range     the parallel algorithms (tessera/parallel.h)
//   task_graph        a reusable dependency graph run once per frame
//                     (tessera/task_graph.h)
//   pinned_queue      jobs for a thread that is not a worker (tessera/pinned_queue.h)
//   wait_group        the counter a job waits on mid-way (Naughty Dog's
//                     counters): wait() parks only the job (tessera/wait_group.h)
//
// What a job is. A callable queued on a runtime's workers and run there on a
// worker's runner fiber, inline: starting one costs a deque push and pop, not
// a fiber. A job may block on anything Tessera offers (mutex, wait_group,
// channel, socket): its runner parks, the worker takes another runner (a
// recycled fiber with a warm stack) and goes on. So, unlike a oneTBB task, a
// job that waits never holds its worker. Fibers resumed from a park run before
// new jobs; a runner steps aside for them every 32 jobs.
//
// Priorities (tessera::priority: high, normal, low). A worker takes the most
// urgent job it can see — its own queue, the global queue (jobs from plain
// threads), then the other workers' queues — except that among any 16
// consecutive job picks of one worker one starts at low and one at normal. So
// while low jobs are queued, at least one in 16 of a worker's picks runs one:
// low work slows under a flood of high work but never starves. A high job
// queued behind running low jobs waits at most for the jobs already running
// on the workers to end (a job is never preempted) plus, per worker, the one
// pick in 16 that goes to a lower class.
//
// Stack depth. Waiting in a job helps with other jobs nested on the waiter's
// stack while 64 KiB of it are left (or half the stack, if smaller); deeper,
// the waiter parks and its jobs run on other runners' stacks. Recursion of
// nested task groups is therefore bounded by the work, not by one stack.
#pragma once

// clang-format off
#include "tessera/parallel.h"
#include "tessera/pinned_queue.h"
#include "tessera/priority.h"
#include "tessera/task_graph.h"
#include "tessera/task_group.h"
#include "tessera/wait_group.h"
// clang-format on
