package tui

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/hrns-dev/hrns/llm"
)

// A Store keeps chat conversations in one SQLite file, by default
// $XDG_STATE_HOME/hrns/chats.db (~/.local/state/hrns/chats.db). A
// conversation is one row of a table of its own (not a session of
// store/sqlite: a chat has no server-side state machine, only a transcript
// to continue), keyed by ID and indexed by the directory it was held in, so
// that "--continue" finds the last one of the current directory.
//
// The transcript is stored without its system prompt: a resumed
// conversation gets the system prompt and instructions of the day.
type Store struct {
	db *sql.DB
}

// A Conversation is a saved chat.
type Conversation struct {
	ID      string
	Workdir string
	Title   string
	Model   string
	// Endpoint names the provider and URL the conversation was held
	// with (Config.Endpoint), so that a resumed one keeps its model only
	// there; empty in conversations saved before it was kept.
	Endpoint string
	Created  time.Time
	Updated  time.Time
	// Messages is the transcript without system messages at its head.
	Messages []llm.Message
	// Usage is the token usage per model.
	Usage map[string]llm.Usage
}

// ErrNoConversation is returned when no saved conversation matches.
var ErrNoConversation = errors.New("no saved conversation")

// DefaultStorePath returns where conversations are kept: under
// XDG_STATE_HOME, else ~/.local/state; "" when neither is known.
func DefaultStorePath(getenv func(string) string) string {
	dir := getenv("XDG_STATE_HOME")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return ""
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "hrns", "chats.db")
}

// schema is run, with the migrations, only on a store below
// schemaVersion: a change to it needs schemaVersion raised
// (TestSchemaVersionCoversSchema).
const schema = `
CREATE TABLE IF NOT EXISTS conversations (
	id         TEXT PRIMARY KEY,
	workdir    TEXT NOT NULL,
	title      TEXT NOT NULL,
	model      TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	messages   TEXT NOT NULL,
	usage      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS conversations_by_workdir ON conversations (workdir, updated_at);
`

// migrations are applied in order to a store made before them; each is
// skipped when its column exists.
var migrations = []struct{ column, stmt string }{
	{"endpoint", `ALTER TABLE conversations ADD COLUMN endpoint TEXT NOT NULL DEFAULT ''`},
}

// schemaVersion is the user_version of a store that has the schema and
// every migration: opening one then reads only that. Raise it with each
// migration added. Older hrns versions set no version (0) and check the
// schema at every open, as the newer ones do for a store below this one.
const schemaVersion = 1

