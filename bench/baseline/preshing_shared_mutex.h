// bench/baseline/preshing_shared_mutex.h — preshing_shared_mutex: Preshing's
// reader-writer box office (Preshing, "Semaphores are Surprisingly Versatile":
// "NonRecursiveRWLock") with two TWA semaphores as bouncers.
//
// Kept beside tessera::shared_mutex for comparison, not as the default: its
// bouncers hand the lock over FIFO through semaphores, so under
// oversubscription every write stalls all readers behind parked threads (an
// order of magnitude behind both shared_mutex and std::shared_mutex in
// semabench's read-mostly loop: docs/benchmarks.md). Same interface and
// contract as shared_mutex.
//
// Box office: one 64-bit `status_` word of three 21-bit counts.
//
//   readers       holding the lock shared
//   wait_to_read  readers that arrived while a writer held or wanted the lock
//   writers       the writer holding the lock plus the writers waiting for it
//
//   operation       box office (one CAS / fetch_add)                 then
//   lock_shared     writers == 0 ? ++readers : ++wait_to_read         wait on read_gate_ if queued
//   unlock_shared   --readers                                         last reader and writers > 0:
//   release write_gate_ lock            ++writers                                         readers
//   or writers before: wait on write_gate_ unlock          --writers; readers = wait_to_read,
//   wait_to_read = 0
//                                                                     wait_to_read ? release
//                                                                     read_gate_ (all of them) :
//                                                                     writers left ? release
//                                                                     write_gate_
//
// Preference: neither side starves. With no writer around, readers take no lock
// at all — one CAS on the word. A writer that arrives blocks *new* readers
// (they queue in wait_to_read) and waits for the current ones to leave. When it
// unlocks, every reader that queued meanwhile is admitted as one batch before
// the next writer (writers are admitted one at a time, FIFO on the write gate),
// so readers and writers alternate under contention (phase-fair).
//
// Contract: std::shared_mutex's interface (lock/try_lock/unlock, lock_shared/
// try_lock_shared/unlock_shared); works with std::unique_lock, std::shared_lock,
// std::scoped_lock. Any fiber or OS thread, mixed. unlock() synchronizes-with the
// next lock()/lock_shared() that it admits; unlock_shared() with the lock() it
// admits. At most 2^21-1 readers or writers at once (std::system_error beyond).
// Misuse (TESSERA_CHECKS): unlock/unlock_shared of a lock not held, destroying
// a locked shared_mutex, abort with a message. Spurious wake-ups: none.
#pragma once

#include <atomic>
#include <cstdint>

#include "tessera/semaphore.h"

namespace tessera {

class preshing_shared_mutex {
 public:
  preshing_shared_mutex() noexcept = default;
  ~preshing_shared_mutex();
  preshing_shared_mutex(const preshing_shared_mutex&) = delete;
  preshing_shared_mutex& operator=(const preshing_shared_mutex&) = delete;

  void lock();
  bool try_lock() noexcept;
  void unlock();
  void lock_shared();
  bool try_lock_shared() noexcept;
  void unlock_shared();

 private:
  static constexpr int kBits = 21;
  static constexpr std::uint64_t kMask = (std::uint64_t{1} << kBits) - 1;
  static constexpr int kReaders = 0, kWaitToRead = kBits, kWriters = 2 * kBits;
  static constexpr std::uint64_t one(int field) noexcept { return std::uint64_t{1} << field; }
  static constexpr std::uint64_t get(std::uint64_t s, int field) noexcept {
    return (s >> field) & kMask;
  }

  std::atomic<std::uint64_t> status_{0};
  counting_semaphore<> read_gate_{0};
  counting_semaphore<> write_gate_{0};
};

}  // namespace tessera
