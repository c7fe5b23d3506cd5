package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Target 5 (issue 21): what hrns serve costs a PostgreSQL server per
// session turn. For each count of -sessions-replicas, the replicas run on
// a fresh schema through bench/cmd/pgcount, a proxy (pinned to the mock
// CPU) that reads the protocol and counts round trips, statements, rows,
// notifications and bytes (rows written are not counted: hrns writes in statements whose
// command tag is a SELECT's); sessions run to their end as in the throughput
// job, and the counts over the measured sessions are divided by their
// model turns. The WAL is read from the server before and after
// (pg_current_wal_lsn): it is the whole cluster's, so other work on the
// server adds to it. Then the same counts with the replicas sitting idle
// for -pgcost-idle: leases, the dispatchers' checks.

// pgCounts are pgcount's counts (GET /counts), the fields the report uses.
type pgCounts struct {
	Connections   int64 `json:"connections"`
	RoundTrips    int64 `json:"round_trips"`
	Statements    int64 `json:"statements"`
	RowsReturned  int64 `json:"rows_returned"`
	Notifications int64 `json:"notifications"`
	BytesToServer int64 `json:"bytes_to_server"`
	BytesToClient int64 `json:"bytes_to_client"`
}

// pgcostRow is one count of replicas.
type pgcostRow struct {
	replicas int
	err      error
	turns    int      // model turns measured
	busy     pgCounts // over the measured sessions
	wal      int64    // bytes of WAL over them
	idle     pgCounts // over the idle period
	idleFor  time.Duration
}

// pgcostResult is what the job measured, or why not.
type pgcostResult struct {
	err  error
	rows []*pgcostRow
}

// measurePGCost runs the job; nil when PostgreSQL is not measured.
func measurePGCost(ctx context.Context, e *env, o *options) *pgcostResult {
	so := &o.sessions
	counts, _ := so.replicaCounts()
	if !so.run || !o.pgcost || !strings.Contains(so.stores, "postgres") || len(counts) == 0 {
		return nil
	}
	res := &pgcostResult{}
	fail := func(err error) *pgcostResult { res.err = err; return res }
	sr, newDB := e.storeFor(ctx, "postgres", so)
	if sr.err != nil {
		return fail(sr.err)
	}
	if err := e.goBuild(ctx, e.benchDir, "-o", e.bin+"/", "./cmd/pgcount"); err != nil {
		return fail(err)
	}
	u, err := url.Parse(so.postgres)
	if err != nil {
		return fail(err)
	}
	listen, err := freeAddr()
	if err != nil {
		return fail(err)
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return fail(err)
	}
	argv := e.pin.command(e.pin.mockCPU, []string{filepath.Join(e.bin, "pgcount"), "--listen", listen, "--upstream", u.Host, "--http", httpAddr})
	proxy := exec.CommandContext(ctx, argv[0], argv[1:]...)
	proxy.Stderr = e.log
	proxy.Cancel = func() error { return proxy.Process.Signal(syscall.SIGTERM) }
	if err := proxy.Start(); err != nil {
		return fail(fmt.Errorf("starting pgcount: %w", err))
	}
	defer func() { proxy.Process.Kill(); proxy.Wait() }()
	pc := &pgcount{base: "http://" + httpAddr}
	if err := pc.wait(ctx); err != nil {
		return fail(err)
	}
	m, err := e.startMock(ctx, o.mockCPU, o.toolCalls, o.argChunks, o.textChunks)
	if err != nil {
		return fail(err)
	}
	defer m.stop()
	for _, n := range counts {
		logf(e.log, "pgcost: %d replica(s)", n)
		row := &pgcostRow{replicas: n}
		row.err = e.pgcostOnce(ctx, m, pc, newDB, listen, row, o)
		if row.err != nil {
			logf(e.log, "pgcost: %d replica(s): %v", n, row.err)
		}
		res.rows = append(res.rows, row)
	}
	return res
}

