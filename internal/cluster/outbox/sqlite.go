package outbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/kici-dev/kici/internal/durable"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// applicationID marks a SQLite file as a kici outbox ("kiob"), so Open
// refuses to add its tables to some other database given by mistake.
const applicationID = 0x6b696f62

// schemaVersion is the outbox schema this code reads and writes, kept in
// PRAGMA user_version.
const schemaVersion = 1

// maxSeq is the largest sequence number SQLite's signed integers hold.
const maxSeq = uint64(math.MaxInt64)

// writeParams configure the writer's one connection.
//
//   - journal_mode=WAL: Pending's readers never wait for the writer.
//   - synchronous=FULL: in WAL mode this is the setting that makes a commit
//     durable. SQLite then syncs the WAL file at every commit, so a commit
//     that returned survives a power cut. NORMAL syncs the WAL only at
//     checkpoints: the file stays consistent, but the last commits before
//     a power cut or kernel crash may roll back, which would break "an
//     entry whose Append returned is never lost". EXTRA adds nothing in
//     WAL mode (its extra directory sync concerns a deleted rollback
//     journal). A newly created WAL file gets its directory synced by
//     SQLite on its first sync; the database file's own directory entry is
//     synced by openSQLite when it creates the file.
//   - busy_timeout=5000: a lock held by a backup tool is waited for, up to
//     5 s, instead of failing at once.
//   - journal_size_limit=64 MiB: after a checkpoint the WAL is cut back to
//     this size, so a burst does not leave a large WAL file behind.
//   - _txlock=immediate: every transaction starts with BEGIN IMMEDIATE and
//     takes the write lock up front.
var writeParams = []string{
	"_pragma=busy_timeout(5000)",
	"_pragma=journal_mode(WAL)",
	"_pragma=synchronous(FULL)",
	"_pragma=journal_size_limit(67108864)",
	"_txlock=immediate",
}

// readParams configure Pending's connections, which can never write.
var readParams = []string{
	"_pragma=busy_timeout(5000)",
	"_pragma=query_only(1)",
}

// maxReaders bounds Pending's connection pool.
const maxReaders = 4

// schema creates version 1. entries.seq is the rowid, so appends go to the
// end of the table's B-tree. meta holds one row: the outbox's ID and the
// highest sequence number ever given, which entries alone would forget
// once every entry is acknowledged. The first statement runs on its own
// (see ensureSchema), the others in one transaction.
var schema = []string{
	"PRAGMA auto_vacuum = INCREMENTAL",
	`CREATE TABLE meta (
		one       INTEGER PRIMARY KEY CHECK (one = 1),
		outbox_id TEXT    NOT NULL,
		last_seq  INTEGER NOT NULL CHECK (last_seq >= 0)
	) STRICT`,
	`CREATE TABLE entries (
		seq        INTEGER PRIMARY KEY,
		prev       INTEGER NOT NULL,
		stream     TEXT    NOT NULL,
		kind       TEXT    NOT NULL,
		payload    BLOB    NOT NULL,
		created_at INTEGER NOT NULL
	) STRICT`,
	"CREATE INDEX entries_stream_seq ON entries (stream, seq)",
	fmt.Sprintf("PRAGMA application_id = %d", applicationID),
	fmt.Sprintf("PRAGMA user_version = %d", schemaVersion),
}

// sqliteFile is an opened outbox file and what Open needs to know of it.
type sqliteFile struct {
	write, read *sql.DB
	id          string
	lastSeq     uint64
	entries     int
	bytes       int64
}

