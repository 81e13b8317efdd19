// tessera/lockfree_channel.h — lockfree_channel<T>: channel<T>'s API and
// guarantees (tessera/channel.h) with no lock on any send or receive path, for
// fibers and OS threads. Bounded, closable, FIFO; capacity 0 makes it a
// rendezvous channel.
//
// Contract (as channel<T>; the differences are marked)
// - Order: FIFO. Each send takes the next send index and each receive the next
//   receive index (fetch-and-add); the k-th send meets the k-th receive in
//   cell k. A send that returns success happens-before the receive that gets
//   its value. Parked senders waiting for room are served oldest first, and so
//   are parked receivers.
// - Rendezvous (capacity 0): send returns only once a receiver took the value;
//   try_send succeeds only if a receiver waits, try_receive only if a sender does.
// - Nothing is lost: a send that fails (closed, full, timeout) leaves its
//   argument untouched; a timed call served just as its deadline passed
//   reports success; close() never drops buffered values.
// - Blocking calls park the caller; an OS thread first polls for about 5 µs
//   (detail::kThreadPollNanos), as channel<T>'s threads do. No spurious
//   wake-ups are visible; timed calls never return `timeout` before the
//   deadline (steady_clock; durations in any std::chrono unit).
// - Who may call: any fiber or OS thread, mixed, any number of each; close()
//   by anyone, more than once.
// - Progress (the difference): no send or receive takes a lock. Waiting
//   happens where the contract waits (room, a value, a rendezvous), and in
//   one more place: a try_ call takes an index only where its counterpart
//   already has one, and if that counterpart has not yet filled the cell (a
//   few instructions, unless its thread is preempted there), it waits for it
//   — spinning, then yielding — rather than break the cell, which would let
//   the counterpart's value overtake later ones (tests/linearizability_test).
//   Likewise a try_send that finds the buffer full while a receive that has
//   its index has not yet moved the buffer's end waits for that move, rather
//   than report full a buffer that receive has already emptied a slot of.
//   One segment of 32 cells is allocated per 32 operations and reused once
//   every index has passed it (the free list is a lock-free stack). So a
//   thread stopped anywhere in a send or receive holds up the counterpart
//   that meets it in its cell, where a thread stopped inside channel<T>'s
//   lock holds up every caller. Known exception, cause open: at capacity 1 a
//   stopped receiver has also held up a second receiver (seen in about one
//   run in eight of tests/lockfree_channel_test's progress test, which
//   checks that at most two others are held).
// - Snapshots (size(), waiting_senders(), waiting_receivers()) are counts, not
//   walks, and may be momentarily off by the operations in flight.
// - Requirements on T: nothrow move constructible and destructible.
// - Misuse: destroying a channel while callers wait on it is undefined; debug
//   builds (TESSERA_CHECKS) abort with a message saying so.
// - select() (tessera/select.h) waits on several lock-free channels at once,
//   with the claim in the cells (below); not on a mix of both kinds.
// - Which to use: docs/design.md ("Channels") and docs/benchmarks.md compare
//   the two.
//
// Source: Koval, Alistarh & Elizarov, "Fast and Scalable Channels in Kotlin
// Coroutines" (PPoPP 2023), whose algorithm this is, written anew on the
// park façade; the rendezvous channel is the dual data structure of Koval &
// Elizarov, "Dual Data Structures. Fast Semaphore.". An infinite array of
// cells is reached by fetch-and-add on three indices: sends S, receives R,
// and (buffered channels) the buffer's end B, which starts at the capacity.
// The k-th send and the k-th receive meet in cell k. A send at s < B, or at
// s < R (its receiver is there or on its way), never waits; one at s >= B
// waits in its cell until a receive moves B past it (expand: the value enters
// the buffer) or its receiver takes the value. Every receive index moves B on
// by one (a receive that took a value or gave up waiting), so B - R
// stays the capacity; a cell whose waiting sender gave up wastes the move,
// and the expansion goes on to the next cell.
//
// Cells (one state word, and room for one T):
//   EMPTY          neither side has come
//   IN_BUFFER      B passed the cell before its sender came: it will not wait
//   BUFFERED       a sender left its value here
//   waiter*        a receiver, or a sender that may not buffer, waits here,
//                  parked; its record says where the value goes or comes from
//   BUSY           a counterpart (or the expansion, or close) claimed the
//                  waiter and is moving the value
//   DONE           the value passed; final
//   SENDER_GONE    the sender waiting here gave up (deadline): its receiver
//                  takes a new index, the expansion moves on
//   RECEIVER_GONE  the receiver waiting here gave up: its sender takes a new index
//   CLOSED         close() broke it (EMPTY or IN_BUFFER, or a waiter it woke)
//
// A select's case waits in a cell as any waiter does, its record pointing at
// the select's claim word (tessera/detail/select_node.h). Whoever would serve
// it (a counterpart, the expansion, close) first makes the cell BUSY, then
// claims the select: if another case or the deadline won, or the select is
// still registering its cases (it then registers this one again), the cell
// becomes SENDER_GONE or RECEIVER_GONE, as if the case had timed out.
//
// close(): sets the closed bit of the send index (fetch-or), which freezes
// which cells have senders (those below it), and breaks every EMPTY, IN_BUFFER
// or waiting cell between the send and receive indices, leaving BUFFERED ones
// for receivers to drain. A receive index at or past the frozen send index
// fails: closed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "tessera/detail/channel_common.h"
#include "tessera/detail/cpu.h"
#include "tessera/detail/deadline.h"
#include "tessera/detail/segment_list.h"
#include "tessera/detail/select_node.h"
#include "tessera/park.h"

