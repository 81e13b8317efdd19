// sched/stack_trace.cpp — walking a switched-out fiber's stack (libunwind) and
// naming code addresses (libbacktrace).
//
// Why these two libraries: Boost.Stacktrace and glibc's backtrace() unwind only
// the calling thread from where it stands; a parked fiber is nobody's current
// stack. libunwind can start from any register set: we hand it the registers
// jump_fcontext saved, through an address space of our own whose memory reads
// are confined to the fiber's stack and the loaded objects (a remote-style
// unwind of our own process). That is what makes the walk safe on a fiber that
// another worker may resume at any moment: it may read stale words, it cannot
// fault. Naming is the other half: GCC's libbacktrace (what Boost.Stacktrace
// and the sanitizers use underneath) reads DWARF for function, file and line
// — every inlined level of them, which is how a creation site names the
// user's line rather than the inlined spawn template — and falls back to the
// symbol table.
#include "stack_trace.h"

#include <link.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>

#if defined(__x86_64__)
#include <dlfcn.h>
#include <libunwind.h>  // types and constants only: the library is dlopen()ed
#endif

#include <backtrace.h>  // GCC's libbacktrace
#include <cxxabi.h>

namespace tessera::sched {
namespace {

#if defined(__x86_64__)

struct segment {
  std::uintptr_t lo, hi;
};

// What the unwind may read: the fiber's stack, and every loaded object's
// PT_LOAD segments (its code and call-frame tables).
struct unwind_arg {
  unw_word_t regs[UNW_X86_64_RIP + 1] = {};
  std::uintptr_t stack_lo = 0, stack_hi = 0;
  std::vector<segment> segments;
  bool readable(std::uintptr_t a) const noexcept {
    if (a >= stack_lo && a + sizeof(unw_word_t) <= stack_hi) return true;
    for (const segment& s : segments)
      if (a >= s.lo && a + sizeof(unw_word_t) <= s.hi) return true;
    return false;
  }
};

// Reads another fiber's frames: not instrumented, since the sanitizers would
// see poisoned locals of frames that are not ours.
__attribute__((no_sanitize("address", "thread", "undefined"))) unw_word_t read_word(
    std::uintptr_t a) noexcept {
  return *reinterpret_cast<const volatile unw_word_t*>(a);
}

int access_mem(unw_addr_space_t, unw_word_t addr, unw_word_t* val, int write, void* arg) {
  const auto* a = static_cast<const unwind_arg*>(arg);
  if (write != 0 || !a->readable(addr)) return -UNW_EINVAL;
  *val = read_word(addr);
  return 0;
}

int access_reg(unw_addr_space_t, unw_regnum_t reg, unw_word_t* val, int write, void* arg) {
  const auto* a = static_cast<const unwind_arg*>(arg);
  if (write != 0 || reg < 0 || reg > UNW_X86_64_RIP) return -UNW_EBADREG;
  *val = a->regs[reg];
  return 0;
}

int no_fpreg(unw_addr_space_t, unw_regnum_t, unw_fpreg_t*, int, void*) {
  return -UNW_EBADREG;
}

// libunwind, loaded on first use with RTLD_LOCAL rather than linked: linked,
// libunwind.so (which libunwind-x86_64.so needs) exports the _Unwind_*
// functions and so takes over every C++ exception's unwinding in the
// program, and glibc's backtrace() besides. Loaded locally, it serves only
// these calls; a program without it (Debian's libunwind8) gets no
// backtraces and nothing else changes.
struct libunwind_api {
  decltype(&unw_get_accessors) get_accessors;
  unw_addr_space_t* local_addr_space;
  decltype(&unw_create_addr_space) create_addr_space;
  decltype(&unw_set_caching_policy) set_caching_policy;
  decltype(&unw_init_remote) init_remote;
  decltype(&unw_get_reg) get_reg;
  decltype(&unw_step) step;
  unw_addr_space_t space;  // ours: see fiber_address_space()
};

template <class T>
bool find(void* lib, const char* name, T& out) {
  out = reinterpret_cast<T>(dlsym(lib, name));
  return out != nullptr;
}

const libunwind_api* libunwind() {
  static const libunwind_api* const api = []() -> const libunwind_api* {
    void* lib = dlopen("libunwind-x86_64.so.8", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return nullptr;
    static libunwind_api a{};
    if (!find(lib, "_Ux86_64_get_accessors", a.get_accessors) ||
        !find(lib, "_Ux86_64_local_addr_space", a.local_addr_space) ||
        !find(lib, "_Ux86_64_create_addr_space", a.create_addr_space) ||
        !find(lib, "_Ux86_64_set_caching_policy", a.set_caching_policy) ||
        !find(lib, "_Ux86_64_init_remote", a.init_remote) ||
        !find(lib, "_Ux86_64_get_reg", a.get_reg) || !find(lib, "_Ux86_64_step", a.step)) {
      return nullptr;
    }
    // One address space for the process: the accessors are stateless (the
    // cursor's arg carries the fiber), and it caches the call-frame tables.
    unw_accessors_t acc = *a.get_accessors(*a.local_addr_space);
    acc.access_mem = access_mem;
    acc.access_reg = access_reg;
    acc.access_fpreg = no_fpreg;
    acc.resume = nullptr;
    a.space = a.create_addr_space(&acc, 0);
    if (a.space == nullptr) return nullptr;
    a.set_caching_policy(a.space, UNW_CACHE_GLOBAL);
    return &a;
  }();
  return api;
}

#endif

}  // namespace

std::vector<std::uintptr_t> backtrace_from(const register_set& r, const void* stack_lo,
                                           const void* stack_hi, std::size_t max_frames) {
  std::vector<std::uintptr_t> out;
#if defined(__x86_64__)
  unwind_arg a;
  a.stack_lo = reinterpret_cast<std::uintptr_t>(stack_lo);
  a.stack_hi = reinterpret_cast<std::uintptr_t>(stack_hi);
  if (r.rsp < a.stack_lo || r.rsp >= a.stack_hi) return out;
  a.regs[UNW_X86_64_R12] = r.r12;
  a.regs[UNW_X86_64_R13] = r.r13;
  a.regs[UNW_X86_64_R14] = r.r14;
  a.regs[UNW_X86_64_R15] = r.r15;
  a.regs[UNW_X86_64_RBX] = r.rbx;
  a.regs[UNW_X86_64_RBP] = r.rbp;
  a.regs[UNW_X86_64_RIP] = r.rip;
  a.regs[UNW_X86_64_RSP] = r.rsp;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto* segs = static_cast<std::vector<segment>*>(data);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& p = info->dlpi_phdr[i];
          if (p.p_type != PT_LOAD) continue;
          const std::uintptr_t lo = info->dlpi_addr + p.p_vaddr;
          segs->push_back({lo, lo + p.p_memsz});
        }
        return 0;
      },
      &a.segments);
  const libunwind_api* api = libunwind();
  if (api == nullptr) return out;
  unw_cursor_t cursor;
  if (api->init_remote(&cursor, api->space, &a) != 0) return out;
  do {
    unw_word_t ip = 0;
    if (api->get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
    out.push_back(ip);
  } while (out.size() < max_frames && api->step(&cursor) > 0);
#else
  (void)r, (void)stack_lo, (void)stack_hi, (void)max_frames;
#endif
  return out;
}