// OpenStore opens (creating it if needed) the store at path. The file and
// its directory are private to the user: a transcript holds what the tools
// read.
//
// Opening a store whose schema is current runs one statement, the read of
// its user_version; SQLite keeps the WAL journal mode in the file, so it
// is set only when the schema is made or brought up to date.
func OpenStore(path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("conversation store: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("conversation store: %w", err)
	}
	f.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, fmt.Errorf("conversation store %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if err := prepareSchema(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("conversation store %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// prepareSchema reads the store's version and, below schemaVersion, sets
// the WAL journal mode, creates the table and its index if missing and
// adds the columns an older hrns's store lacks, then sets the version, in
// one transaction taken for writing at its start (so that hrns processes
// opening a new store at once wait for each other rather than fail).
func prepareSchema(db *sql.DB) error {
	var v int
	openStatement(`PRAGMA user_version`)
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		return err
	}
	if v >= schemaVersion {
		return nil
	}
	// Not in a transaction: SQLite changes the journal mode only
	// outside one. Nor does it wait (busy_timeout) for another process
	// making the store at the same moment: it answers SQLITE_BUSY at
	// once, so the change is tried again for as long as busy_timeout
	// would have waited (TestStoreFirstOpensAtOnce).
	for deadline := time.Now().Add(5 * time.Second); ; {
		_, err := openExec(db, `PRAGMA journal_mode(WAL)`)
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqliteBusy || time.Now().After(deadline) {
			if err != nil {
				return err
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return err
	}
	err = func() error {
		openStatement(schema)
		if _, err := conn.ExecContext(ctx, schema); err != nil {
			return err
		}
		if err := migrate(ctx, conn); err != nil {
			return err
		}
		stmt := fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion)
		openStatement(stmt)
		_, err := conn.ExecContext(ctx, stmt)
		return err
	}()
	if err != nil {
		conn.ExecContext(ctx, `ROLLBACK`)
		return err
	}
	_, err = conn.ExecContext(ctx, `COMMIT`)
	return err
}

// sqliteBusy is SQLITE_BUSY, the primary code of "database is locked".
const sqliteBusy = 5

// migrate adds the columns a store made by an older hrns lacks.
func migrate(ctx context.Context, conn *sql.Conn) error {
	q := `SELECT name FROM pragma_table_info('conversations')`
	openStatement(q)
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		have[n] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, m := range migrations {
		if have[m.column] {
			continue
		}
		openStatement(m.stmt)
		if _, err := conn.ExecContext(ctx, m.stmt); err != nil && !strings.Contains(err.Error(), "duplicate column") {
			return err
		}
	}
	return nil
}

// openHook, when set (by tests), is told each statement that opening a
// store runs beyond its connection's pragmas.
var openHook func(stmt string)

func openStatement(stmt string) {
	if openHook != nil {
		openHook(stmt)
	}
}

// openExec runs one statement of opening a store.
func openExec(db *sql.DB, stmt string) (sql.Result, error) {
	openStatement(stmt)
	return db.Exec(stmt)
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// New returns a new, unsaved conversation held in workdir.
func (s *Store) New(workdir, model string) *Conversation { return NewConversation(workdir, model) }

// NewConversation returns a new conversation of workdir with model, not
// saved yet: [Store.New] without a store, for a caller that opens the
// store only to save.
func NewConversation(workdir, model string) *Conversation {
	var b [4]byte
	rand.Read(b[:])
	now := time.Now().UTC()
	return &Conversation{
		ID:      now.Format("20060102") + "-" + hex.EncodeToString(b[:]),
		Workdir: workdir, Model: model, Created: now, Updated: now,
		Usage: map[string]llm.Usage{},
	}
}

// Save writes c, unless it holds no message yet.
func (s *Store) Save(c *Conversation) error {
	if len(c.Messages) == 0 {
		return nil
	}
	if c.Title == "" {
		c.Title = title(c.Messages)
	}
	c.Updated = time.Now().UTC()
	msgs, err := json.Marshal(c.Messages)
	if err != nil {
		return err
	}
	usage, err := json.Marshal(c.Usage)
	if err != nil {
		return err
	}
	_, err = s.db.Exec(`INSERT INTO conversations (id, workdir, title, model, created_at, updated_at, messages, usage, endpoint)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET model = excluded.model, updated_at = excluded.updated_at,
			messages = excluded.messages, usage = excluded.usage, endpoint = excluded.endpoint`,
		c.ID, c.Workdir, c.Title, c.Model, c.Created.UnixMilli(), c.Updated.UnixMilli(), msgs, usage, c.Endpoint)
	if err != nil {
		return fmt.Errorf("saving conversation %s: %w", c.ID, err)
	}
	return nil
}

// title is the first line of the first user message, short.
func title(msgs []llm.Message) string {
	for _, m := range msgs {
		if m.Role == llm.RoleUser {
			t, _, _ := strings.Cut(strings.TrimSpace(m.Text()), "\n")
			if len(t) > 60 {
				n := 60
				for n > 0 && t[n]&0xC0 == 0x80 {
					n--
				}
				t = t[:n] + "…"
			}
			return t
		}
	}
	return ""
}

const columns = `id, workdir, title, model, created_at, updated_at, messages, usage, endpoint`

func scan(row interface{ Scan(...any) error }) (*Conversation, error) {
	var c Conversation
	var created, updated int64
	var msgs, usage string
	if err := row.Scan(&c.ID, &c.Workdir, &c.Title, &c.Model, &created, &updated, &msgs, &usage, &c.Endpoint); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrNoConversation
		}
		return nil, err
	}
	c.Created, c.Updated = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
	if err := json.Unmarshal([]byte(msgs), &c.Messages); err != nil {
		return nil, fmt.Errorf("conversation %s: %w", c.ID, err)
	}
	if err := json.Unmarshal([]byte(usage), &c.Usage); err != nil || c.Usage == nil {
		c.Usage = map[string]llm.Usage{}
	}
	return &c, nil
}

// Get returns the conversation whose ID is id, or starts with id when only
// one does.
func (s *Store) Get(id string) (*Conversation, error) {
	if id == "" {
		return nil, ErrNoConversation
	}
	c, err := scan(s.db.QueryRow(`SELECT `+columns+` FROM conversations WHERE id = ?`, id))
	if !errors.Is(err, ErrNoConversation) {
		return c, err
	}
	rows, err := s.db.Query(`SELECT id FROM conversations WHERE substr(id, 1, ?) = ? LIMIT 2`, len(id), id)
	if err != nil {
		return nil, err
	}
	var ids []string
	for rows.Next() {
		var x string
		rows.Scan(&x)
		ids = append(ids, x)
	}
	rows.Close()
	switch len(ids) {
	case 0:
		return nil, fmt.Errorf("%w with ID %q", ErrNoConversation, id)
	case 1:
		return s.Get(ids[0])
	}
	return nil, fmt.Errorf("%q names more than one conversation: give more of the ID", id)
}

// Last returns the conversation of workdir saved last.
func (s *Store) Last(workdir string) (*Conversation, error) {
	c, err := scan(s.db.QueryRow(`SELECT `+columns+` FROM conversations WHERE workdir = ? ORDER BY updated_at DESC LIMIT 1`, workdir))
	if errors.Is(err, ErrNoConversation) {
		return nil, fmt.Errorf("%w in %s", ErrNoConversation, workdir)
	}
	return c, err
}

// List returns the latest n conversations of workdir (all directories
// when workdir is ""), newest first, without their messages.
func (s *Store) List(workdir string, n int) ([]*Conversation, error) {
	q := `SELECT id, workdir, title, model, updated_at FROM conversations`
	args := []any{}
	if workdir != "" {
		q += ` WHERE workdir = ?`
		args = append(args, workdir)
	}
	q += ` ORDER BY updated_at DESC LIMIT ?`
	args = append(args, n)
	rows, err := s.db.Query(q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Conversation
	for rows.Next() {
		var c Conversation
		var updated int64
		if err := rows.Scan(&c.ID, &c.Workdir, &c.Title, &c.Model, &updated); err != nil {
			return nil, err
		}
		c.Updated = time.UnixMilli(updated).UTC()
		out = append(out, &c)
	}
	return out, rows.Err()
}

// Resumable returns a saved transcript ready to be sent again after a new
// system prompt: without its system messages, and with an error result
// for each call that a cancelled turn left without one.
func Resumable(msgs []llm.Message) []llm.Message {
	return closeCalls(WithoutSystem(msgs))
}

// WithoutSystem returns msgs without the system messages at their head.
func WithoutSystem(msgs []llm.Message) []llm.Message {
	i := 0
	for i < len(msgs) && msgs[i].Role == llm.RoleSystem {
		i++
	}
	return msgs[i:]
}
