#!/usr/bin/env bash
# deadlock's report: both named fibers with the mutex each waits for, a
# backtrace through the function that took the second lock, the cycle with
# each mutex's holder (in every build), the live dump before it, and run()
# throwing deadlock_error (exit status 1).
set -uo pipefail
out=$("$1" --dump 2>&1)
status=$?
echo "$out"
fail() { echo "report_test: FAIL: $*" >&2; exit 1; }
((status == 1)) || fail "exit status $status, expected 1"
grep -q '^tessera: runtime dump: 2 workers' <<<"$out" || fail "no dump"
grep -q '^tessera: deadlock: all 3 fibers are parked' <<<"$out" || fail "no deadlock report"
# A wait is dated at the first look at it, so the dump (when it looks first)
# may show it in microseconds, and the report on a loaded machine in seconds.
for who in transfer audit; do
  grep -Eq "^fiber [0-9]+ \"$who\" \[mutex 0x[0-9a-f]+, [0-9.]+ (us|ms|s)(, .*)?\] created at " <<<"$out" ||
    fail "no line for the \"$who\" fiber"
done
grep -Eq '^    (\(anonymous namespace\)::)?transfer' <<<"$out" || fail "no backtrace through transfer()"
# The holders are known in every build: the cycle, each fiber's mutex held by the other.
grep -q '^tessera: the waits form a cycle:' <<<"$out" || fail "no cycle"
for who in transfer audit; do
  grep -Eq "^  fiber [0-9]+ \"$who\" waits for mutex 0x[0-9a-f]+ held by fiber [0-9]+" <<<"$out" ||
    fail "the cycle does not name the holder of \"$who\"'s mutex"
done
grep -q '^caught tessera::deadlock_error' <<<"$out" || fail "run() did not throw deadlock_error"
echo "report_test: ok"
