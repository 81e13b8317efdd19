// Waiting chains: the process-wide table and the non-inline halves of Listings 3 and 4.
#include "tessera/wait_chain.h"

namespace tessera {
namespace detail {

// Listing 3: "Empirically, 4096 elements is a reasonable choice"; aligned to a page
// so the table spans as few TLB entries as possible. 16-byte slots: TWAHash's
// stride of 17 puts consecutive tickets 272 bytes apart, on different lines.
static_assert((chain_count & (chain_count - 1)) == 0, "chain_count must be a power of two");
alignas(4096) constinit wait_chain chain_table[chain_count];

bool await_gate_until(wait_element& e, detail::deadline deadline) {
  // acquire: pairs with poke's release store.
  while (e.gate.load(std::memory_order_acquire) == 0) {
    if (!park_until(*deadline)) return e.gate.load(std::memory_order_acquire) != 0;
  }
  return true;
}

void withdraw(wait_chain& c, wait_element& e, wait_element* prv) noexcept {
  // Undo the push if nobody pushed or detached since: e is still the head and the
  // suffix beneath it is intact (no ABA: only we ever push &e).
  wait_element* seen = &e;
  if (c.head.compare_exchange_strong(seen, prv)) return;
  if (seen != nullptr && e.gate.load(std::memory_order_acquire) == 0) {
    // Others pushed above e and no detach reached e yet: flush the chain. Poke
    // the older suffix first (Listing 3's QoI note), then the detached prefix.
    // If a concurrent signaller detached e in between, `prefix` lacks e and that
    // signaller's propagation reaches e instead; either way e's gate opens.
    wait_element* const prefix = c.head.exchange(nullptr);
    poke(prv);
    poke(prefix);
  } else {
    // e was detached by a signaller (the chain is empty or e's gate is open):
    // its propagation reaches e; we still owe e's successor its poke.
    poke(prv);
  }
  await_gate(e, {});  // e must be unreachable before its stack frame dies
}

}  // namespace detail

void address_signal(std::uintptr_t key) noexcept {
  // The exchange is a seq_cst RMW: it orders the caller's condition store before
  // the chain read, whatever order that store used.
  detail::signal_chain(detail::chain_for_key(key));
}

void address_signal_polite(std::uintptr_t key) noexcept {
#if defined(__SANITIZE_THREAD__)
  // TSan does not model fences: use the exchange form, whose RMW on the chain
  // head orders the condition store by itself (see address_signal).
  detail::signal_chain(detail::chain_for_key(key));
#else
  // Fence: the polite form only loads the chain, so a seq_cst fence keeps the
  // caller's (possibly relaxed or release) condition store before that load.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  detail::signal_chain_polite(detail::chain_for_key(key));
#endif
}

std::uint64_t key_monitor(std::uintptr_t key) noexcept {
  return detail::chain_for_key(key).sequence.load(std::memory_order_acquire);
}

void key_wait(std::uintptr_t key, std::uint64_t sequence) {
  auto& c = detail::chain_for_key(key);
  auto changed = [&] { return c.sequence.load(std::memory_order_seq_cst) != sequence; };
  detail::chain_wait(c, changed, {});
}

bool key_wait_until(std::uintptr_t key, std::uint64_t sequence,
                    std::chrono::steady_clock::time_point deadline) {
  auto& c = detail::chain_for_key(key);
  auto changed = [&] { return c.sequence.load(std::memory_order_seq_cst) != sequence; };
  return detail::chain_wait(c, changed, deadline);
}

void key_signal(std::uintptr_t key) noexcept {
  auto& c = detail::chain_for_key(key);
  c.sequence.fetch_add(1, std::memory_order_seq_cst);  // RMW: also the Dekker pivot
  detail::signal_chain(c);
}

void key_signal_polite(std::uintptr_t key) noexcept {
  auto& c = detail::chain_for_key(key);
  c.sequence.fetch_add(1, std::memory_order_seq_cst);
  detail::signal_chain_polite(c);
}

}  // namespace tessera
