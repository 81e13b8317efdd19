# Sourced by the samples' smoke tests: start_server BINARY ARGS... starts a
# server that prints "listening on HOST:PORT", waits for that line, and sets
# $pid, $port and $out (its output file); stop_server sends SIGTERM and checks
# that it exits within 5 s with status 0 (a leak or sanitizer report at
# shutdown is a non-zero exit), printing "stopped"; await_stopped does those
# checks after a SIGTERM the caller sent itself.
start_server() {
  out="$(mktemp)"
  "$@" >"$out" &
  pid=$!
  trap 'rm -f "$out"; kill "$pid" 2>/dev/null || true' EXIT
  for _ in $(seq 1 100); do grep -q "listening on" "$out" && break; sleep 0.05; done
  port="$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$out")"
  [ -n "$port" ] || { echo "$1 did not report its address"; cat "$out"; exit 1; }
}
stop_server() {
  kill -TERM "$pid"
  await_stopped
}
# After a SIGTERM sent by the caller: the same checks as stop_server.
await_stopped() {
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  if kill -0 "$pid" 2>/dev/null; then echo "the server did not stop on SIGTERM"; exit 1; fi
  local status=0
  wait "$pid" || status=$?
  if [ "$status" -ne 0 ]; then echo "the server exited with status $status"; cat "$out"; exit 1; fi
  grep -q stopped "$out" || { echo "the server did not stop cleanly"; cat "$out"; exit 1; }
}
