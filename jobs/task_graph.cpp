// task_graph (tessera/task_graph.h): per run, every node's countdown is reset
// to its number of predecessors; roots are queued as jobs; a finishing node
// counts down its successors, queues every one that reaches zero but the
// last, and runs that one itself (continuation passing: a chain of nodes runs
// on one stack with no queue traffic).
#include "tessera/task_graph.h"

#include <stdexcept>
#include <string>

namespace tessera {

task_graph::~task_graph() {
  if (running_.load(std::memory_order_acquire)) {
    try {
      wait();
    } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor cannot report it
    }
  }
}

void task_graph::check_idle(const char* who) const {
  if (running_.load(std::memory_order_acquire)) {
    throw std::logic_error(std::string("tessera::task_graph::") + who +
                           ": a run of this graph is in progress");
  }
}

task_graph::node task_graph::add(std::function<void()> fn, priority p) {
  check_idle("emplace");
  node_data& d = nodes_.emplace_back();
  d.fn = std::move(fn);
  d.prio = p;
  checked_ = false;
  return node(this, nodes_.size() - 1);
}

void task_graph::link(std::size_t from, std::size_t to) {
  check_idle("precede");
  if (from == to) {
    throw std::logic_error("tessera::task_graph::precede: node " + std::to_string(from) +
                           " cannot precede itself");
  }
  nodes_[from].successors.push_back(to);
  ++nodes_[to].predecessors;
  checked_ = false;
}

task_graph::node& task_graph::node::precede(node other) {
  if (other.graph_ != graph_) {
    throw std::logic_error("tessera::task_graph::node::precede: the nodes belong to different graphs");
  }
  graph_->link(index_, other.index_);
  return *this;
}

task_graph::node& task_graph::node::succeed(node other) {
  other.precede(*this);
  return *this;
}

void task_graph::check_acyclic() const {
  // Kahn's algorithm; what is left over lies on (or behind) a cycle.
  std::vector<std::size_t> indegree(nodes_.size());
  std::vector<std::size_t> ready;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    indegree[i] = nodes_[i].predecessors;
    if (indegree[i] == 0) ready.push_back(i);
  }
  std::size_t seen = 0;
  while (!ready.empty()) {
    const std::size_t i = ready.back();
    ready.pop_back();
    ++seen;
    for (std::size_t s : nodes_[i].successors) {
      if (--indegree[s] == 0) ready.push_back(s);
    }
  }
  if (seen == nodes_.size()) return;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (indegree[i] != 0) {
      throw std::logic_error("tessera::task_graph::run: the graph has a cycle through node " +
                             std::to_string(i));
    }
  }
}

void task_graph::start(detail::runtime_impl* rt) {
  if (running_.exchange(true, std::memory_order_acq_rel)) {
    throw std::logic_error("tessera::task_graph::run: a run of this graph is in progress");
  }
  try {
    if (!checked_) {
      check_acyclic();
      checked_ = true;
    }
    if (!scope_ || scope_->rt() != rt) scope_ = std::make_unique<detail::job_scope>(rt);
    for (auto& d : nodes_) d.waiting_for.store(d.predecessors, std::memory_order_relaxed);
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i].predecessors == 0) {
        scope_->spawn_with(nodes_[i].prio, [this, i] { run_node(i); });
      }
    }
  } catch (...) {
    if (scope_ && scope_->pending() != 0) {
      scope_->cancel();
      try {
        scope_->wait();
      } catch (...) {  // NOLINT(bugprone-empty-catch): the first error is the one to report
      }
    }
    running_.store(false, std::memory_order_release);
    throw;
  }
}

void task_graph::run_node(std::size_t i) noexcept {
  for (;;) {
    node_data& d = nodes_[i];
    scope_->run_inline(d.fn);
    std::size_t next = SIZE_MAX;
    for (std::size_t s : d.successors) {
      // acq_rel: this node's effects reach the successor's body.
      if (nodes_[s].waiting_for.fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
      if (next != SIZE_MAX) {
        try {
          scope_->spawn_with(nodes_[next].prio, [this, next] { run_node(next); });
        } catch (...) {
          scope_->fail(std::current_exception());
          run_node(next);  // cannot queue it: run it here rather than lose it
        }
      }
      next = s;
    }
    if (next == SIZE_MAX) return;
    i = next;
  }
}

void task_graph::run_async(runtime& rt) {
  start(detail::impl_of(rt));
}
void task_graph::run_async() {
  start(detail::runtime_for("tessera::task_graph::run"));
}
void task_graph::run(runtime& rt) {
  run_async(rt);
  wait();
}
void task_graph::run() {
  run_async();
  wait();
}

void task_graph::wait() {
  if (!running_.load(std::memory_order_acquire)) return;
  struct end_run {
    std::atomic<bool>& running;
    ~end_run() { running.store(false, std::memory_order_release); }
  } end{running_};
  scope_->wait();
}

}  // namespace tessera
