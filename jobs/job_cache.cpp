// The per-thread cache of job records behind job_scope::job's operator new
// (tessera/detail/job_scope.h).
//
// A fork-join job lives for a few hundred nanoseconds: allocated by the
// spawning fiber, freed by whichever worker ran it. With glibc's malloc the
// pair cost about a quarter of skynet's time on one worker (tcache holds 7
// blocks of a size; a group of 10 jobs overflows it into the arena's bins).
// oneTBB keeps task objects in per-thread pools for the same reason. Here a
// thread keeps up to kCachedJobs freed records on a list of its own, with no
// atomics: a record freed on another thread than the one that allocated it
// joins the freeing thread's list, and past the bound goes back to malloc, so
// a thread that only frees caches at most kCachedJobs records.
//
// Under AddressSanitizer the cache is off: recycled records would hide a use
// after free from it.
#include <cstddef>
#include <new>
#include <utility>

#include "tessera/detail/job_scope.h"
#include "tessera/detail/tls_access.h"

namespace tessera::detail {
namespace {

constexpr std::size_t kCachedJobs = 256;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCacheJobs = false;
#else
constexpr bool kCacheJobs = true;
#endif

struct free_block {
  free_block* next;
};

class job_cache {
 public:
  job_cache() = default;
  job_cache(const job_cache&) = delete;
  job_cache& operator=(const job_cache&) = delete;
  ~job_cache() {
    while (head_ != nullptr) ::operator delete(std::exchange(head_, head_->next));
  }
  void* take() noexcept {
    free_block* b = head_;
    if (b == nullptr) return nullptr;
    head_ = b->next;
    --size_;
    return b;
  }
  bool give(void* p) noexcept {
    if (size_ == kCachedJobs) return false;
    head_ = ::new (p) free_block{head_};
    ++size_;
    return true;
  }

 private:
  free_block* head_ = nullptr;
  std::size_t size_ = 0;
};

// The calling thread's cache, looked up afresh at every call: new and delete
// may be inlined into a frame that parks between them.
TESSERA_TLS_ACCESSOR job_cache& this_thread_cache() noexcept {
  thread_local job_cache cache;
  return cache;
}

}  // namespace

void* job_scope::job::operator new(std::size_t size) {
  static_assert(sizeof(job) >= sizeof(free_block));
  if constexpr (kCacheJobs) {
    if (size == sizeof(job)) {
      if (void* p = this_thread_cache().take()) return p;
    }
  }
  return ::operator new(size);
}

void job_scope::job::operator delete(void* p, std::size_t size) noexcept {
  if constexpr (kCacheJobs) {
    if (size == sizeof(job) && this_thread_cache().give(p)) return;
  }
  ::operator delete(p);
}

}  // namespace tessera::detail
