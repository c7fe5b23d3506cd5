#!/usr/bin/env bash
# pgcost.sh: what hrns serve costs a PostgreSQL server per session turn.
#
# Runs hrns serve on PostgreSQL behind cmd/pgcount (a proxy that counts the
# protocol's round trips, statements and rows), runs sessions of the bench's
# task (5 tool calls answered by the client through the SDK, then the
# answer: 6 model turns) with sessload, and reads, over the measured
# sessions: the proxy's counts, pg_stat_database of a database of its own
# (transactions, rows read and written) and the WAL the server wrote
# (pg_current_wal_lsn; the WAL is the whole cluster's, so other work on the
# server adds to it: the script repeats and the minimum is the figure). Then
# it reads the same counts for a server sitting idle (leases, polls). Each
# count of replicas (REPLICAS, default "1 2 3") gets a new database and its
# own servers, all pinned to CPU 1, sessions spread over them round-robin.
# The PostgreSQL server's CPU is read from /proc (every process named
# postgres): like the WAL, it counts the whole server's work.
#
#   ./pgcost.sh                 # PGURL, SESSIONS, REPS, IDLE_SECONDS to change
#
# Needs psql, taskset, a PostgreSQL server (default the store tests' one) on
# which it creates and drops the database hrns_pgcost.
set -euo pipefail
cd "$(dirname "$0")"