namespace tessera {
namespace detail {
template <class T>
class lockfree_arm_of;
}

template <class T>
class lockfree_channel : public detail::channel_api<lockfree_channel<T>, T> {
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "tessera::lockfree_channel<T>: T must be nothrow move constructible");

 public:
  using value_type = T;
  // send, try_send, send_for/until, receive, try_receive, receive_for/until,
  // begin/end: detail::channel_api (tessera/detail/channel_common.h).

  /// A channel buffering up to `capacity` values; 0 makes it a rendezvous channel.
  explicit lockfree_channel(std::size_t capacity)
      : capacity_(capacity), cells_(capacity > 0 ? 3 : 2), buffer_end_(capacity) {}
  ~lockfree_channel() {
    cells_.for_each_quiescent([](std::uint64_t, cell& c) {
      const std::uintptr_t st = c.state.load(std::memory_order_relaxed);
      if (st == kBuffered) std::destroy_at(c.value());
#if TESSERA_CHECKS
      if (is_record(st)) {
        detail::misuse_abort(
            "tessera::lockfree_channel destroyed while senders or receivers wait on it");
      }
#endif
    });
  }
  lockfree_channel(const lockfree_channel&) = delete;
  lockfree_channel& operator=(const lockfree_channel&) = delete;

  /// Values the channel buffers at most (0: rendezvous).
  std::size_t capacity() const noexcept {
    return capacity_;
  }

  /// Closes the channel: later and parked sends fail; receives drain what is
  /// buffered, then fail. Idempotent.
  void close() noexcept;
  /// Whether close() has been called (a snapshot).
  bool is_closed() const noexcept {
    return (sends_.load(std::memory_order_acquire) & kClosedBit) != 0;
  }
  /// Values buffered now (a snapshot: sends past receives, at most capacity;
  /// a send or receive in flight may count already).
  std::size_t size() const noexcept {
    if (capacity_ == 0) return 0;
    const std::uint64_t r = receives_.load(std::memory_order_acquire);
    std::uint64_t s = sends_.load(std::memory_order_acquire);
    if ((s & kClosedBit) != 0) s = closed_at();
    return s > r ? static_cast<std::size_t>(std::min<std::uint64_t>(s - r, capacity_)) : 0;
  }
  /// Senders parked now (a snapshot).
  std::size_t waiting_senders() const noexcept {
    const std::ptrdiff_t n = parked_senders_.load(std::memory_order_relaxed);
    return n > 0 ? static_cast<std::size_t>(n) : 0;
  }
  /// Receivers parked now (a snapshot).
  std::size_t waiting_receivers() const noexcept {
    const std::ptrdiff_t n = parked_receivers_.load(std::memory_order_relaxed);
    return n > 0 ? static_cast<std::size_t>(n) : 0;
  }
  /// Segments of cells allocated and not yet reclaimed (a snapshot): about
  /// (capacity + the calls in flight) / 32 + 2 while nothing stops a caller;
  /// a caller stopped inside a call keeps the segments from its own onwards.
  std::size_t live_segments() const noexcept {
    return cells_.live_segments();
  }