func (e *env) pgcostOnce(ctx context.Context, m *mockProc, pc *pgcount, newDB storeDB, proxyAddr string, row *pgcostRow, o *options) error {
	so := &o.sessions
	rdb, err := newDB(ctx, 2000+row.replicas)
	if err != nil {
		return err
	}
	defer rdb.drop()
	direct := rdb.db
	du, err := url.Parse(direct)
	if err != nil {
		return err
	}
	du.Host = proxyAddr
	srvs, urls, err := e.startReplicas(ctx, row.replicas, du.String(), m.baseURL, fmt.Sprintf("serve-pgcost-%d", row.replicas))
	defer stopAll(srvs)
	if err != nil {
		return err
	}
	load := func(n int) error {
		_, err := e.sessload(ctx, "throughput", "--url", strings.Join(urls, ","), "--key", sessionsKey,
			"--sessions", strconv.Itoa(n), "--concurrency", strconv.Itoa(so.tpConcurrency))
		return err
	}
	if err := load(so.tpConcurrency); err != nil {
		return err
	}
	if err := pc.reset(ctx); err != nil {
		return err
	}
	wal0, err := walBytes(ctx, so.postgres)
	if err != nil {
		return err
	}
	if err := load(so.tpSessions); err != nil {
		return err
	}
	wal1, err := walBytes(ctx, so.postgres)
	if err != nil {
		return err
	}
	if row.busy, err = pc.counts(ctx); err != nil {
		return err
	}
	row.wal, row.turns = wal1-wal0, so.tpSessions*(o.toolCalls+1)
	if err := pc.reset(ctx); err != nil {
		return err
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(o.pgcostIdle):
	}
	row.idleFor = time.Since(start)
	row.idle, err = pc.counts(ctx)
	return err
}

// walBytes is the server's WAL position, in bytes.
func walBytes(ctx context.Context, dsn string) (int64, error) {
	out, err := exec.CommandContext(ctx, "psql", dsn, "-X", "-q", "-t", "-A", "-c",
		"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("psql: reading the WAL position: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// pgcount is the running proxy's HTTP side.
type pgcount struct{ base string }

func (p *pgcount) wait(ctx context.Context) error {
	var err error
	for range 100 {
		if _, err = p.counts(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("pgcount does not answer: %w", err)
}

func (p *pgcount) counts(ctx context.Context) (pgCounts, error) {
	var c pgCounts
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/counts", nil)
	if err != nil {
		return c, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, err
	}
	defer resp.Body.Close()
	return c, json.NewDecoder(resp.Body).Decode(&c)
}

func (p *pgcount) reset(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+"/reset", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New("pgcount: reset: " + resp.Status)
	}
	return nil
}

func (r *pgcostResult) markdown() string {
	switch {
	case r == nil:
		return "Not run (PostgreSQL not measured, no -sessions-replicas, or -pgcost=false).\n\n"
	case r.err != nil:
		return fmt.Sprintf("The PostgreSQL cost job failed:\n\n```\n%s\n```\n\n", strings.TrimSpace(r.err.Error()))
	}
	var b strings.Builder
	b.WriteString("hrns serve on PostgreSQL through `bench/cmd/pgcount`, a proxy that reads the protocol and counts; sessions run to their end as in the throughput job below, " +
		"each count of replicas on a fresh schema. Per model turn over the measured sessions; WAL is the cluster's (anything else on the server adds to it); " +
		"idle: the same replicas doing nothing, per second.\n\n")
	b.WriteString("| replicas | statements / turn | round trips / turn | rows returned / turn | notifications / turn | to PostgreSQL / turn | from PostgreSQL / turn | WAL / turn | connections | idle: statements / s |\n")
	b.WriteString("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	var failed []*pgcostRow
	for _, row := range r.rows {
		if row.err != nil {
			failed = append(failed, row)
			continue
		}
		t := float64(row.turns)
		c := row.busy
		fmt.Fprintf(&b, "| %d | %.2f | %.2f | %.2f | %.2f | %s | %s | %s | %d | %.2f |\n", row.replicas,
			float64(c.Statements)/t, float64(c.RoundTrips)/t, float64(c.RowsReturned)/t, float64(c.Notifications)/t,
			fmtBytes(float64(c.BytesToServer)/t), fmtBytes(float64(c.BytesToClient)/t), fmtBytes(float64(row.wal)/t), c.Connections,
			float64(row.idle.Statements)/row.idleFor.Seconds())
	}
	b.WriteString("\n")
	for _, row := range failed {
		fmt.Fprintf(&b, "**%d replica(s): failed**:\n\n```\n%s\n```\n\n", row.replicas, strings.TrimSpace(row.err.Error()))
	}
	return b.String()
}

func (r *pgcostResult) verdicts() []string {
	const what = "PostgreSQL per session turn counted (statements, round trips, rows, WAL), for deploy.md's capacity figures"
	if r == nil || r.err != nil || len(r.rows) == 0 || r.rows[0].err != nil {
		return []string{what + ": not measured in this run."}
	}
	row := r.rows[0]
	t := float64(row.turns)
	return []string{fmt.Sprintf("%s: **measured** (%d replica: %.2f statements, %.2f round trips, %s of WAL per turn; idle %.2f statements / s).",
		what, row.replicas, float64(row.busy.Statements)/t, float64(row.busy.RoundTrips)/t, fmtBytes(float64(row.wal)/t),
		float64(row.idle.Statements)/row.idleFor.Seconds())}
}
