// Fiber stacks and the stack-overflow reporter (see stack.h).
#include "stack.h"

#include "context.h"  // TESSERA_ASAN

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>

namespace tessera::sched {
namespace {

std::size_t page_size() noexcept {
  static const auto size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

std::size_t round_to_pages(std::size_t n) noexcept {
  const std::size_t p = page_size();
  return (n + p - 1) / p * p;
}

long max_map_count() {
  std::ifstream f("/proc/sys/vm/max_map_count");
  long v = -1;
  f >> v;
  return v;
}

}  // namespace

stack_pool::stack_pool(std::size_t usable_size, std::size_t guard_bytes, std::size_t cache_limit)
    : usable_(round_to_pages(usable_size < 16384 ? 16384 : usable_size)),
      guard_(guard_bytes != 0 ? round_to_pages(guard_bytes) : 0),
      cache_limit_(cache_limit) {}

stack_pool::~stack_pool() {
  for (const auto& s : cache_) unmap(s);
}

stack_mem stack_pool::map_one() {
  const std::size_t total = usable_ + guard_;
  void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  int err = p == MAP_FAILED ? errno : 0;
  if (err == 0 && guard_ != 0 && mprotect(p, guard_, PROT_NONE) != 0) {
    err = errno;
    munmap(p, total);
  }
  if (err != 0) {
    std::string what = "tessera: cannot map a fiber stack of " + std::to_string(usable_) +
                       " bytes" +
                       (guard_ != 0 ? " + " + std::to_string(guard_) + " guard bytes" : "") + " (" +
                       std::to_string(mapped()) + " stacks mapped)";
    if (err == ENOMEM) {
      what += "; each guarded stack takes two kernel mappings and vm.max_map_count is " +
              std::to_string(max_map_count()) +
              ": raise it (sysctl -w vm.max_map_count=262144), lower the number of live "
              "fibers, or set runtime_options::guard_pages = false";
    }
    throw std::system_error(err, std::generic_category(), what);
  }
  return stack_mem{static_cast<char*>(p), total, guard_};
}

void stack_pool::unmap(stack_mem s) noexcept {
#if TESSERA_ASAN
  // The shadow of the frames its fibers left poisoned (redzones of frames
  // switched away from for good) outlives the mapping: clear it, or the next
  // mapping at this address — anybody's, an uninstrumented library's too —
  // starts out "poisoned".
  ASAN_UNPOISON_MEMORY_REGION(s.bottom(), s.usable());
#endif
  munmap(s.map, s.map_size);
}

stack_mem stack_pool::take() {
  {
    std::lock_guard lock(mu_);
    if (!cache_.empty()) {
      stack_mem s = cache_.back();
      cache_.pop_back();
      return s;
    }
  }
  stack_mem s = map_one();
  std::lock_guard lock(mu_);
  ++mapped_;
  return s;
}

void stack_pool::give(stack_mem s) noexcept {
  {
    std::lock_guard lock(mu_);
    if (cache_.size() < cache_limit_) {
      try {
        cache_.push_back(s);
        return;
      } catch (...) {  // fall through: unmap
      }
    }
    --mapped_;
  }
  unmap(s);
}

void stack_pool::take_batch(std::vector<stack_mem>& into, std::size_t n) {
  std::lock_guard lock(mu_);
  while (n-- > 0 && !cache_.empty()) {
    into.push_back(cache_.back());
    cache_.pop_back();
  }
}

void stack_pool::give_batch(std::vector<stack_mem>& from) noexcept {
  for (const auto& s : from) give(s);
  from.clear();
}

std::size_t stack_pool::mapped() const noexcept {
  std::lock_guard lock(mu_);
  return mapped_;
}

// ---- overflow reporting --------------------------------------------------------
namespace {

constinit thread_local const overflow_info* tls_overflow = nullptr;
struct sigaction previous_segv {};
struct sigaction previous_bus {};

// Async-signal-safe formatting: write() and hand-rolled decimal.
void write_str(const char* s) noexcept {
  const auto n = std::strlen(s);
  [[maybe_unused]] const auto r = write(STDERR_FILENO, s, n);
}
void write_num(std::uint64_t v) noexcept {
  char buf[24];
  int i = sizeof buf;
  buf[--i] = '\0';
  do {
    buf[--i] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && i > 0);
  write_str(buf + i);
}

void on_fault(int sig, siginfo_t* info, void* uctx) {
  static constexpr overflow_info none{};
  const overflow_info& o = tls_overflow != nullptr ? *tls_overflow : none;
  const auto* addr = static_cast<const char*>(info->si_addr);
  // A fault in the guard region (or just below it: a frame may skip a little
  // past its low end).
  if (o.guard_hi != nullptr && addr < o.guard_hi && addr + 65536 >= o.guard_lo) {
    write_str("tessera: stack overflow in fiber #");
    write_num(o.fiber_id);
    write_str(" (stack size ");
    write_num(o.stack_size);
    write_str(
        " bytes): it ran into its guard page; give it a bigger stack "
        "(tessera::runtime_options::stack_size)\n");
  }
  // Let the fault take its course: hand off to the previous handler, or restore
  // the default action and return so the faulting instruction kills the process.
  const struct sigaction& prev = sig == SIGBUS ? previous_bus : previous_segv;
  if ((prev.sa_flags & SA_SIGINFO) != 0 && prev.sa_sigaction != nullptr) {
    prev.sa_sigaction(sig, info, uctx);
    return;
  }
  if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler != nullptr) {
    prev.sa_handler(sig);
    return;
  }
  signal(sig, SIG_DFL);
}

}  // namespace

const overflow_info*& current_overflow_info() noexcept {
  return tls_overflow;
}

void install_overflow_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = &on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous_segv);
    sigaction(SIGBUS, &sa, &previous_bus);
  });
}

alt_signal_stack::alt_signal_stack() {
  stack_t current{};
  if (sigaltstack(nullptr, &current) == 0 && (current.ss_flags & SS_DISABLE) == 0) return;
  const std::size_t size = 64 * 1024;
  mem_ = std::malloc(size);
  if (mem_ == nullptr) return;
  stack_t ss{};
  ss.ss_sp = mem_;
  ss.ss_size = size;
  installed_ = sigaltstack(&ss, nullptr) == 0;
}

alt_signal_stack::~alt_signal_stack() {
  if (installed_) {
    stack_t ss{};
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, nullptr);
  }
  std::free(mem_);
}

}  // namespace tessera::sched