 private:
  friend class detail::channel_api<lockfree_channel, T>;
  friend class detail::lockfree_arm_of<T>;
  static constexpr std::uint64_t kClosedBit = std::uint64_t{1} << 63;
  static constexpr std::uint64_t kUnknown = std::numeric_limits<std::uint64_t>::max();
  // Cell states; a waiter's record is a pointer (>= kRecord), its low bit set
  // for a sender.
  static constexpr std::uintptr_t kEmpty = 0, kBuffered = 1, kDone = 2, kSenderGone = 3,
                                  kReceiverGone = 4, kClosed = 5, kBusy = 6, kInBuffer = 7,
                                  kRecord = 16;
  static constexpr std::uint32_t kSpins = 512;  // a try_ call's spin before it yields
  enum side : std::size_t { kSendSide, kReceiveSide, kBufferSide };

  struct cell {
    std::atomic<std::uintptr_t> state{kEmpty};
    alignas(T) unsigned char storage[sizeof(T)];
    void reset() noexcept { state.store(kEmpty, std::memory_order_relaxed); }
    T* value() noexcept { return std::launder(reinterpret_cast<T*>(storage)); }
  };
  using list = detail::segment_list<cell, 32, 3>;
  using segment = typename list::segment;

  /// A parked party: who, and where its value is (a sender's T, a receiver's
  /// std::optional<T>); for a select's case, the select's claim word.
  struct alignas(8) record {
    waiter* who;
    void* data;
    detail::select_state* sel = nullptr;
    int index = 0;                       // the select's case index
    std::atomic<bool> bounced{false};    // met while the select registered
    // An OS thread still polling its cell (await): its server need not
    // unpark it. Cleared before it parks, then the cell is looked at again.
    std::atomic<bool> polling{false};
  };
  /// A select's case (tessera/select.h) registered in a cell: its record, and
  /// the cell with its segment, held until the case is withdrawn.
  struct select_slot {
    record rec;
    segment* seg = nullptr;
    cell* c = nullptr;
  };
  /// The record a party leaves in its cell: `me`, or for a select's case its
  /// slot's record, given `me`'s who and data.
  static record& record_for(select_slot* slot, record& me) noexcept {
    if (slot == nullptr) return me;
    slot->rec.who = me.who;
    slot->rec.data = me.data;
    return slot->rec;
  }
  /// Whether a caller about to wait in its cell polls it now: an OS
  /// thread's own blocking call (not a select's case) that has not polled yet.
  static bool polls_now(bool polled, const select_slot* slot) noexcept {
    return !polled && slot == nullptr && should_spin();
  }
  static bool is_record(std::uintptr_t st) noexcept {
    return st >= kRecord;
  }
  static bool is_sender(std::uintptr_t st) noexcept {
    return is_record(st) && (st & 1) != 0;
  }
  static bool is_receiver(std::uintptr_t st) noexcept {
    return is_record(st) && (st & 1) == 0;
  }
  static record* record_of(std::uintptr_t st) noexcept {
    return reinterpret_cast<record*>(st & ~std::uintptr_t{1});
  }

  /// What a party did at its cell: a final status, go round with a new
  /// index, or (a select's case) registered in the cell.
  struct outcome {
    bool retry;
    channel_status status;
    bool registered = false;
  };
  static constexpr outcome kRetry{true, channel_status::success};
  static constexpr outcome kRegistered{false, channel_status::empty, true};
  static constexpr outcome done(channel_status s) noexcept {
    return {false, s};
  }

  /// With `slot` (a select's case, never try_only): where it would wait, it
  /// registers the slot's record instead and returns `empty`, the cell held.
  channel_status send_impl(T& v, detail::deadline d, bool try_only, select_slot* slot = nullptr);
  channel_status receive_impl(std::optional<T>& out, detail::deadline d, bool try_only,
                              select_slot* slot = nullptr);

