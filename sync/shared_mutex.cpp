// shared_mutex and shared_timed_mutex (see tessera/shared_mutex.h for the box office).
//
//   lock_shared     state_ == our code (biased to us): entered += 1 as a plain
//                   store; else mark our slot in used_ (an RMW once per thread
//                   and lock, then a load), take the bias if nobody has, entered
//                   += 1 (RMW). Then load state_; WRITER clear: in (a biased
//                   reader that finds the bias revoked meanwhile fences and
//                   looks again). WRITER set: left += 1 (waking a draining
//                   writer), spin, queue.
//   unlock_shared   left += 1 — on an owned slot a plain load and store, no RMW
//                   — after marking our slot in used_ (a fiber may leave through
//                   another thread's slot; a biased thread's slot is marked
//                   already); then WRITER set: unpark the draining writer.
//   lock            CAS WRITER in (even while QUEUED: barging), revoke a bias
//                   held by another thread, then drain: wait until inside, summed
//                   over the slots in used_, is 0 (spin, then park as `drainer_`).
//                   WRITER set: spin, queue.
//   unlock          clear WRITER; QUEUED: wake the head of the queue — a writer,
//                   or every queued reader — to compete again.
//
//
// The two sides meet Dekker-style (seq_cst): a reader counts in and then reads
// state_; a writer sets WRITER and then reads used_ and the slots it marks
// (every `left`, then every `entered`: counts landing between the two passes
// can only make the sum too high). At least one of them sees the other, so a
// reader never enters under a writer; a reader marks its slot before it counts
// in, so a writer that sees the count-in sees the mark too. (A count-out
// through a slot the writer's used_ did not show only leaves the sum too high
// until its next look, which shows it.) Plain stores make the pair asymmetric
// (as in liburcu): such a store may still sit in its core's store buffer when
// the reader loads state_, so the writer supplies the fence, with
// sys_membarrier (MEMBARRIER_CMD_PRIVATE_EXPEDITED: a full barrier on every
// core running one of our threads), a few µs:
//   - Leaving (owned slot): a writer about to park waiting for readers first
//     runs the barrier and re-reads the slots. Either the reader's store was
//     before the barrier (the writer sees it) or its load of state_ is after it
//     (it sees WRITER and drainer_ and unparks the writer).
//   - Entering (bias): reader bias as in biased locking (Kawachiya et al.) and
//     BRAVO (Dice & Kogan): the first reader with an owned slot biases the lock
//     to its thread, which then counts in with a plain store and no fence — a
//     read costs no RMW at all. The first writer from any other thread revokes
//     the bias for good and runs the barrier before reading the slots: the
//     biased reader's count-in is visible, or it sees WRITER and backs off. A
//     biased reader that read the bias before the revocation but stored after
//     the barrier re-reads state_ after its store and, finding the bias
//     revoked, fences and re-reads state_ (later writers run no barrier). The
//     biased thread's own writes need no barrier: its stores are in its program
//     order.
// The SPIN model tests/model/shared_mutex.pml checks both pairs with per-thread
// FIFO store buffers, and catches each barrier or re-check left out. (It keeps
// the bias in a variable of its own and reads it apart from WRITER; reading
// both in one load of state_, as the code does, is one of the interleavings it
// checks.) Where the
// kernel lacks membarrier, no slot is owned, nothing is biased and every count
// is an RMW.
//
//
// Preference and fairness: barging with eventual fairness, as tessera::mutex.
// Readers never block a writer from taking WRITER (so a stream of readers cannot
// starve a writer: new readers back off as soon as it is set), and writers
// barge. A waiter queued longer than `handoff_after` (1 ms) is handed the lock
// by the next unlock() — a writer gets WRITER directly; the queued readers are
// counted in and enter together — at most once per ms (per 40 µs when the head
// waiter is a fiber, as tessera::mutex). So neither side starves
// and, when callers outnumber cores, no convoy forms: while a thread is parked
// the others keep the lock busy. (A FIFO-with-batching box office convoyed
// there, some 20 times slower than std::shared_mutex.)
//
//
// Cost: an uncontended lock_shared/unlock_shared is, on the biased thread, no
// atomic RMW at all: plain loads and stores to the caller's own slot line and
// four loads of state_, about 30 instructions for the pair; on another thread
// with an owned slot one RMW (two without one). lock() also reads 2 words per slot in use
// (one thread: the hand-off slot and its own), and the first write by a thread
// other than the biased one runs one membarrier. sizeof is (kSlots + 1) cache lines; 32 slots
// rather than 16 pay at 32 threads on 2 cores (docs/benchmarks.md).
//
#include "tessera/shared_mutex.h"

