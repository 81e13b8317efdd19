// sched/stall_backtrace.cpp — see stall_backtrace.h.
#include "stall_backtrace.h"

#include <signal.h>
#include <ucontext.h>

#include <atomic>
#include <mutex>
#include <thread>

namespace tessera::sched {
namespace {

// One request at a time (guarded by `mu`): the target fills `regs`.
struct request {
  std::mutex mu;
  std::atomic<pthread_t> target{};
  std::atomic<int> state{0};  // 0 idle, 1 asked, 2 answered
  register_set regs;
};
request& the_request() {
  static auto* r = new request;  // leaked: a late signal may still read it
  return *r;
}

struct sigaction previous_action;

void on_sigurg(int sig, siginfo_t* info, void* uc) {
  request& r = the_request();
  if (r.state.load(std::memory_order_acquire) == 1 &&
      pthread_equal(r.target.load(std::memory_order_relaxed), pthread_self()) != 0) {
#if defined(__x86_64__)
    const greg_t* g = static_cast<ucontext_t*>(uc)->uc_mcontext.gregs;
    r.regs = {static_cast<std::uintptr_t>(g[REG_RIP]), static_cast<std::uintptr_t>(g[REG_RSP]),
              static_cast<std::uintptr_t>(g[REG_RBP]), static_cast<std::uintptr_t>(g[REG_RBX]),
              static_cast<std::uintptr_t>(g[REG_R12]), static_cast<std::uintptr_t>(g[REG_R13]),
              static_cast<std::uintptr_t>(g[REG_R14]), static_cast<std::uintptr_t>(g[REG_R15])};
#endif
    r.state.store(2, std::memory_order_release);
    return;
  }
  // Not ours: what SIGURG would have done without us.
  if ((previous_action.sa_flags & SA_SIGINFO) != 0 && previous_action.sa_sigaction != nullptr) {
    previous_action.sa_sigaction(sig, info, uc);
  } else if (previous_action.sa_handler != SIG_DFL && previous_action.sa_handler != SIG_IGN &&
             previous_action.sa_handler != nullptr) {
    previous_action.sa_handler(sig);
  }
}

void install_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigurg;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGURG, &sa, &previous_action);
  });
}

}  // namespace

std::optional<register_set> registers_of_thread(pthread_t thread,
                                                std::chrono::milliseconds timeout) {
  install_once();
  request& r = the_request();
  std::lock_guard lock(r.mu);
  r.target.store(thread, std::memory_order_relaxed);
  r.state.store(1, std::memory_order_release);
  if (pthread_kill(thread, SIGURG) == 0) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (r.state.load(std::memory_order_acquire) != 2 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  // Withdraw the request; a handler already past its check still finishes.
  int asked = 1;
  if (r.state.compare_exchange_strong(asked, 0, std::memory_order_acq_rel)) return std::nullopt;
  const register_set regs = r.regs;
  r.state.store(0, std::memory_order_relaxed);
  return regs;
}

}  // namespace tessera::sched
