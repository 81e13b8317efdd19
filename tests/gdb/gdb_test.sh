#!/usr/bin/env bash
# gdb_test.sh TARGET: debugs TARGET in gdb -batch with Tessera's script
# auto-loaded from the program's own .debug_gdb_scripts section, and checks
# the fiber listing, a parked fiber's backtrace, and that the thread's
# registers are back afterwards.
set -euo pipefail
target=$1
# LeakSanitizer cannot run under ptrace: an ASan build's exit would fail.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
out=$(gdb -nx -batch \
  -iex "set auto-load safe-path $(dirname "$target")" \
  -ex "set pagination off" \
  -ex "break tessera_gdb_ready" \
  -ex run \
  -ex "info tessera-fibers" \
  -ex "tessera-fiber 2 bt" \
  -ex "bt 1" \
  -ex continue \
  "$target" 2>&1)
echo "$out"
fail() { echo "gdb_test: FAIL: $*" >&2; exit 1; }
grep -q '^4 fibers' <<<"$out" || fail "the listing does not count the root and three waiters"
for i in 0 1 2; do
  grep -Eq "parked +\"waiter $i\" +latch 0x[0-9a-f]+" <<<"$out" || fail "no parked \"waiter $i\" on a latch"
done
grep -Eq '^fiber 2 "waiter 0" \[latch 0x' <<<"$out" || fail "tessera-fiber 2 did not name its fiber"
grep -q 'parked_in_gdb_target' <<<"$out" || fail "fiber 2's backtrace does not reach parked_in_gdb_target"
# The registers were put back: the thread's own frame 0 is the breakpoint again,
# and the program runs on to its end.
grep -Eq '^#0 .*tessera_gdb_ready' <<<"$out" || fail "the thread's registers were not restored"
grep -q 'gdb_target: done' <<<"$out" || fail "the program did not finish after the fiber inspection"
echo "gdb_test: ok"