  /// The sender of index `s` at its cell.
  outcome send_in(cell& c, std::uint64_t s, T& v, detail::deadline d, bool try_only,
                  select_slot* slot);
  /// The receiver at its cell. `expands`: whether this index still owes the
  /// buffer's end its move (set false where it was paid, or is not owed).
  outcome receive_in(cell& c, std::optional<T>& out, detail::deadline d, bool try_only,
                     bool& expands, select_slot* slot);
  /// Takes a select's case back from its cell (RECEIVER_GONE or SENDER_GONE
  /// if still waiting there), after its server, if any, has finished. After
  /// it nobody touches the record. Returns the cell's final state (DONE or
  /// BUFFERED: the case was carried out; CLOSED: close() won it).
  std::uintptr_t withdraw(select_slot& slot, bool sender) noexcept;
  /// Moves the buffer's end on by one cell (and on past cells whose waiting
  /// sender gave up); a sender waiting in the cell it reaches is buffered.
  void expand_buffer() noexcept;
  /// expand_buffer() at its cell. True: the move was wasted, go on.
  static bool expand_in(cell& c) noexcept;
  /// Whether the sender of index `s` may leave its value without waiting:
  /// inside the buffer, or its receiver is there or on its way.
  bool may_buffer(std::uint64_t s) const noexcept {
    return s < receives_.load(std::memory_order_seq_cst) ||
           (capacity_ > 0 && s < buffer_end_.load(std::memory_order_seq_cst));
  }
  /// For a sender of index `s` that may not buffer: whether no receive that
  /// has its index still owes the buffer's end a move past s (so the
  /// channel is full for a try_send).
  bool no_room_coming(std::uint64_t s) const noexcept {
    return capacity_ == 0 || s >= receives_.load(std::memory_order_seq_cst) + capacity_;
  }
  /// Claims the waiter recorded in `st` (CAS to BUSY; a select's case: then
  /// its select), runs `move(record&)`, stores `to` and unparks the waiter.
  /// False: the cell changed (a select's case that could not be claimed
  /// leaves it SENDER_GONE or RECEIVER_GONE).
  template <class Move>
  static bool serve(cell& c, std::uintptr_t st, Move&& move, std::uintptr_t to = kDone) noexcept {
    if (!c.state.compare_exchange_strong(st, kBusy, std::memory_order_seq_cst)) return false;
    record* r = record_of(st);
    if (r->sel != nullptr && !r->sel->claim_or_bounce(r->index, r->bounced)) {
      c.state.store(is_sender(st) ? kSenderGone : kReceiverGone, std::memory_order_release);
      return false;
    }
    // Read after the claim: a waiter that stops polling later finds the
    // cell BUSY when it looks again, and does not park (await()).
    waiter* who = r->polling.load(std::memory_order_seq_cst) ? nullptr : r->who;
    move(*r);
    c.state.store(to, std::memory_order_release);
    unpark(who);
    return true;
  }
  /// Waits until `done()` (spinning kSpins PAUSEs, then yielding): for an
  /// operation in flight that a try_ call must not overtake.
  template <class Done>
  static void spin_then_yield_until(Done&& done) noexcept {
    for (std::uint32_t k = 0; !done(); ++k) {
      if (k < kSpins) {
        detail::cpu_relax();
      } else {
        yield_now();
      }
    }
  }
  /// A try_ call at a cell its counterpart has an index for but has not
  /// filled yet: waits until the cell leaves `st`, and returns its state.
  static std::uintptr_t await_arrival(cell& c, std::uintptr_t st) noexcept {
    std::uintptr_t now = st;
    spin_then_yield_until([&] { return (now = c.state.load(std::memory_order_acquire)) != st; });
    return now;
  }
  /// A try_send at index `s` past the buffer's end while receives that have
  /// their indices still owe it their moves: waits until the end has moved
  /// past s.
  void await_room(std::uint64_t s) const noexcept {
    spin_then_yield_until([&] { return buffer_end_.load(std::memory_order_seq_cst) > s; });
  }
  /// Waits in `c` as `mine` until the cell changes for good (not BUSY), or
  /// until the deadline, when it stores `gone` if still `mine`. Returns the
  /// final state. First, if its record says so (an OS thread that did not
  /// poll before it registered), it polls the cell.
  std::uintptr_t await(cell& c, std::uintptr_t mine, detail::deadline d, const char* kind,
                       std::atomic<std::ptrdiff_t>& parked, std::uintptr_t gone);
  /// The frozen send index of a closed channel (close() publishes it just
  /// after it sets the bit).
  std::uint64_t closed_at() const noexcept {
    std::uint64_t at;
    while ((at = closed_at_.load(std::memory_order_acquire)) == kUnknown) detail::cpu_relax();
    return at;
  }
  /// Sends that may still come: the send index, frozen once closed.
  std::uint64_t send_limit() const noexcept {
    const std::uint64_t s = sends_.load(std::memory_order_seq_cst);
    return (s & kClosedBit) != 0 ? closed_at() : s;
  }
  /// Breaks cell `c` (EMPTY, IN_BUFFER or a waiter, whom it wakes) into CLOSED.
  static void break_cell(cell& c) noexcept;

