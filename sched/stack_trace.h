// sched/stack_trace.h — backtraces of switched-out fibers, and names for code
// addresses (internal; not installed).
//
// A parked fiber's registers sit at the top of its stack, where Boost.Context's
// jump_fcontext saved them (x86-64 System V, Boost 1.74+): at the saved stack
// pointer `ctx`, +0x08 r12, +0x10 r13, +0x18 r14, +0x20 r15, +0x28 rbx,
// +0x30 rbp, +0x38 the address it resumes at, and its stack pointer is then
// ctx + 0x40. tools/gdb/tessera-gdb.py reads the same layout; context_layout below
// names it once for both; Dump.ShowsEachParkedFibersNameAndBacktrace
// (tests/diagnostics_test.cpp) and the gdb_fibers test fail if it changes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::sched {

/// Offsets, in bytes from a saved context's stack pointer, of what
/// jump_fcontext saved there (see the header comment).
struct context_layout {
  static constexpr std::size_t r12 = 0x08, r13 = 0x10, r14 = 0x18, r15 = 0x20, rbx = 0x28,
                               rbp = 0x30, rip = 0x38, frame_size = 0x40;
};

/// The registers an unwind starts from (x86-64's callee-saved ones, the
/// stack pointer and the instruction pointer).
struct register_set {
  std::uintptr_t rip = 0, rsp = 0, rbp = 0, rbx = 0, r12 = 0, r13 = 0, r14 = 0, r15 = 0;
};

/// As backtrace_of, from a register set (a signal's ucontext: the stall
/// report's running fiber, whose stack may change under the walk).
std::vector<std::uintptr_t> backtrace_from(const register_set& r, const void* stack_lo,
                                           const void* stack_hi, std::size_t max_frames = 48);

/// The code addresses of a switched-out context's frames, innermost first
/// (the first is where it resumes), at most `max_frames` of them. The walk
/// (libunwind, with the binaries' DWARF call-frame information) reads memory
/// only inside [stack_lo, stack_hi) and the loaded objects' segments, so a
/// fiber that resumes and overwrites its frames meanwhile yields a wrong
/// trace, never a crash. Empty where it cannot unwind (not x86-64).
std::vector<std::uintptr_t> backtrace_of(const void* ctx, const void* stack_lo,
                                         const void* stack_hi, std::size_t max_frames = 48);

/// "function at file:line" of the call a return address returns from (looked
/// up one byte back, inside the call), at its first inlined level outside
/// tessera/runtime.h — the user's line, not an inlined spawn template of
/// ours; "function+0x1c" without debug information; else the bare address.
std::string describe_call_site(std::uintptr_t pc);

/// Writes the frames of `trace`, every inlined level, one per line after
/// `indent`, as Go's tracebacks do: the runtime's own frames on top are left
/// out but for the public call among them (tessera::mutex::lock), and so is
/// what called the fiber's body at the bottom.
void write_backtrace(std::ostream& os, const std::vector<std::uintptr_t>& trace,
                     std::string_view indent = "    ");

}  // namespace tessera::sched
