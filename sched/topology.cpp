// Worker placement and steal order from hwloc (see topology.h).
#include "topology.h"

#include <hwloc.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <thread>

namespace tessera::sched {

topology::topology() {
  hwloc_topology_t t = nullptr;
  // Only the CPUs this process may run on (its affinity mask: taskset, a
  // cgroup's cpuset): a runtime started under `taskset -c 1` must neither
  // count nor pin to CPU 0.
  if (hwloc_topology_init(&t) == 0 &&
      hwloc_topology_set_flags(t, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM |
                                      HWLOC_TOPOLOGY_FLAG_RESTRICT_TO_CPUBINDING) == 0 &&
      hwloc_topology_load(t) == 0) {
    topo_ = t;
    const int cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
    const int pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
    if (cores > 0 && pus > 0) {
      cores_ = static_cast<unsigned>(cores);
      pus_ = static_cast<unsigned>(pus);
      from_hwloc_ = true;
    }
  } else if (t != nullptr) {
    hwloc_topology_destroy(t);
  }
  if (!from_hwloc_) {
    cores_ = std::max(1u, std::thread::hardware_concurrency());
    pus_ = cores_;
  }
}

topology::~topology() {
  if (topo_ != nullptr) hwloc_topology_destroy(static_cast<hwloc_topology_t>(topo_));
}

void topology::plan(unsigned workers) {
  worker_pu_.assign(workers, nullptr);
  steal_order_.assign(workers, {});
  auto* t = static_cast<hwloc_topology_t>(topo_);
  if (from_hwloc_) {
    for (unsigned i = 0; i < workers; ++i) {
      hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, i % cores_);
      if (core == nullptr) continue;
      const int pus_in_core = hwloc_get_nbobjs_inside_cpuset_by_type(t, core->cpuset, HWLOC_OBJ_PU);
      if (pus_in_core <= 0) continue;
      const unsigned which = (i / cores_) % static_cast<unsigned>(pus_in_core);
      worker_pu_[i] = hwloc_get_obj_inside_cpuset_by_type(t, core->cpuset, HWLOC_OBJ_PU, which);
    }
  }
  for (unsigned i = 0; i < workers; ++i) {
    auto& order = steal_order_[i];
    for (unsigned j = 0; j < workers; ++j) {
      if (j != i) order.push_back(j);
    }
    auto closeness = [&](unsigned j) -> int {
      auto* a = static_cast<hwloc_obj_t>(worker_pu_[i]);
      auto* b = static_cast<hwloc_obj_t>(worker_pu_[j]);
      if (a == nullptr || b == nullptr) return 0;
      hwloc_obj_t common = hwloc_get_common_ancestor_obj(t, a, b);
      return common != nullptr ? common->depth : 0;
    };
    auto distance = [&](unsigned j) { return (j + workers - i) % workers; };
    std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) {
      const int ca = closeness(a), cb = closeness(b);
      return ca != cb ? ca > cb : distance(a) < distance(b);
    });
  }
  std::ostringstream d;
  d << workers << (workers == 1 ? " worker" : " workers") << " on " << cores_
    << (cores_ == 1 ? " core / " : " cores / ") << pus_ << (pus_ == 1 ? " PU" : " PUs");
  if (from_hwloc_) {
    d << " (hwloc); PUs:";
    for (unsigned i = 0; i < workers; ++i) {
      auto* pu = static_cast<hwloc_obj_t>(worker_pu_[i]);
      if (pu != nullptr) {
        d << ' ' << pu->os_index;
      } else {
        d << " -";
      }
    }
  } else {
    d << " (hwloc reported no cores: using std::thread::hardware_concurrency(), no pinning)";
  }
  description_ = d.str();
}

bool topology::pin_current_thread(unsigned index) const noexcept {
  if (!from_hwloc_ || index >= worker_pu_.size() || worker_pu_[index] == nullptr) return false;
  auto* t = static_cast<hwloc_topology_t>(topo_);
  auto* pu = static_cast<hwloc_obj_t>(worker_pu_[index]);
  return hwloc_set_cpubind(t, pu->cpuset, HWLOC_CPUBIND_THREAD) == 0;
}

}  // namespace tessera::sched