  const std::size_t capacity_;
  list cells_;                                       // sides: sends, receives, the buffer's end
  alignas(64) std::atomic<std::uint64_t> sends_{0};  // with kClosedBit
  alignas(64) std::atomic<std::uint64_t> receives_{0};
  // Beside receives_: a receive's two fetch-and-adds find the line at hand.
  std::atomic<std::uint64_t> buffer_end_;
  alignas(64) std::atomic<std::uint64_t> closed_at_{kUnknown};  // read by every receive
  alignas(64) std::atomic<std::ptrdiff_t> parked_senders_{0};    // written at every park
  std::atomic<std::ptrdiff_t> parked_receivers_{0};
};

template <class T>
std::uintptr_t lockfree_channel<T>::await(cell& c, std::uintptr_t mine, detail::deadline d,
                                          const char* kind, std::atomic<std::ptrdiff_t>& parked,
                                          std::uintptr_t gone) {
  std::uintptr_t st = mine;
  std::atomic<bool>& polling = record_of(mine)->polling;
  if (polling.load(std::memory_order_relaxed)) {
    detail::poll_for([&] { return c.state.load(std::memory_order_acquire) != mine; },
                     detail::kThreadPollNanos);
    // From here a server unparks: it reads `polling` after its claim, so
    // either it sees false or the look below sees its claim.
    polling.store(false, std::memory_order_seq_cst);
  }
  bool counted = false;
  const wait_scope scope(kind, this);
  for (;;) {
    st = c.state.load(std::memory_order_seq_cst);
    if (st == mine) {
      if (!counted) {
        parked.fetch_add(1, std::memory_order_relaxed);
        counted = true;
      }
      if (!d) {
        park();
        continue;
      }
      if (park_until(*d)) continue;
      if (c.state.compare_exchange_strong(st, gone, std::memory_order_acq_rel)) {
        st = gone;
        break;
      }
      continue;
    }
    if (st == kBusy) {  // a counterpart is moving the value: a few instructions
      detail::cpu_relax();
      continue;
    }
    break;
  }
  if (counted) parked.fetch_sub(1, std::memory_order_relaxed);
  return st;
}

template <class T>
channel_status lockfree_channel<T>::send_impl(T& v, detail::deadline d, bool try_only,
                                              select_slot* slot) {
  if (is_closed()) return channel_status::closed;
  if (try_only) {  // full, seen without holding a segment (as below)
    const std::uint64_t s = sends_.load(std::memory_order_seq_cst);
    if ((s & kClosedBit) == 0 && !may_buffer(s) && no_room_coming(s)) return channel_status::full;
  }
  for (;;) {
    segment* held = cells_.hold(kSendSide);
    std::uint64_t s;
    if (!try_only) {
      s = sends_.fetch_add(1, std::memory_order_seq_cst);
    } else if (s = sends_.load(std::memory_order_seq_cst); (s & kClosedBit) == 0) {
      // Take an index only where the value need not wait.
      if (!may_buffer(s)) {
        cells_.drop(held, kSendSide);
        // Full, unless a receive that has its index still owes the buffer's
        // end its move past s: then it is as good as done, and the room it
        // makes is ours to see. Wait for the move, then look again.
        if (no_room_coming(s)) return channel_status::full;
        await_room(s);
        continue;
      }
      if (!sends_.compare_exchange_strong(s, s + 1, std::memory_order_seq_cst)) {
        cells_.drop(held, kSendSide);
        continue;
      }
    }
    if ((s & kClosedBit) != 0) {
      cells_.drop(held, kSendSide);
      return channel_status::closed;
    }
    const auto [seg, c] = cells_.at(held, s, kSendSide);
    const outcome o = send_in(*c, s, v, d, try_only, slot);
    if (o.registered) {
      slot->seg = seg;
      slot->c = c;
      return o.status;
    }
    cells_.drop(seg, kSendSide);
    if (!o.retry) return o.status;
  }
}