PGHOST_URL=${PGURL:-postgres://postgres@127.0.0.1:5432}
SESSIONS=${SESSIONS:-200}
CONCURRENCY=${CONCURRENCY:-16}
REPS=${REPS:-3}
REPLICAS=${REPLICAS:-1 2 3}
IDLE_SECONDS=${IDLE_SECONDS:-20}
TURNS_PER_SESSION=6
DB=hrns_pgcost
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	psql "$PGHOST_URL/postgres" -XqAt -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

go build -o "$tmp/" ./cmd/pgcount ./cmd/sessload ./cmd/mock
(cd .. && go build -o "$tmp/hrns" ./cmd/hrns)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { for _ in $(seq 100); do curl -sf "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "$1 did not answer" >&2; return 1; }
q() { psql "$PGHOST_URL/$DB" -XqAt -c "$1"; }
pgcpu() {
	# CPU ticks (user + system) of every postgres process
	local t=0 pid f
	for pid in $(pgrep -x postgres); do
		f=$(cut -d')' -f2 "/proc/$pid/stat" 2>/dev/null) || continue
		set -- $f
		t=$((t + ${12} + ${13}))
	done
	echo "$t"
}
stats() {
	# transactions, tuples read (returned + fetched), written (ins + upd + del), WAL LSN in bytes, WAL syncs, postgres CPU ticks
	echo "$(q "SELECT d.xact_commit + d.xact_rollback, d.tup_returned + d.tup_fetched, d.tup_inserted + d.tup_updated + d.tup_deleted,
	          pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, w.wal_sync
	   FROM pg_stat_database d, pg_stat_wal w WHERE d.datname = current_database()" | tr '|' ' ') $(pgcpu)"
}

HZ=$(getconf CLK_TCK)
mport=$(free_port); pport=$(free_port); hport=$(free_port)
taskset -c 0 "$tmp/mock" --addr "127.0.0.1:$mport" >"$tmp/mock.log" 2>&1 & pids+=($!)
taskset -c 0 "$tmp/pgcount" --listen "127.0.0.1:$pport" --upstream "${PGHOST_URL#postgres://*@}" --http "127.0.0.1:$hport" >"$tmp/pgcount.log" 2>&1 & pids+=($!)
wait_http "http://127.0.0.1:$hport/counts"

echo "# $(date -u +%FT%TZ) hrns $(git -C .. rev-parse --short HEAD); $SESSIONS sessions of $TURNS_PER_SESSION turns, $CONCURRENCY at once; figures per turn; PostgreSQL $(psql "$PGHOST_URL/postgres" -XqAt -c 'SHOW server_version'); load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %-4s %6s %6s %6s %6s %6s %6s %6s %6s %6s %7s %6s %6s %6s %6s %6s\n' replicas rep stmts rtrips parses rowsrt notif xacts tupread tupwrt walsync walB pgCPUms conns cancels KBtoPG KBfromPG
for nrep in $REPLICAS; do
	psql "$PGHOST_URL/postgres" -XqAt -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null 2>&1
	spids=(); urls=()
	for _ in $(seq "$nrep"); do
		sport=$(free_port)
		OPENAI_API_KEY=x HRNS_API_KEYS=k taskset -c 1 "$tmp/hrns" serve --addr "127.0.0.1:$sport" \
			--db "postgres://postgres@127.0.0.1:$pport/$DB?sslmode=disable" --model bench-model \
			--base-url "http://127.0.0.1:$mport/v1" >>"$tmp/serve.log" 2>&1 & spids+=($!)
		urls+=("http://127.0.0.1:$sport")
		wait_http "http://127.0.0.1:$sport/healthz"
	done
	url=$(IFS=,; echo "${urls[*]}")
	load() { taskset -c 0 "$tmp/sessload" "$1" --url "$2" --key k --sessions "$3" --concurrency "$CONCURRENCY" >"$tmp/load.json"; }
	load warmup "${urls[0]}" 20
	for rep in $(seq "$REPS"); do
		curl -sf -X POST "http://127.0.0.1:$hport/reset"
		read -r x0 r0 w0 l0 s0 c0 < <(stats)
		load throughput "$url" "$SESSIONS"
		read -r x1 r1 w1 l1 s1 c1 < <(stats)
		curl -sf "http://127.0.0.1:$hport/counts" >"$tmp/counts.json"
		python3 - "$tmp/counts.json" "$SESSIONS" "$TURNS_PER_SESSION" "$nrep" "$rep" "$((x1-x0))" "$((r1-r0))" "$((w1-w0))" "$((l1-l0))" "$((s1-s0))" "$((c1-c0))" "$HZ" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); n = int(sys.argv[2]) * int(sys.argv[3])
x, r, w, l, s, cpu = (int(v) for v in sys.argv[6:12]); hz = int(sys.argv[12])
print("%-8s %-4s %6.1f %6.1f %6.2f %6.1f %6.1f %6.1f %6.0f %6.1f %6.2f %7.0f %6.2f %6d %6d %6.1f %6.1f" % (
    sys.argv[4], sys.argv[5], c["statements"]/n, c["round_trips"]/n, c["parses"]/n, c["rows_returned"]/n,
    c["notifications"]/n, x/n, r/n, w/n, s/n, l/n, cpu*1000/hz/n, c["connections"], c["cancel_requests"], c["bytes_to_server"]/n/1000, c["bytes_to_client"]/n/1000))
print("  replicas %s rep %s statements by tag per turn: %s" % (sys.argv[4], sys.argv[5],
    json.dumps({k: round(v/n, 2) for k, v in sorted(c["statements_by_tag"].items())})), file=sys.stderr)
for sql, v in sorted(c["executions_by_sql"].items(), key=lambda kv: -kv[1]):
    print("    %6.2f  %s" % (v/n, sql), file=sys.stderr)
PY
	done
	curl -sf -X POST "http://127.0.0.1:$hport/reset"
	read -r x0 r0 w0 l0 s0 c0 < <(stats)
	sleep "$IDLE_SECONDS"
	read -r x1 r1 w1 l1 s1 c1 < <(stats)
	curl -sf "http://127.0.0.1:$hport/counts" | python3 -c '
import json, sys
c = json.load(sys.stdin); s = float(sys.argv[1])
print("  idle, %s replica(s), per second over %ss: statements %.2f, round trips %.2f, rows returned %.2f, notifications %.2f; by tag %s" % (
    sys.argv[2], sys.argv[1], c["statements"]/s, c["round_trips"]/s, c["rows_returned"]/s, c["notifications"]/s,
    json.dumps({k: round(v/s, 2) for k, v in c["statements_by_tag"].items()})))' "$IDLE_SECONDS" "$nrep"
	for p in "${spids[@]}"; do kill "$p"; done
	wait "${spids[@]}" 2>/dev/null || true
done
