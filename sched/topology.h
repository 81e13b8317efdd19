// sched/topology.h — where workers run and whom they steal from, from hwloc.
#pragma once

#include <string>
#include <vector>

namespace tessera::sched {

/// The placement of a runtime's workers, computed once from hwloc, over the
/// CPUs the process may run on (its affinity mask, as taskset or a cpuset
/// sets it; the union of its threads' masks when they differ).
///
/// Worker i goes to core i mod C (C = cores hwloc reports), on that core's
/// (i / C)-th hardware thread: distinct cores first, hyperthreads after, then
/// wrap around (more workers than PUs share PUs). Each worker's steal order lists
/// the other workers nearest first — deepest common ancestor in the hwloc tree
/// (same core, then shared L2/L3, then the NUMA node, then the machine), ties by
/// index distance.
///
/// Where hwloc reports no cores (some containers), the plan falls back to
/// std::thread::hardware_concurrency() with no pinning and says so in describe().
class topology {
 public:
  topology();
  ~topology();
  topology(const topology&) = delete;
  topology& operator=(const topology&) = delete;

  /// Cores hwloc reports (or the fallback count).
  unsigned cores() const noexcept { return cores_; }
  /// Prepares placement and steal orders for `workers` workers.
  void plan(unsigned workers);
  /// The steal order of worker `index` (after plan()).
  const std::vector<unsigned>& steal_order(unsigned index) const { return steal_order_[index]; }
  /// Pins the calling thread to worker `index`'s PU. Returns false if not possible.
  bool pin_current_thread(unsigned index) const noexcept;
  /// One line: cores, PUs, where the workers go, and any fallback.
  const std::string& describe() const noexcept { return description_; }

 private:
  void* topo_ = nullptr;          // hwloc_topology_t
  std::vector<void*> worker_pu_;  // hwloc_obj_t per worker (null: no pinning)
  std::vector<std::vector<unsigned>> steal_order_;
  unsigned cores_ = 0;
  unsigned pus_ = 0;
  bool from_hwloc_ = false;
  std::string description_;
};

}  // namespace tessera::sched
