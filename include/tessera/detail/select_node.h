// tessera/detail/select_node.h — the claim that lets one select() wait on
// several channels at once (tessera/select.h). A waiting select enlists a
// node in every channel it waits on; each node points at the select's one
// `select_state`. Whoever would serve a node (a counterpart, or close())
// first claims the select, under that channel's lock: a compare-and-swap of
// `claimed` from kOpen to the node's case index. Exactly one claim succeeds,
// or the select's own deadline does (kOpen to kTimedOut); a node whose claim
// fails is unlinked and passed over. The protocol is model-checked in
// tests/model/select_claim.pml.
//
// Over lock-free channels (tessera/lockfree_channel.h) there is no lock to
// hold while a select enlists, so the claim word has a registration phase
// (kotlinx.coroutines' SelectImplementation, after Koval, Alistarh &
// Elizarov): while the select takes a cell in each channel it is
// kRegistering, and nobody but the select may claim it then — a counterpart
// that meets one of its cells marks that case bounced (kReregister), gives
// the cell up and takes the next one; the select, at the end of its pass,
// registers the bounced cases again before it opens (kOpen) and parks. So a
// case the select finds ready while registering is its own to carry out.
// Model: tests/model/lockfree_select.pml.
#pragma once

#include <atomic>

#include "tessera/detail/park_list.h"

namespace tessera::detail {

struct select_state {
  static constexpr int kOpen = -1;
  static constexpr int kTimedOut = -2;
  static constexpr int kRegistering = -3;  // lock-free select: enlisting its cases
  static constexpr int kReregister = -4;   // ... and a counterpart bounced one
  std::atomic<int> claimed{kOpen};

  /// A counterpart's claim of case `index` of a lock-free select. True: it
  /// won and serves the case. False: another case or the deadline won, or
  /// the select is still registering — then `bounced` is set and the select
  /// will register the case again.
  bool claim_or_bounce(int index, std::atomic<bool>& bounced) noexcept {
    int cur = claimed.load(std::memory_order_acquire);
    for (;;) {
      if (cur == kOpen) {
        if (claimed.compare_exchange_weak(cur, index, std::memory_order_acq_rel)) return true;
        continue;
      }
      if (cur != kRegistering && cur != kReregister) return false;
      // The flag first: the select reads it after the kReregister it sees.
      bounced.store(true, std::memory_order_relaxed);
      if (claimed.compare_exchange_weak(cur, kReregister, std::memory_order_acq_rel)) return false;
    }
  }
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
