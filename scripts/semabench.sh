#!/usr/bin/env bash
# The README's main job: bench/semabench.sh (semabench, then fiberbench). Every
# benchmark driver, peer, table and plot lives under bench/.
exec "$(dirname "$0")/../bench/semabench.sh" "$@"
