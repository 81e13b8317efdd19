// tessera/task_graph.h — task_graph: a reusable graph of jobs with
// dependencies, built once and run once per frame (in the style of Taskflow
// and oneTBB's flow graph).
//
//   tessera::task_graph frame;
//   auto anim = frame.emplace([&] { animate(); });
//   auto phys = frame.emplace([&] { simulate(); });
//   auto cull = frame.emplace([&] { cull(); });
//   anim.precede(cull);
//   phys.precede(cull);
//   for (;;) frame.run(rt);                    // no rebuilding between runs
//
// Contract
// - A run executes every node exactly once, each after all its predecessors
//   have finished (happens-before), on the workers of the given runtime (or
//   the caller's), as jobs (tessera/task_group.h says what a job may do: it
//   may park, e.g. on a wait_group, the Naughty Dog counter pattern). Nodes
//   with no path between them run in any order, concurrently.
// - run() waits for the whole run (helping, as task_group::wait); run_async()
//   starts it and returns, and wait() waits for it — so a thread can start
//   frame N+1 on a second graph while frame N finishes (pipelining).
// - Errors: a node's exception cancels the run (nodes not yet started skip
//   their body; their successors still run in dependency order with bodies
//   skipped) and wait()/run() rethrows it. A cycle is found when the run starts:
//   std::logic_error naming a node on it. run()/run_async() while a run of the
//   same graph is in progress, or emplace()/precede() during a run:
//   std::logic_error. A graph may be destroyed only when no run is in progress.
// - Who may call: one thread or fiber drives a graph at a time (not a node of
//   the same graph). Nodes' functions are called once per run, never
//   concurrently with themselves.
// - Each node has a priority (default normal; tessera/jobs.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "tessera/detail/job_scope.h"

namespace tessera {

class runtime;

class task_graph {
  struct node_data;

 public:
  /// A handle to one node of a graph; cheap to copy.
  class node {
   public:
    /// This node runs before `other` (an edge this → other). Returns *this.
    node& precede(node other);
    /// This node runs after `other`. Returns *this.
    node& succeed(node other);
    /// The node's index in the graph, 0-based in order of emplace().
    std::size_t index() const noexcept { return index_; }

   private:
    friend class task_graph;
    node(task_graph* g, std::size_t i) noexcept : graph_(g), index_(i) {}
    task_graph* graph_;
    std::size_t index_;
  };

  task_graph() = default;
  task_graph(const task_graph&) = delete;
  task_graph& operator=(const task_graph&) = delete;
  ~task_graph();

  /// Adds a node running f() once per run.
  template <class F>
  node emplace(F&& f, priority p = priority::normal) {
    return add(std::function<void()>(std::forward<F>(f)), p);
  }
  std::size_t size() const noexcept { return nodes_.size(); }

  /// Runs the graph once on `rt` (any thread) or on the caller's runtime (a
  /// fiber), and waits for it; rethrows a node's exception.
  void run(runtime& rt);
  void run();
  /// Starts a run and returns at once; wait() ends it.
  void run_async(runtime& rt);
  void run_async();
  /// Waits for the run started by run_async(); rethrows a node's exception.
  /// Without a run in progress, returns at once.
  void wait();

 private:
  struct node_data {
    std::function<void()> fn;
    priority prio = priority::normal;
    std::vector<std::size_t> successors;
    std::size_t predecessors = 0;
    std::atomic<std::size_t> waiting_for{0};  // predecessors not yet finished in this run
  };
  node add(std::function<void()> fn, priority p);
  void link(std::size_t from, std::size_t to);
  void start(detail::runtime_impl* rt);
  void check_acyclic() const;
  void check_idle(const char* who) const;
  void run_node(std::size_t i) noexcept;

  std::deque<node_data> nodes_;  // a deque: node_data holds an atomic (not movable)
  std::unique_ptr<detail::job_scope> scope_;
  std::atomic<bool> running_{false};
  bool checked_ = false;  // acyclic since the last edit
};

}  // namespace tessera