std::vector<std::uintptr_t> backtrace_of(const void* ctx, const void* stack_lo,
                                         const void* stack_hi, std::size_t max_frames) {
#if !defined(__x86_64__)
  (void)ctx, (void)stack_lo, (void)stack_hi, (void)max_frames;
  return {};
#else
  const auto sp = reinterpret_cast<std::uintptr_t>(ctx);
  if (ctx == nullptr || sp < reinterpret_cast<std::uintptr_t>(stack_lo) ||
      sp + context_layout::frame_size > reinterpret_cast<std::uintptr_t>(stack_hi)) {
    return {};
  }
  register_set r;
  r.r12 = read_word(sp + context_layout::r12);
  r.r13 = read_word(sp + context_layout::r13);
  r.r14 = read_word(sp + context_layout::r14);
  r.r15 = read_word(sp + context_layout::r15);
  r.rbx = read_word(sp + context_layout::rbx);
  r.rbp = read_word(sp + context_layout::rbp);
  r.rip = read_word(sp + context_layout::rip);
  r.rsp = sp + context_layout::frame_size;
  return backtrace_from(r, stack_lo, stack_hi, max_frames);
#endif
}

namespace {

backtrace_state* symbolizer() {
  // One for the process, thread-safe (libbacktrace's threaded mode); it
  // reads each binary's DWARF once, on first use.
  static backtrace_state* const state = backtrace_create_state(
      nullptr, /*threaded=*/1, [](void*, const char*, int) {}, nullptr);
  return state;
}

std::string demangled(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && d != nullptr ? d : name;
  std::free(d);
  return out;
}

std::string basename_of(const std::string& file) {
  const std::size_t slash = file.rfind('/');
  return slash == std::string::npos ? file : file.substr(slash + 1);
}

// One inlined level of a code address: its function, and where in it.
struct code_level {
  std::string function;
  std::string file;  // empty without debug information
  int line = 0;
};

std::vector<code_level> levels_of(std::uintptr_t at) {
  std::vector<code_level> levels;
  backtrace_pcinfo(
      symbolizer(), at,
      [](void* data, std::uintptr_t, const char* file, int line, const char* function) -> int {
        if (function == nullptr) return 0;
        static_cast<std::vector<code_level>*>(data)->push_back(
            {demangled(function), file != nullptr ? file : "", line});
        return 0;
      },
      [](void*, const char*, int) {}, &levels);
  if (!levels.empty()) return levels;
  // No debug information: the symbol table, as function+offset.
  backtrace_syminfo(
      symbolizer(), at,
      [](void* data, std::uintptr_t addr, const char* symbol, std::uintptr_t start,
         std::uintptr_t) {
        if (symbol == nullptr) return;
        char offset[32];
        std::snprintf(offset, sizeof offset, "+%#llx",
                      static_cast<unsigned long long>(addr - start));
        static_cast<std::vector<code_level>*>(data)->push_back({demangled(symbol) + offset, "", 0});
      },
      [](void*, const char*, int) {}, &levels);
  return levels;
}

std::string text_of(const code_level& l) {
  if (l.file.empty()) return l.function;
  return l.function + " at " + basename_of(l.file) + ":" + std::to_string(l.line);
}

std::string bare_address(std::uintptr_t pc) {
  char addr[32];
  std::snprintf(addr, sizeof addr, "%#llx", static_cast<unsigned long long>(pc));
  return addr;
}

}  // namespace

