#!/usr/bin/env bash
# Installs what the benchmarks need, once: the Go modules of hrns, of the
# bench module and of each Go peer (each peer has its own go.mod), and the
# Node peers' packages from node/package-lock.json. After it, the driver
# downloads nothing (it builds with GOPROXY=off).
set -euo pipefail
cd "$(dirname "$0")"

export GOTOOLCHAIN=local
for dir in .. . peers/*/; do
	echo "== go mod download in bench/$dir"
	(cd "$dir" && go mod download)
done

if command -v npm >/dev/null; then
	echo "== npm ci in bench/node"
	(cd node && npm ci --no-audit --no-fund)
else
	echo "npm is not installed: the Node peers will be reported as not installed" >&2
fi
