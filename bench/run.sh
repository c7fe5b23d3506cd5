#!/usr/bin/env bash
# Runs the benchmarks and writes docs/performance.md: the one command.
# Flags go to the driver (go run ./cmd/driver -help lists them).
set -euo pipefail
cd "$(dirname "$0")"
exec go run ./cmd/driver "$@"
