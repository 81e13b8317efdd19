// tessera/detail/tls_access.h — TESSERA_TLS_ACCESSOR: a function that reads a
// thread_local on the thread that calls it, every time it is called.
//
// A fiber may resume on another worker after any park. A compiler may compute
// a thread_local's address once and keep it across calls (GCC treats the
// thread pointer and __tls_get_addr as constant within a function, PR 26461;
// clang keeps the thread pointer in a register, LLVM issue 98479), so an inline
// read after a park can read the previous worker's variable. Every library
// function that reads a thread_local and may be called on both sides of a park
// is therefore out of line and opaque to interprocedural analysis, LTO
// included: GCC's `noipa`; clang has no `noipa`, and `noinline` is enough there,
// since a call to a function that reads memory cannot be merged across a call
// (park) that may write it. tests/migration_test.cpp fails if this breaks.
#pragma once

#if defined(__clang__)
#define TESSERA_TLS_ACCESSOR [[gnu::noinline]]
#else
#define TESSERA_TLS_ACCESSOR [[gnu::noipa]]
#endif