#include <string>

namespace tessera {

namespace {
using steady = std::chrono::steady_clock;
// Threads poll this many times before queueing behind a writer, or (a writer)
// before parking until the readers inside have left. Fibers never spin.
constexpr unsigned kSpinBudget = 16;
constexpr unsigned kDrainSpinBudget = 256;
}  // namespace

/// One parked caller. Marks: 1 woken to compete again, 2 handed the lock (a
/// writer: WRITER is its own; a reader: it is counted in and inside).
struct shared_timed_mutex::node : detail::park_node {
  bool shared = false;
  detail::tick_clock::rep since;
};

shared_timed_mutex::~shared_timed_mutex() {
#if TESSERA_CHECKS
  if ((state_.load() & (kWriter | kQueued)) != 0 || !queue_.empty() || readers_inside() != 0) {
    detail::misuse_abort((std::string(type_) + " destroyed while locked or with waiters").c_str());
  }
#endif
}

void shared_timed_mutex::shared_underflow() const noexcept {
  detail::misuse_abort(
      (std::string(type_) + "::unlock_shared: the lock is not held shared").c_str());
}

// Readers inside: entered minus left, over the slots used_ marks (read once,
// after WRITER: every reader that got in marked its slot before its count-in).
// The `left` counts are read first: both only grow, so a count-in and count-out
// that land between the two passes can only make the result too high (the
// writer waits a little longer), never too low. So can a count-out through a
// slot marked after our look at used_ (a fiber that migrated): its count-in is
// in a slot marked before.
std::int64_t shared_timed_mutex::readers_inside() const noexcept {
  const std::uint32_t used = used_.load(std::memory_order_seq_cst);
  std::int64_t left = 0;
  for (std::uint32_t u = used; u != 0; u &= u - 1) {
    left += slots_[__builtin_ctz(u)].left.load(std::memory_order_seq_cst);
  }
  std::int64_t entered = 0;
  for (std::uint32_t u = used; u != 0; u &= u - 1) {
    entered += slots_[__builtin_ctz(u)].entered.load(std::memory_order_seq_cst);
  }
  return entered - left;
}

void shared_timed_mutex::wake_drainer() noexcept {
  // A stale drainer (it finished meanwhile) only gets a spurious permit: every
  // park here and in the other primitives re-checks its condition.
  if (waiter* d = drainer_.load(std::memory_order_acquire); d != nullptr) unpark(d);
}

// A reader that counted itself in but found WRITER: count out again. The writer
// may have seen the count and be waiting for it.
void shared_timed_mutex::back_off(slot& s, std::uint32_t slot_code) noexcept {
  count_out(s, slot_code);
  wake_drainer();
}

// The first reader that owns a slot biases the lock to its thread; a reader
// without an owned slot leaves it unbiased (its slot is not its own).
void shared_timed_mutex::take_bias(std::uint32_t slot_code) noexcept {
  if ((slot_code & detail::kSlotOwned) == 0) return;
  replace_bias(kUnbiased, slot_code);
}

// state_'s bias field from `from` to `to`, if it holds `from` (WRITER and QUEUED
// kept as they are).
void shared_timed_mutex::replace_bias(std::uint64_t from, std::uint64_t to) noexcept {
  std::uint64_t s = state_.load(std::memory_order_relaxed);
  while ((s & kBiasMask) == from &&
         !state_.compare_exchange_weak(s, (s & ~kBiasMask) | to, std::memory_order_seq_cst,
                                       std::memory_order_relaxed)) {
  }
}

// A biased reader counted in with a plain store and then found state_ no longer
// "biased to it, no writer, nobody queued". WRITER set: back off. Still biased
// (only QUEUED was set): in, as on the fast path. Revoked since it looked: the
// revoking writer's membarrier may have run before its store, and later writers
// run none, so it fences itself (a seq_cst RMW of its own count: a full fence,
// and one TSan understands) and looks again.
bool shared_timed_mutex::biased_entry_changed(slot& mine, std::uint32_t slot_code) noexcept {
  const std::uint64_t s = state_.load(std::memory_order_acquire);
  bool in = (s & kWriter) == 0;
  if (in && (s & kBiasMask) != slot_code) {
    mine.entered.fetch_add(0, std::memory_order_seq_cst);
    in = (state_.load(std::memory_order_seq_cst) & kWriter) == 0;
  }
  if (in) {
    note_shared(1);
    return true;
  }
  back_off(mine, slot_code);
  return false;
}

// Called by the writer holding WRITER, before it reads the slots. If the lock is
// biased to another thread, that thread may count in with a plain store still in
// its store buffer: revoke the bias for good and run the membarrier. After it,
// either the biased reader's count-in is visible to our sum, or its load of
// state_ comes after the barrier and sees WRITER (it backs off); and its later
// reads see kBiasRevoked and use RMWs. The biased thread itself needs neither:
// its own earlier stores are in its program order.
void shared_timed_mutex::revoke_foreign_bias() noexcept {
  const std::uint64_t b = state_.load(std::memory_order_seq_cst) & kBiasMask;
  if (b == kUnbiased || b == kBiasRevoked || b == detail::current_reader_slot()) return;
  replace_bias(b, kBiasRevoked);  // only a writer revokes, and we hold WRITER
  detail::flush_reader_counts();
}

// WRITER in, if no writer has it: the readers inside are drained next.
bool shared_timed_mutex::take_writer() noexcept {
  std::uint64_t s = state_.load(std::memory_order_relaxed);
  while ((s & kWriter) == 0) {
    if (state_.compare_exchange_weak(s, s | kWriter, std::memory_order_seq_cst,
                                     std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

bool shared_timed_mutex::try_lock() {
  if (!take_writer()) return false;
  holder_.note();
  revoke_foreign_bias();
  if (readers_inside() == 0) return true;
  unlock_slow();  // readers inside: give WRITER back (waking whoever queued behind it)
  return false;
}

// Barge, spin, queue behind the writer: detail::barge_or_queue, with this
// lock's queueing step.
template <class TryBarge>
detail::acquire_result shared_timed_mutex::wait_in_queue(bool shared, detail::deadline deadline,
                                                         detail::tick_clock::rep began,
                                                         TryBarge&& barge) {
  return detail::barge_or_queue(deadline, should_spin() ? kSpinBudget : 0, barge,
                                [&](bool requeue) {
                                  node n;
                                  n.who = self();
                                  n.shared = shared;
                                  n.since = began;
                                  return detail::queue_while_held(state_, kWriter, kQueued, lock_,
                                                                  queue_, n, requeue, deadline);
                                });
}

bool shared_timed_mutex::acquire(detail::deadline deadline) {
  // One clock read: the wait record's stamp and the fairness timer's start.
  const detail::tick_clock::rep began = detail::tick_clock::now();
  const wait_scope scope(self(), began, "shared_mutex", this, -1, &holder_);
  // Barged in or handed WRITER: either way, wait for the readers inside, as
  // the holder (readers that come now queue behind us).
  if (wait_in_queue(false, deadline, began, [this] { return take_writer(); }) ==
      detail::acquire_result::timed_out) {
    return false;
  }
  holder_.note();
  return drain(deadline);
}

bool shared_timed_mutex::acquire_shared(detail::deadline deadline) {
  const detail::tick_clock::rep began = detail::tick_clock::now();
  const wait_scope scope(self(), began, "shared_mutex (shared)", this, -1, &holder_);
  // Handed off: counted in by the writer that handed off.
  return wait_in_queue(true, deadline, began, [this] { return try_lock_shared(); }) !=
         detail::acquire_result::timed_out;
}

bool shared_timed_mutex::drain(detail::deadline deadline) {
  revoke_foreign_bias();
  unsigned spins = should_spin() ? kDrainSpinBudget : 0;
  for (;;) {
    const std::int64_t inside = readers_inside();
    if (inside == 0) break;
#if TESSERA_CHECKS
    // Under WRITER no reader can count in for good, and every count out of a
    // reader that got in is preceded by its count in: a negative sum is misuse.
    if (inside < 0) shared_underflow();
#endif
    if (spins > 0) {
      --spins;
      detail::cpu_relax();
      continue;
    }
    drainer_.store(self(), std::memory_order_seq_cst);
    // Asymmetric Dekker: a reader leaving through an owned slot stores its count
    // and then loads state_ with no fence between. After this barrier, either
    // its store is visible to the sum below, or its load comes after our WRITER
    // and drainer_ and it unparks us. Once per park: rare, and a few µs.
    detail::flush_reader_counts();
    if (readers_inside() == 0) break;
    if (!deadline.has_value()) {
      park();
    } else if (!park_until(*deadline) && readers_inside() != 0) {
      drainer_.store(nullptr, std::memory_order_relaxed);
      unlock_slow();  // timed out: give WRITER back
      return false;
    }
  }
  drainer_.store(nullptr, std::memory_order_relaxed);
  return true;
}

void shared_timed_mutex::unlock_slow() {
#if TESSERA_CHECKS
  if ((state_.load(std::memory_order_relaxed) & kWriter) == 0) {
    detail::misuse_abort(
        (std::string(type_) + "::unlock: the lock is not held exclusively").c_str());
  }
#endif
  lock_.lock();
  auto* head = static_cast<node*>(queue_.front());
  if (head == nullptr) {  // nobody queued (or only timed-out waiters, who left)
    state_.fetch_and(~(kWriter | kQueued), std::memory_order_release);
    lock_.unlock();
    return;
  }
  // Rate-limited fairness, as tessera::mutex.
  const bool handoff = detail::fair_handoff_due(*head, head->since, next_fair_, handoff_after);
  const detail::park_mark mark = handoff ? detail::park_mark::handed : detail::park_mark::woken;
  // Whom to wake: a writer at the head alone; otherwise every queued reader,
  // and the first queued writer too, to compete (readers never call unlock_slow:
  // once WRITER clears, a writer left queued would have nobody to wake it).
  // Handed-over readers are counted in here, before WRITER clears.
  bool keep_writer = false;
  detail::park_list woken;
  node* first_writer = nullptr;
  if (!head->shared) {
    queue_.unlink(*head);
    woken.push_back(*head);
    keep_writer = handoff;
  } else {
    for (auto* p = queue_.front(); p != nullptr;) {
      auto* next = p->next;
      if (static_cast<node*>(p)->shared) {
        queue_.unlink(*p);
        woken.push_back(*p);
        if (handoff) {
          note_shared(1);
          // Counted in a shared slot (RMW): an owned one is its owner's alone.
          slots_[detail::kOwnedSlots].entered.fetch_add(1, std::memory_order_relaxed);
        }
      } else if (first_writer == nullptr) {
        first_writer = static_cast<node*>(p);
      }
      p = next;
    }
    if (first_writer != nullptr) queue_.unlink(*first_writer);
  }
  std::uint64_t s = state_.load(std::memory_order_relaxed);
  std::uint64_t next;
  do {
    next = keep_writer ? s : (s & ~kWriter);
    next = queue_.empty() ? (next & ~kQueued) : (next | kQueued);
  } while (
      !state_.compare_exchange_weak(s, next, std::memory_order_seq_cst, std::memory_order_relaxed));
  // Mark under lock_ (a timed-out waiter that finds its node unmarked under the
  // lock knows it is still queued), and unpark at once: a node dies as soon as
  // its owner sees the mark.
  while (auto* p = woken.front()) {
    woken.unlink(*p);
    unpark(detail::park_list::mark(*p, mark));
  }
  if (first_writer != nullptr) {
    unpark(detail::park_list::mark(*first_writer, detail::park_mark::woken));
  }
  lock_.unlock();
}

}  // namespace tessera