std::string describe_call_site(std::uintptr_t pc) {
  // The spawn templates are inlined into their caller, so the innermost
  // levels may be code of tessera/runtime.h: the first level that is not
  // names the user's line.
  constexpr std::string_view ours = "tessera/runtime.h";
  const std::vector<code_level> levels = levels_of(pc - 1);
  for (const code_level& l : levels) {
    const std::string_view file(l.file);
    if (file.size() < ours.size() || file.substr(file.size() - ours.size()) != ours) {
      return text_of(l);
    }
  }
  return levels.empty() ? bare_address(pc) : text_of(levels.back());
}

namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Code of the runtime itself, told by what it is: every function of the
// library is in namespace tessera, and its insides are in tessera::detail,
// tessera::sched, an unnamed namespace within tessera, or the park façade and
// the switch (Boost.Context's fcontext). Where the code sits (the program, a
// test, a sample) does not matter, nor what a user names a namespace of its
// own within tessera. A template's demangled name may begin with its return
// type.
bool internal_name(std::string_view f) {
  for (std::string_view ours :
       {"tessera::detail::", "tessera::sched::", "tessera::park", "fiber_park", "jump_fcontext",
        "make_fcontext", "ontop_fcontext", "tessera::(anonymous namespace)::",
        "tessera::io::(anonymous namespace)::", "tessera::net::(anonymous namespace)::",
        "tessera::pq::(anonymous namespace)::", "tessera::tls::(anonymous namespace)::"}) {
    if (starts_with(f, ours)) return true;
  }
  return f.substr(0, 40).find(" tessera::detail::") != std::string_view::npos;
}

// Without debug information, the frame of our wrapper that calls a fiber's
// body is where the body was inlined: it is the user's. (The wrapper is a
// captureless lambda's function pointer: GCC names it `_FUN`, clang
// `__invoke`.)
bool internal(const code_level& l) {
  const std::string_view f(l.function);
  if (l.file.empty() && f.find("unique_function") != std::string_view::npos &&
      (f.find("_FUN") != std::string_view::npos ||
       f.find("::__invoke(") != std::string_view::npos)) {
    return false;
  }
  return internal_name(f);
}

// The public face of the runtime (tessera::mutex::lock, tessera::fiber::join):
// the one internal frame worth showing, on top.
bool public_entry(const code_level& l) {
  return starts_with(l.function, "tessera::") && !internal_name(l.function);
}

// What runs the fiber's body: std::invoke, std::apply and our wrappers.
bool plumbing(const code_level& l) {
  if (internal(l) || l.file.find("/c++/") != std::string::npos) return true;
  const std::string_view f(l.function);
  for (std::string_view std_call : {"std::", "__invoke", "invoke<", "apply<", "__apply_impl"}) {
    if (starts_with(f, std_call)) return true;
  }
  return false;
}

}  // namespace

void write_backtrace(std::ostream& os, const std::vector<std::uintptr_t>& trace,
                     std::string_view indent) {
  std::vector<code_level> frames;  // every inlined level, innermost first
  for (std::size_t i = 0; i < trace.size(); ++i) {
    std::vector<code_level> levels = levels_of(trace[i] - 1);
    if (levels.empty()) levels.push_back({bare_address(trace[i]), "", 0});
    frames.insert(frames.end(), levels.begin(), levels.end());
  }
  // As Go hides its runtime's frames: from the top, the runtime's own frames
  // go, but for the outermost public call among them (the mutex's lock());
  // from the bottom, what called the fiber's body.
  std::size_t first = 0;
  while (first < frames.size() && internal(frames[first])) ++first;
  if (first > 0) {
    for (std::size_t k = first; k-- > 0;) {
      if (public_entry(frames[k])) {
        first = k;
        break;
      }
    }
  }
  std::size_t last = frames.size();
  while (last > first && plumbing(frames[last - 1])) --last;
  for (std::size_t i = first; i < last; ++i) os << indent << text_of(frames[i]) << '\n';
}

}  // namespace tessera::sched