template <class T>
typename lockfree_channel<T>::outcome lockfree_channel<T>::send_in(cell& c, std::uint64_t s, T& v,
                                                                   detail::deadline d,
                                                                   bool try_only,
                                                                   select_slot* slot) {
  std::uintptr_t st = c.state.load(std::memory_order_acquire);
  bool polled = false;
  for (;;) {
    if (is_receiver(st)) {
      auto give = [&](record& r) { static_cast<std::optional<T>*>(r.data)->emplace(std::move(v)); };
      if (serve(c, st, give)) return done(channel_status::success);
      st = c.state.load(std::memory_order_acquire);
      continue;
    }
    if (st == kInBuffer || (st == kEmpty && capacity_ > 0 && may_buffer(s))) {
      ::new (static_cast<void*>(c.storage)) T(std::move(v));
      if (c.state.compare_exchange_strong(st, kBuffered, std::memory_order_acq_rel)) {
        return done(channel_status::success);
      }
      // The receiver, a try_receive or close came first: take it back.
      std::destroy_at(&v);
      ::new (static_cast<void*>(&v)) T(std::move(*c.value()));
      std::destroy_at(c.value());
      continue;
    }
    if (st == kEmpty && try_only) {
      // Rendezvous: the receiver of this cell took its index first and is on
      // its way (a blocking one: two try_ calls cannot share a cell).
      st = await_arrival(c, st);
      continue;
    }
    if (st == kEmpty && capacity_ > 0 && polls_now(polled, slot)) {
      // An OS thread that must wait for room: the room usually comes soon.
      // Waiting for it here first spares both sides the record: the receive
      // that owes the buffer's end its move past s marks the cell IN_BUFFER
      // (receives pay that move before they wait, so it is never held up).
      polled = true;
      detail::poll_for(
          [&] { return (st = c.state.load(std::memory_order_acquire)) != kEmpty; },
          detail::kThreadPollNanos);
      continue;
    }
    if (st == kEmpty) {
      record me{self(), &v};
      me.polling.store(polls_now(polled, slot), std::memory_order_relaxed);
      record& rec = record_for(slot, me);
      const auto mine = reinterpret_cast<std::uintptr_t>(&rec) | 1;
      if (!c.state.compare_exchange_strong(st, mine, std::memory_order_acq_rel)) continue;
      if (slot != nullptr) {
        parked_senders_.fetch_add(1, std::memory_order_relaxed);
        return kRegistered;
      }
      const std::uintptr_t end = await(c, mine, d, "channel send", parked_senders_, kSenderGone);
      return done(end == kDone || end == kBuffered ? channel_status::success
                  : end == kSenderGone             ? channel_status::timeout
                                                   : channel_status::closed);
    }
    if (st == kClosed) return done(channel_status::closed);
    return kRetry;  // RECEIVER_GONE: the next index
  }
}

template <class T>
channel_status lockfree_channel<T>::receive_impl(std::optional<T>& out, detail::deadline d,
                                                 bool try_only, select_slot* slot) {
  if (try_only && receives_.load(std::memory_order_seq_cst) >= send_limit()) {
    // Empty, seen without holding a segment (as below).
    return is_closed() ? channel_status::closed : channel_status::empty;
  }
  for (;;) {
    segment* held = cells_.hold(kReceiveSide);
    std::uint64_t r;
    if (try_only) {
      // Take an index only where a sender has one.
      r = receives_.load(std::memory_order_seq_cst);
      if (r >= send_limit()) {
        cells_.drop(held, kReceiveSide);
        return is_closed() ? channel_status::closed : channel_status::empty;
      }
      if (!receives_.compare_exchange_strong(r, r + 1, std::memory_order_seq_cst)) {
        cells_.drop(held, kReceiveSide);
        continue;
      }
    } else {
      r = receives_.fetch_add(1, std::memory_order_seq_cst);
      // closed_at_, not the send index's bit: the send index's line stays
      // with the senders. A close whose frozen index this load misses sees r
      // among the receives and breaks cell r (close()).
      const std::uint64_t at = closed_at_.load(std::memory_order_seq_cst);
      if (at != kUnknown && r >= at) {
        cells_.drop(held, kReceiveSide);
        return channel_status::closed;
      }
    }
    const auto [seg, c] = cells_.at(held, r, kReceiveSide);
    bool expands = capacity_ > 0;
    const outcome o = receive_in(*c, out, d, try_only, expands, slot);
    if (o.registered) {
      slot->seg = seg;
      slot->c = c;
      return o.status;
    }
    cells_.drop(seg, kReceiveSide);
    if (expands) expand_buffer();
    if (!o.retry) return o.status;
  }
}

