// sched/sigquit.cpp — runtime_options::dump_on_sigquit: the dump of every
// runtime that asked for it, on SIGQUIT. A signal handler may do almost
// nothing, so it only writes to an eventfd; a dumper thread that waits on the
// eventfd writes the dumps (Go's SIGQUIT goroutine dump, without the exit).
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <system_error>
#include <thread>
#include <vector>

#include "internal.h"

namespace tessera::sched {
namespace {

int g_event_fd = -1;  // written once, before the handler is installed

struct sigquit_registry {
  std::mutex mu;
  std::vector<const runtime_impl*> runtimes;  // guarded by mu
};
sigquit_registry& registry() {
  static auto* r = new sigquit_registry;  // leaked on purpose: the dumper outlives main
  return *r;
}

void on_sigquit(int) {
  const int saved = errno;
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(g_event_fd, &one, sizeof one);
  errno = saved;
}

[[noreturn]] void dumper_main() {
  for (;;) {
    std::uint64_t count = 0;
    if (::read(g_event_fd, &count, sizeof count) != static_cast<ssize_t>(sizeof count)) continue;
    auto& r = registry();
    std::lock_guard lock(r.mu);  // a runtime leaves the registry only under it
    for (const runtime_impl* rt : r.runtimes) {
      std::ostringstream os;
      rt->dump(os);
      std::fputs(os.str().c_str(), stderr);
    }
    std::fflush(stderr);
  }
}

// Once per process: the eventfd, the dumper thread, the handler.
void install_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_event_fd = ::eventfd(0, EFD_CLOEXEC);
    if (g_event_fd < 0) {
      throw std::system_error(errno, std::generic_category(),
                              "tessera::runtime: dump_on_sigquit: eventfd");
    }
    std::thread(dumper_main).detach();
    struct sigaction sa {};
    sa.sa_handler = &on_sigquit;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (::sigaction(SIGQUIT, &sa, nullptr) != 0) {
      throw std::system_error(errno, std::generic_category(),
                              "tessera::runtime: dump_on_sigquit: sigaction(SIGQUIT)");
    }
  });
}

}  // namespace

void register_sigquit_dump(const runtime_impl* rt) {
  install_once();
  auto& r = registry();
  std::lock_guard lock(r.mu);
  r.runtimes.push_back(rt);
}

void unregister_sigquit_dump(const runtime_impl* rt) noexcept {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  r.runtimes.erase(std::remove(r.runtimes.begin(), r.runtimes.end(), rt), r.runtimes.end());
}

}  // namespace tessera::sched
