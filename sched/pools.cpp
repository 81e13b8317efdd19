// sched/pools.cpp — the record and stack pools: fiber records are type-stable (recycled,
// never freed), cached per worker; stacks come from the runtime's stack_pool
// through a per-worker cache.
#include "internal.h"

#include <algorithm>
#include <mutex>

// The debugger's view of the records (debugger.cpp).
extern "C" {
extern tessera::sched::fiber_record* const* volatile tessera_debug_records;
extern volatile std::size_t tessera_debug_record_count;
}

namespace tessera::sched {

namespace {

// Process-wide, type-stable pool of fiber records: never freed (docs/design.md: a stale unpark must
// stay harmless).
struct record_pool {
  std::mutex mu;
  std::vector<fiber_record*> free;
  std::vector<fiber_record*> all;  // every record made, for the dump
};
record_pool& records() {
  static auto* pool = new record_pool;  // leaked on purpose: records outlive everything
  return *pool;
}

}  // namespace

fiber_record* new_record() {
  {
    auto& pool = records();
    std::lock_guard lock(pool.mu);
    if (!pool.free.empty()) {
      fiber_record* f = pool.free.back();
      pool.free.pop_back();
      return f;
    }
  }
  auto* f = new fiber_record;  // never deleted: type-stable by design
  f->w.ops = &fiber_park_ops;
  f->w.context = f;
  auto& pool = records();
  std::lock_guard lock(pool.mu);
  pool.all.push_back(f);
  tessera_debug_records = pool.all.data();
  tessera_debug_record_count = pool.all.size();
  return f;
}

std::vector<fiber_record*> all_records() {
  auto& pool = records();
  std::lock_guard lock(pool.mu);
  return pool.all;
}

void pool_records(std::vector<fiber_record*>& batch) {
  auto& pool = records();
  std::lock_guard lock(pool.mu);
  pool.free.insert(pool.free.end(), batch.begin(), batch.end());
  batch.clear();
}

fiber_record* worker::take_record() {
  if (record_cache_.empty()) return new_record();
  fiber_record* f = record_cache_.back();
  record_cache_.pop_back();
  return f;
}

void worker::recycle(fiber_record* f) noexcept {
  // Off the lists the dump and the watchdog read. A finished fiber left them
  // already; an idle runner reclaimed at teardown has not, and a later
  // runtime allocated at its runtime's address would list it as its own.
  f->listed_in.store(nullptr, std::memory_order_relaxed);
  if (record_cache_.size() >= kRecordCache) pool_records(record_cache_);
  record_cache_.push_back(f);
}

stack_mem worker::take_stack() {
  if (stack_cache_.empty()) rt.stacks.take_batch(stack_cache_, 32);
  if (stack_cache_.empty()) return rt.stacks.take();
  const stack_mem s = stack_cache_.back();
  stack_cache_.pop_back();
  return s;
}

void worker::give_stack(stack_mem s) noexcept {
  if (stack_cache_.size() >= kStackCache) {
    for (std::size_t i = 0; i < kStackCache / 2; ++i) {
      rt.stacks.give(stack_cache_.back());
      stack_cache_.pop_back();
    }
  }
  stack_cache_.push_back(s);
}

// ---- records shared with the public face -------------------------------------------
void release_record(fiber_record* f) noexcept {
  if (f->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (worker* w = current_worker()) {
    w->recycle(f);
  } else {
    std::vector<fiber_record*> one{f};
    pool_records(one);
  }
}

}  // namespace tessera::sched

namespace tessera::sched {

void fiber_record::set_name(std::string_view n) noexcept {
  const std::size_t len = std::min(n.size(), name.size() - 1);
  // The terminator first: a dump reading meanwhile sees a shorter name, never
  // one that runs past the array.
  name[len].store('\0', std::memory_order_relaxed);
  for (std::size_t i = 0; i < len; ++i) name[i].store(n[i], std::memory_order_relaxed);
}

// Not instrumented: the owner writes these at a switch or a start without
// synchronising with a diagnostic reader, which takes what it finds.
__attribute__((no_sanitize("thread"))) stack_mem fiber_record::stack_snapshot() const noexcept {
  const volatile stack_mem* s = &stack;
  return stack_mem{s->map, s->map_size, s->guard};
}

__attribute__((no_sanitize("thread"))) const void* fiber_record::context_snapshot() const noexcept {
  return *static_cast<const void* const volatile*>(static_cast<const void*>(&ctx));
}

std::string fiber_record::get_name() const {
  std::string out;
  for (const auto& c : name) {
    const char ch = c.load(std::memory_order_relaxed);
    if (ch == '\0') break;
    out.push_back(ch);
  }
  return out;
}

}  // namespace tessera::sched
