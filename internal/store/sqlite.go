package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// SQLiteFile is the name of the database file inside Config.DataDir.
const SQLiteFile = "kici.db"

// sqliteWriteParams are applied to the single write connection.
//
//   - journal_mode=WAL lets readers work while the writer writes.
//   - synchronous=FULL syncs the WAL on every commit. NORMAL would be
//     faster but may lose the last commits on a power cut or kernel crash,
//     and "a queued job is never lost" is a promise. kici writes a few rows
//     per job state change (logs live in files), so one fsync per commit is
//     affordable.
//   - busy_timeout=5000 waits up to 5 s for a lock held by another process
//     (kici-orchestrator migrate, a backup tool) instead of failing at once.
//   - foreign_keys=on enforces the schema's references.
//   - _txlock=immediate starts every transaction with BEGIN IMMEDIATE, so it
//     takes the write lock up front and never fails to upgrade a read lock
//     half-way (which busy_timeout cannot wait out).
//   - _time_format=sqlite writes times as "2006-01-02 15:04:05.999999999-07:00";
//     all stamps are UTC, so the text sorts in time order.
var sqliteWriteParams = []string{
	"_pragma=busy_timeout(5000)",
	"_pragma=journal_mode(WAL)",
	"_pragma=synchronous(FULL)",
	"_pragma=foreign_keys(1)",
	"_txlock=immediate",
	"_time_format=sqlite",
}

// sqliteReadParams are applied to every read connection: they can never
// write, so they never contend for the write lock.
var sqliteReadParams = []string{
	"_pragma=busy_timeout(5000)",
	"_pragma=query_only(1)",
	"_time_format=sqlite",
}

// openSQLite opens DataDir/kici.db with one write connection and a pool of
// read connections. All writes of the process queue for the one write
// connection inside database/sql, so concurrent goroutines never see
// SQLITE_BUSY ("database is locked") from each other.
func openSQLite(ctx context.Context, logger *slog.Logger, dataDir string, maxReaders int) (*DB, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir %q: %w", dataDir, err)
	}
	path := filepath.Join(dataDir, SQLiteFile)
	if err := ownerOnlyFiles(logger, path); err != nil {
		return nil, err
	}
	write, err := sql.Open("sqlite", path+"?"+strings.Join(sqliteWriteParams, "&"))
	if err != nil {
		return nil, fmt.Errorf("open sqlite %q: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	var mode string
	if err := write.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return nil, errors.Join(fmt.Errorf("open sqlite %q: %w", path, err), write.Close())
	}
	if !strings.EqualFold(mode, "wal") {
		return nil, errors.Join(fmt.Errorf("open sqlite %q: journal mode is %q, want wal", path, mode), write.Close())
	}
	read, err := sql.Open("sqlite", path+"?"+strings.Join(sqliteReadParams, "&"))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open sqlite %q for reading: %w", path, err), write.Close())
	}
	read.SetMaxOpenConns(maxReaders)
	read.SetMaxIdleConns(maxReaders)
	if err := read.PingContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("open sqlite %q for reading: %w", path, err), read.Close(), write.Close())
	}
	return &DB{write: write, read: read, queries: queries{d: sqliteDialect}}, nil
}

// ownerOnlyFiles makes the database file readable by its owner only before
// SQLite opens it: it creates the file with mode 0600 when missing (SQLite
// would create it 0644 less the umask), and takes the group and other
// bits off an existing database and its -wal and -shm files, saying so.
// SQLite creates -wal and -shm with the database file's mode, so they
// follow.
func ownerOnlyFiles(logger *slog.Logger, path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("create sqlite %q: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create sqlite %q: %w", path, err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("check mode of %q: %w", p, err)
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 == 0 {
			continue
		}
		mode := fi.Mode().Perm() &^ 0o077
		if err := os.Chmod(p, mode); err != nil {
			return fmt.Errorf("make %q readable by its owner only: %w", p, err)
		}
		logger.Info("database file made readable by its owner only", "path", p, "was", fi.Mode().Perm().String(), "now", mode.String())
	}
	return nil
}
