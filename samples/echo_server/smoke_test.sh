#!/usr/bin/env bash
# Starts echo_server on a free loopback port, echoes a line through bash's
# /dev/tcp, then stops it with SIGTERM. Usage: smoke_test.sh path/to/echo_server
set -euo pipefail
source "$(dirname "$0")/../start_server.sh"
start_server "$1" --port 0 --workers 2 --idle-timeout 2
exec 3<>"/dev/tcp/127.0.0.1/$port"
echo "hello tessera" >&3
read -r -t 5 reply <&3
exec 3>&-
[ "$reply" = "hello tessera" ] || { echo "echoed '$reply'"; exit 1; }
stop_server
echo "echo_server: echoed a line and stopped on SIGTERM"