// openSQLite opens (or creates) the outbox file at path with one write
// connection and a pool of readers, creating the schema if the file is
// new and checking it otherwise.
func openSQLite(ctx context.Context, path string) (_ *sqliteFile, err error) {
	created, err := createOwnerOnly(path)
	if err != nil {
		return nil, err
	}
	write, err := sql.Open("sqlite", path+"?"+strings.Join(writeParams, "&"))
	if err != nil {
		return nil, fmt.Errorf("open outbox %q: %w", path, err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, write.Close())
		}
	}()
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	if err := checkPragmas(ctx, write); err != nil {
		return nil, fmt.Errorf("open outbox %q: %w", path, err)
	}
	fresh, err := ensureSchema(ctx, write)
	if err != nil {
		return nil, fmt.Errorf("open outbox %q: %w", path, err)
	}
	if created || fresh {
		// The file's name must be on disk before any commit in it counts.
		if err := durable.Sync(filepath.Dir(path)); err != nil {
			return nil, fmt.Errorf("open outbox %q: %w", path, err)
		}
	}
	f := &sqliteFile{write: write}
	var lastSeq int64
	err = write.QueryRowContext(ctx, "SELECT outbox_id, last_seq FROM meta").Scan(&f.id, &lastSeq)
	if err == nil {
		err = write.QueryRowContext(ctx, "SELECT count(*), coalesce(sum(length(payload)), 0) FROM entries").Scan(&f.entries, &f.bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("open outbox %q: read its state: %w", path, err)
	}
	f.lastSeq = uint64(lastSeq)
	read, err := sql.Open("sqlite", path+"?"+strings.Join(readParams, "&"))
	if err != nil {
		return nil, fmt.Errorf("open outbox %q for reading: %w", path, err)
	}
	read.SetMaxOpenConns(maxReaders)
	read.SetMaxIdleConns(maxReaders)
	if err := read.PingContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("open outbox %q for reading: %w", path, err), read.Close())
	}
	f.read = read
	return f, nil
}

// checkPragmas makes sure the settings the guarantee rests on took
// effect: a driver that ignored the DSN would otherwise go unnoticed.
func checkPragmas(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %q, want wal", mode)
	}
	var sync int
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		return err
	}
	if sync != 2 { // 2 is FULL
		return fmt.Errorf("synchronous is %d, want 2 (FULL)", sync)
	}
	return nil
}

// ensureSchema creates the schema in a new file, or checks that an
// existing file is an outbox of the version this code knows. It reports
// whether it created the schema.
func ensureSchema(ctx context.Context, db *sql.DB) (bool, error) {
	var appID, version int64
	if err := db.QueryRowContext(ctx, "PRAGMA application_id").Scan(&appID); err != nil {
		return false, err
	}
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return false, err
	}
	switch {
	case appID == applicationID && version == schemaVersion:
		return false, nil
	case appID == applicationID:
		return false, fmt.Errorf("schema version is %d, this build knows %d", version, schemaVersion)
	case appID != 0 || version != 0:
		return false, fmt.Errorf("not a kici outbox (application_id %#x, user_version %d)", appID, version)
	}
	var tables int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&tables); err != nil {
		return false, err
	}
	if tables != 0 {
		return false, fmt.Errorf("not a kici outbox (it has %d schema objects and no outbox mark)", tables)
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return false, fmt.Errorf("make outbox id: %w", err)
	}
	// auto_vacuum cannot change inside a transaction, and on a file that
	// already has a header (switching to WAL wrote one) it takes effect
	// only through VACUUM, which costs nothing on an empty file.
	for _, stmt := range []string{schema[0], "VACUUM"} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return false, fmt.Errorf("create schema: %w", err)
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("create schema: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // after Commit it only reports ErrTxDone
	for _, stmt := range schema[1:] {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return false, fmt.Errorf("create schema: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO meta (one, outbox_id, last_seq) VALUES (1, ?, 0)", hex.EncodeToString(raw[:])); err != nil {
		return false, fmt.Errorf("create schema: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("create schema: %w", err)
	}
	return true, nil
}

// createOwnerOnly creates path with mode 0600 if it does not exist (SQLite
// would create it world-readable less the umask; SQLite gives its -wal and
// -shm files the database file's mode) and reports whether it did.
func createOwnerOnly(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create outbox %q: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return false, fmt.Errorf("create outbox %q: %w", path, err)
	}
	return true, nil
}