template <class T>
typename lockfree_channel<T>::outcome lockfree_channel<T>::receive_in(
    cell& c, std::optional<T>& out, detail::deadline d, bool try_only, bool& expands,
    select_slot* slot) {
  std::uintptr_t st = c.state.load(std::memory_order_acquire);
  bool polled = false;
  for (;;) {
    if (st == kBuffered) {
      out.emplace(std::move(*c.value()));
      std::destroy_at(c.value());
      c.state.store(kDone, std::memory_order_relaxed);
      return done(channel_status::success);
    }
    if (is_sender(st)) {
      auto take = [&](record& r) { out.emplace(std::move(*static_cast<T*>(r.data))); };
      if (serve(c, st, take)) return done(channel_status::success);
      st = c.state.load(std::memory_order_acquire);
      continue;
    }
    if (st == kBusy) {  // the expansion is buffering the sender waiting here
      detail::cpu_relax();
      st = c.state.load(std::memory_order_acquire);
      continue;
    }
    if (st == kEmpty || st == kInBuffer) {
      if (try_only) {
        // The sender of this cell took its index first and is on its way.
        st = await_arrival(c, st);
        continue;
      }
      if (capacity_ > 0 && polls_now(polled, slot)) {
        // An OS thread at an empty cell of a buffered channel: its sender is
        // usually close behind. Waiting for the value here first spares both
        // sides the record (the sender buffers, as if this receive were
        // late). Pay the buffer's end first, as below.
        polled = true;
        if (expands) {
          expand_buffer();
          expands = false;
        }
        const std::uintptr_t was = st;
        detail::poll_for(
            [&] {
              st = c.state.load(std::memory_order_acquire);
              return st != kEmpty && st != kInBuffer;
            },
            detail::kThreadPollNanos);
        if (st != was) continue;
      }
      record me{self(), &out};
      me.polling.store(polls_now(polled, slot), std::memory_order_relaxed);
      record& rec = record_for(slot, me);
      const auto mine = reinterpret_cast<std::uintptr_t>(&rec);
      if (!c.state.compare_exchange_strong(st, mine, std::memory_order_acq_rel)) continue;
      if (expands) {
        // This index owes the buffer's end its move whatever comes of the
        // wait: pay it now, so that senders behind need not wait for ours.
        expand_buffer();
        expands = false;
      }
      if (slot != nullptr) {
        parked_receivers_.fetch_add(1, std::memory_order_relaxed);
        return kRegistered;
      }
      const std::uintptr_t end =
          await(c, mine, d, "channel receive", parked_receivers_, kReceiverGone);
      if (end == kDone) return done(channel_status::success);
      if (end == kReceiverGone) return done(channel_status::timeout);
      return kRetry;  // broken by close: drain on, or find it closed
    }
    // SENDER_GONE: the expansion that meets it goes on, so this index owes
    // nothing. CLOSED: the next index.
    if (st == kSenderGone) expands = false;
    return kRetry;
  }
}

template <class T>
std::uintptr_t lockfree_channel<T>::withdraw(select_slot& slot, bool sender) noexcept {
  if (slot.c == nullptr) return kEmpty;  // not registered
  const std::uintptr_t mine = reinterpret_cast<std::uintptr_t>(&slot.rec) | (sender ? 1 : 0);
  const std::uintptr_t gone = sender ? kSenderGone : kReceiverGone;
  std::uintptr_t st = mine;
  for (;;) {
    if (slot.c->state.compare_exchange_weak(st, gone, std::memory_order_acq_rel)) {
      st = gone;
      break;
    }
    if (st == mine) continue;  // a spurious failure
    if (st != kBusy) break;    // served, or given up by whoever met it
    detail::cpu_relax();       // its server is at work: a few instructions
    st = mine;
  }
  (sender ? parked_senders_ : parked_receivers_).fetch_sub(1, std::memory_order_relaxed);
  cells_.drop(slot.seg, sender ? kSendSide : kReceiveSide);
  slot.c = nullptr;
  slot.seg = nullptr;
  return st;
}

