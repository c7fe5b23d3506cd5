// Package postgrestest gives tests a PostgreSQL schema of their own.
//
//	func TestSomething(t *testing.T) {
//		dsn := postgrestest.DSN(t) // a new schema, dropped when the test ends
//		st, err := postgres.Open(t.Context(), dsn, nil)
//		...
//	}
//
// The server is the one HRNS_TEST_POSTGRES names (a DSN), by default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable. When that
// default is unreachable, tests that need it skip, saying why; when
// HRNS_TEST_POSTGRES is set and unreachable, they fail, so that a CI run
// that sets it never passes without them.
package postgrestest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvVar names the environment variable holding the test server's DSN.
const EnvVar = "HRNS_TEST_POSTGRES"

// DefaultDSN is the test server's DSN when EnvVar is not set.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var (
	reachOnce sync.Once
	reachErr  error
)

// ServerDSN returns the test server's DSN, after checking once per process
// that it answers. It skips tb when the default server is unreachable and
// fails it when the one EnvVar names is.
func ServerDSN(tb testing.TB) string {
	tb.Helper()
	dsn, set := os.LookupEnv(EnvVar)
	if !set || dsn == "" {
		dsn, set = DefaultDSN, false
	}
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			reachErr = err
			return
		}
		reachErr = conn.Ping(ctx)
		conn.Close(ctx)
	})
	if reachErr != nil {
		if set {
			tb.Fatalf("PostgreSQL at %s=%s is unreachable: %v", EnvVar, redact(dsn), reachErr)
		}
		tb.Skipf("PostgreSQL is unreachable at %s (set %s to a server's DSN to run this test): %v", DefaultDSN, EnvVar, reachErr)
	}
	return dsn
}

// DSN creates a schema with a new name on the test server and returns a
// DSN whose connections use it (search_path). The schema and everything in
// it are dropped when tb ends, after the cleanups registered later (such
// as closing a store).
func DSN(tb testing.TB) string {
	tb.Helper()
	server := ServerDSN(tb)
	name := SchemaName(tb.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("create schema %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, server)
		if err != nil {
			tb.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", name, err)
		}
	})
	return WithSearchPath(tb, server, name)
}

// WithSearchPath returns dsn with its connections' search_path set to
// schema. dsn must be a URL.
func WithSearchPath(tb testing.TB, dsn, schema string) string {
	tb.Helper()
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		tb.Fatalf("%s must be a postgres:// URL: %v", EnvVar, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

var unsafe = regexp.MustCompile(`[^a-z0-9]+`)

// SchemaName returns a new schema name that starts with hrnstest_ and
// recalls the test's name.
func SchemaName(testName string) string {
	var b [6]byte
	rand.Read(b[:])
	base := strings.Trim(unsafe.ReplaceAllString(strings.ToLower(testName), "_"), "_")
	if len(base) > 40 {
		base = base[:40]
	}
	return "hrnstest_" + base + "_" + hex.EncodeToString(b[:])
}

func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		return u.String()
	}
	return dsn
}
