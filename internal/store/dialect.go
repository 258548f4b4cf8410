package store

import (
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/pressly/goose/v3"
)

// dialect holds everything that differs between the two engines. Queries are
// written once, with "?" placeholders and portable SQL; the few fragments
// that cannot be portable are methods here, so that a reader sees every
// engine difference in one file.
type dialect struct {
	// name is "sqlite" or "postgres"; it is also the migrations directory.
	name string
	// numbered is true when placeholders are $1, $2, … (PostgreSQL).
	numbered bool
	// goose is the dialect name the migration library expects.
	goose goose.Dialect
	// readTx are the options for a consistent multi-statement read.
	readTx *sql.TxOptions
	// cacheStmts keeps the store's queries prepared in a stmtCache per
	// pool.
	cacheStmts bool
}

var (
	sqliteDialect = dialect{
		name:  "sqlite",
		goose: goose.DialectSQLite3,
		// SQLite's read transactions are snapshots already; modernc.org/sqlite
		// accepts no isolation level other than the default.
		readTx:     &sql.TxOptions{ReadOnly: true},
		cacheStmts: true,
	}
	postgresDialect = dialect{
		name:     "postgres",
		numbered: true,
		goose:    goose.DialectPostgres,
		readTx:   &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead},
		// pgx prepares and caches every query per connection already
		// (default_query_exec_mode=cache_statement, 512 statements), and
		// a database/sql layer on top measured no gain (bench_test.go).
		// It also keeps working behind a pooler when the URL asks for
		// another exec mode.
	}
)

// rebind rewrites the "?" placeholders of query for the dialect. A "?"
// inside a quoted string or identifier is left alone. Queries in this
// package never use PostgreSQL's jsonb "?" operators.
func (d dialect) rebind(query string) string {
	if !d.numbered || !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 8)
	n := 0
	var quote byte // the open quote character, or 0
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// jsonTextElements returns a FROM item, named alias, with one row per
// element of the JSON array of strings expr, in a column named value.
func (d dialect) jsonTextElements(expr, alias string) string {
	if d.numbered {
		// A set-returning function of a scalar type names its one column
		// after the alias unless given a column alias.
		return fmt.Sprintf("jsonb_array_elements_text(%s) AS %s(value)", expr, alias)
	}
	return fmt.Sprintf("json_each(%s) AS %s", expr, alias)
}

// lockSkipLocked is appended to a SELECT that picks a row to claim. On
// PostgreSQL it locks the row and makes concurrent claimers skip it; SQLite
// needs nothing, because it has one writer at a time.
func (d dialect) lockSkipLocked() string {
	if d.numbered {
		return " FOR UPDATE SKIP LOCKED"
	}
	return ""
}

// lockRow is appended to a SELECT of a row the transaction will update
// (" FOR UPDATE"), or share must not change until it commits (" FOR
// SHARE"): the lock makes a concurrent writer wait. SQLite needs nothing:
// its transactions take the write lock at BEGIN.
func (d dialect) lockRow(share bool) string {
	switch {
	case !d.numbered:
		return ""
	case share:
		return " FOR SHARE"
	}
	return " FOR UPDATE"
}

// nowMillis is the database's clock in milliseconds since the Unix epoch,
// as an SQL expression: clock_timestamp() on PostgreSQL (the time of the
// statement, not of the transaction's start), the wall clock on SQLite.
func (d dialect) nowMillis() string {
	if d.numbered {
		return "CAST(floor(extract(epoch FROM clock_timestamp()) * 1000) AS BIGINT)"
	}
	return "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
}

// placeholders returns "?, ?, ?" with n marks, for an IN list.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}