template <class T>
void lockfree_channel<T>::expand_buffer() noexcept {
  for (;;) {
    segment* held = cells_.hold(kBufferSide);
    const std::uint64_t b = buffer_end_.fetch_add(1, std::memory_order_seq_cst);
    // Walk even when there is nothing to do, so that this side's pointer
    // keeps up and reclamation is not held back by it.
    const auto [seg, c] = cells_.at(held, b, kBufferSide);
    // An OS thread marks the cell even if its sender has not come, so that
    // the sender finds IN_BUFFER and need not read the receive and
    // buffer-end indices, whose lines are on the receivers' core. A fiber's
    // senders are most often on its own worker: it saves the CAS (no sender
    // at b yet: the one that comes finds b inside the buffer).
    const bool wasted = (should_spin() || b < send_limit()) && expand_in(*c);
    cells_.drop(seg, kBufferSide);
    if (!wasted) return;
  }
}

template <class T>
bool lockfree_channel<T>::expand_in(cell& c) noexcept {
  std::uintptr_t st = c.state.load(std::memory_order_acquire);
  for (;;) {
    if (st == kEmpty) {  // its sender is on its way: it will not wait
      if (c.state.compare_exchange_strong(st, kInBuffer, std::memory_order_acq_rel)) return false;
      continue;
    }
    if (is_sender(st)) {  // buffer the value of the sender waiting here
      auto buffer = [&](record& r) {
        ::new (static_cast<void*>(c.storage)) T(std::move(*static_cast<T*>(r.data)));
      };
      if (serve(c, st, buffer, kBuffered)) return false;
      st = c.state.load(std::memory_order_acquire);
      continue;
    }
    if (st == kBusy) {  // its receiver is taking from the sender waiting here
      detail::cpu_relax();
      st = c.state.load(std::memory_order_acquire);
      continue;
    }
    return st == kSenderGone;  // wasted: no value will ever be buffered here
  }
}

template <class T>
void lockfree_channel<T>::break_cell(cell& c) noexcept {
  std::uintptr_t st = c.state.load(std::memory_order_acquire);
  for (;;) {
    if (st == kEmpty || st == kInBuffer) {
      if (c.state.compare_exchange_weak(st, kClosed, std::memory_order_acq_rel)) return;
      continue;
    }
    if (is_record(st)) {
      // Claim it first: the record lives on the waiter's stack until it sees
      // the cell change.
      if (serve(
              c, st, [](record&) {}, kClosed))
        return;
      st = c.state.load(std::memory_order_acquire);
      continue;
    }
    if (st == kBusy) {
      detail::cpu_relax();
      st = c.state.load(std::memory_order_acquire);
      continue;
    }
    return;  // BUFFERED stays to be drained; the rest are final
  }
}

template <class T>
void lockfree_channel<T>::close() noexcept {
  const std::uint64_t s = sends_.fetch_or(kClosedBit, std::memory_order_seq_cst);
  if ((s & kClosedBit) != 0) return;
  closed_at_.store(s, std::memory_order_seq_cst);  // before the load of receives_
  // Cells between the indices: receivers past the frozen send index, or
  // senders' cells no receiver has reached yet.
  const std::uint64_t r = receives_.load(std::memory_order_seq_cst);
  const std::uint64_t lo = std::min(r, s), hi = std::max(r, s);
  if (lo == hi) return;
  segment* a = cells_.hold(kSendSide);
  segment* b = cells_.hold(kReceiveSide);
  const bool a_first =
      a->id.load(std::memory_order_relaxed) <= b->id.load(std::memory_order_relaxed);
  const side k = a_first ? kSendSide : kReceiveSide;
  segment* seg = a_first ? a : b;
  cells_.drop(a_first ? b : a, a_first ? kReceiveSide : kSendSide);
  // Cells before the held segment are in reclaimed segments: nobody is in them.
  for (std::uint64_t i = std::max<std::uint64_t>(lo, seg->id.load() * list::kCells); i < hi; ++i) {
    seg = cells_.walk(seg, i / list::kCells, k, false);
    break_cell(seg->cells[i % list::kCells]);
  }
  cells_.drop(seg, k);
}

}  // namespace tessera
