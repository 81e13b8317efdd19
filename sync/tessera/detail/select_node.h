// tessera/detail/select_node.h — the claim that lets one select() wait on
// several channels at once (tessera/select.h). A waiting select enlists a
// node in every channel it waits on; each node points at the select's one
// `select_state`. Whoever would serve a node (a counterpart, or close())
// first claims the select, under that channel's lock: a compare-and-swap of
// `claimed` from kOpen to the node's case index. Exactly one claim succeeds,
// or the select's own deadline does (kOpen to kTimedOut); a node whose claim
// fails is unlinked and passed over. The protocol is model-checked in
// tests/model/select_claim.pml.
#pragma once

#include <atomic>

#include "tessera/detail/park_list.h"

namespace tessera::detail {

struct select_state {
  static constexpr int kOpen = -1;
  static constexpr int kTimedOut = -2;
  std::atomic<int> claimed{kOpen};
};

/// A parked channel party: a plain caller (sel == nullptr) or a select's case.
struct channel_node : park_node {
  select_state* sel = nullptr;
  int index = 0;        // the select's case index
  bool linked = false;  // a select's node: still on its channel's list (under its lock)

  /// Whether this node may be served: always for a plain caller; for a
  /// select's, only by the one claim that wins.
  bool claim() noexcept {
    if (sel == nullptr) return true;
    int open = select_state::kOpen;
    return sel->claimed.compare_exchange_strong(open, index, std::memory_order_acq_rel);
  }
};

template <class T>
class select_arm_of;

}  // namespace tessera::detail
