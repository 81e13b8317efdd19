// sched/uring.h — the io_uring backends' ring: what poller_uring.cpp (setup,
// readiness polls, reaping) and uring_io.cpp (completion I/O: receive
// buffers, sends, accepts) share.
//
// A completion's user_data says what it completes. Descriptor records and
// send operations are 16-byte aligned, so the low 4 bits carry the kind; a
// descriptor's requests carry a generation in the top 16 bits (the record's
// registration number for polls, its rx_gen for receives and accepts), so a
// completion of an earlier use of a recycled record is told from the current.
#pragma once

#include <liburing.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "poller.h"

namespace tessera::sched {

enum tag_kind : std::uint64_t {
  kTagPoll = 0,        // a readiness poll; user_data 0 itself is a wake-up NOP
  kTagPollRemove = 1,  // a poll_remove's own completion
  kTagRecv = 2,        // a stream's multishot receive
  kTagAccept = 3,      // a listener's multishot accept
  kTagOp = 4,          // a send (uring_op, on the sender's stack)
  kTagIgnore = 5,      // a cancel's own completion
};
constexpr std::uint64_t kTagKindMask = 0xF;
constexpr int kGenShift = 48;
constexpr std::uint64_t kAddressMask = ((std::uint64_t{1} << kGenShift) - 1) & ~kTagKindMask;

inline std::uint64_t make_tag(const void* p, tag_kind kind, std::uint16_t gen) noexcept {
  return reinterpret_cast<std::uint64_t>(p) | kind | (std::uint64_t{gen} << kGenShift);
}
inline tag_kind kind_of(std::uint64_t tag) noexcept {
  return static_cast<tag_kind>(tag & kTagKindMask);
}
inline std::uint16_t gen_of(std::uint64_t tag) noexcept {
  return static_cast<std::uint16_t>(tag >> kGenShift);
}
template <class T>
T* address_of(std::uint64_t tag) noexcept {
  return reinterpret_cast<T*>(tag & kAddressMask);
}

/// The receive buffers: a provided-buffer ring (buffer group 0) of `count`
/// buffers of `size` bytes. A received buffer is queued on its descriptor
/// (poll_desc::rx_head, linked through `next`) until read, then returned.
struct buffer_ring {
  io_uring_buf_ring* ring = nullptr;  // shared with the kernel
  char* memory = nullptr;
  std::size_t ring_bytes = 0;
  std::size_t memory_bytes = 0;
  unsigned count = 0;  // a power of two
  std::size_t size = 0;
  std::vector<std::int32_t> next;  // the queue link of each buffer id
  std::vector<std::uint32_t> len;  // bytes received into each buffer id
  /// Serialises returns: the ring's tail has one producer at a time.
  std::mutex mu;
  /// Buffers filled by the kernel and not yet given back (a statistic).
  std::atomic<std::uint32_t> lent{0};
  /// Receives that ended for want of a buffer (a statistic).
  std::atomic<std::uint64_t> ran_dry{0};

  char* data(std::int32_t bid) const noexcept {
    return memory + static_cast<std::size_t>(bid) * size;
  }
  /// Gives buffers back to the kernel.
  void give_back(const std::int32_t* bids, unsigned n) noexcept;
};

/// A send in flight: lives on the sender's stack until its last completion.
struct alignas(16) uring_op {
  waiter* who = nullptr;
  std::int64_t result = 0;
  bool zero_copy = false;
  /// Set (release) by the reaper at the op's last completion; the sender
  /// returns only after it.
  std::atomic<bool> done{false};
};

struct poller::uring {
  io_uring ring{};
  std::mutex sq_mu;  // submissions
  std::mutex cq_mu;  // reaping
  /// SQEs prepared and not yet submitted: the next poll submits them.
  std::atomic<unsigned> queued{0};
  /// The ring was made with IORING_SETUP_TASKRUN_FLAG: a non-blocking poll
  /// enters the kernel only when SQEs are queued or the kernel asks for it.
  bool taskrun_flag = false;
  /// The completion backend's receive buffers, made at the first read.
  std::once_flag buffers_once;
  buffer_ring buffers;
  int buffers_error = 0;  // errno of a failed set-up: reads then use recv(2)
};

/// An SQE (submitting what is queued first if the ring is full). Null only
/// if even that failed. Under sq_mu.
io_uring_sqe* try_get_sqe(io_uring& ring) noexcept;

/// The reaper's side of completion I/O (uring_io.cpp), under cq_mu.
void complete_recv(poller::uring& u, std::uint64_t tag, const io_uring_cqe& cqe) noexcept;
void complete_accept(poller::uring& u, std::uint64_t tag, const io_uring_cqe& cqe) noexcept;
void complete_op(std::uint64_t tag, const io_uring_cqe& cqe) noexcept;
/// At unregistration (close), under the registration lock and sq_mu: cancels
/// every request on the descriptor, gives its unread buffers back and closes
/// its unaccepted descriptors.
void forget_completions(poller::uring& u, poll_desc& d) noexcept;
/// At the poller's end: frees the buffer ring's memory (the ring is gone).
void destroy_buffers(poller::uring& u) noexcept;

}  // namespace tessera::sched
