package store

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrNotFound is returned (wrapped) when the row an operation names does not
// exist. Test for it with errors.Is.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned (wrapped) when a write would break a unique key:
// a source or run ID that exists already, a second job of the same name in a
// run, a job enqueued twice. Test for it with errors.Is.
var ErrConflict = errors.New("already exists")

// PostgreSQL SQLSTATE codes that drive decisions.
const (
	pgUniqueViolation      = "23505"
	pgSerializationFailure = "40001"
	pgDeadlockDetected     = "40P01"
)

// classify maps a driver error of either engine to this package's sentinel
// errors: no rows becomes ErrNotFound, a unique or primary-key violation
// becomes ErrConflict (still wrapping the driver's error, for its detail).
// Any other error, and nil, is returned unchanged. It is the only place
// that knows the engines' error codes for these two cases.
func classify(err error) error {
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) {
		return err
	}
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgUniqueViolation {
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	var liteErr *sqlite.Error
	if errors.As(err, &liteErr) {
		switch liteErr.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w: %w", ErrConflict, err)
		}
	}
	return err
}

// retryable reports whether err means "the transaction lost a race and may
// succeed if run again": SQLITE_BUSY or SQLITE_LOCKED (another process holds
// the write lock past busy_timeout), or a PostgreSQL serialization failure or
// deadlock. Tx retries exactly these.
// connectionLost reports whether err says the server ended the session
// (an administrator or a restart terminated it, or the connection broke):
// the pool drops that connection, and a read may simply be tried again on
// a fresh one. Writes are not retried on it: a commit may have landed
// before the connection went.
func connectionLost(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "57P") || strings.HasPrefix(pgErr.Code, "08")
	}
	return errors.Is(err, driver.ErrBadConn)
}

func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == pgSerializationFailure || pgErr.Code == pgDeadlockDetected
	}
	var liteErr *sqlite.Error
	if errors.As(err, &liteErr) {
		// The primary result code is the low byte of an extended code.
		switch liteErr.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
	}
	return false
}

// pgDiskFull is PostgreSQL's SQLSTATE disk_full.
const pgDiskFull = "53100"

// IsStorageFull reports whether err means the disk under the database or
// the logs has no space left: ENOSPC from a file write, SQLITE_FULL (or an
// I/O error SQLite hit for lack of space), or PostgreSQL's disk_full. A
// write that failed for this reason fails again until space is freed, so
// callers stop retrying and say so instead.
func IsStorageFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == pgDiskFull
	}
	var liteErr *sqlite.Error
	if errors.As(err, &liteErr) {
		return liteErr.Code()&0xff == sqlite3.SQLITE_FULL
	}
	return false
}
