package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"slices"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// migrationsFS holds migrations/<dialect>/NNNNN_what.sql. Each file makes
// one change and has an Up and a Down section; the two dialects have the
// same file names, so a version means the same change on both engines.
//
//go:embed migrations
var migrationsFS embed.FS

// migrationTable is the table in which goose records applied versions.
const migrationTable = "goose_db_version"

// MigrationStatus compares the database's schema with the migrations this
// binary carries.
type MigrationStatus struct {
	// Current is the highest applied version; 0 for an empty database.
	Current int64
	// Head is the highest version this binary knows.
	Head int64
	// Pending are the known versions not applied yet, in order.
	Pending []int64
}

// UpToDate reports whether every known migration is applied and the
// database is not newer than this binary.
func (s MigrationStatus) UpToDate() bool {
	return len(s.Pending) == 0 && s.Current <= s.Head
}

// String says where the schema stands, for logs and /readyz.
func (s MigrationStatus) String() string {
	switch {
	case s.Current > s.Head:
		return fmt.Sprintf("schema version %d is newer than this binary's %d", s.Current, s.Head)
	case len(s.Pending) > 0:
		return fmt.Sprintf("schema version %d, %d migration(s) pending up to %d", s.Current, len(s.Pending), s.Head)
	default:
		return fmt.Sprintf("schema version %d, up to date", s.Current)
	}
}

// Migrate applies every pending migration, each in its own transaction, and
// logs each one. On PostgreSQL it first takes an advisory lock (scoped to
// the current schema), so coordinators that start together migrate one at a
// time. Open never migrates by itself; the server calls Migrate at start,
// and `kici-orchestrator migrate` calls it alone.
func (db *DB) Migrate(ctx context.Context) error {
	var opts []goose.ProviderOption
	if db.d.numbered {
		locker, err := db.migrationLocker(ctx)
		if err != nil {
			return err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := db.migrationProvider(opts...)
	if err != nil {
		return err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", db.d.name, err)
	}
	for _, r := range results {
		db.logger.Info("migration applied", "version", r.Source.Version, "file", r.Source.Path, "duration", r.Duration)
	}
	return nil
}

// MigrationStatus reads the applied versions without changing anything (it
// does not even create the version table), so /readyz may call it often.
func (db *DB) MigrationStatus(ctx context.Context) (MigrationStatus, error) {
	p, err := db.migrationProvider()
	if err != nil {
		return MigrationStatus{}, err
	}
	var status MigrationStatus
	for _, src := range p.ListSources() {
		status.Head = max(status.Head, src.Version)
	}
	applied, err := db.appliedVersions(ctx)
	if err != nil {
		return MigrationStatus{}, fmt.Errorf("read migration status: %w", err)
	}
	for _, v := range applied {
		status.Current = max(status.Current, v)
	}
	for _, src := range p.ListSources() {
		if !slices.Contains(applied, src.Version) {
			status.Pending = append(status.Pending, src.Version)
		}
	}
	return status, nil
}

func (db *DB) migrationProvider(opts ...goose.ProviderOption) (*goose.Provider, error) {
	dir, err := fs.Sub(migrationsFS, "migrations/"+db.d.name)
	if err != nil {
		return nil, fmt.Errorf("open %s migrations: %w", db.d.name, err)
	}
	opts = append(opts,
		goose.WithDisableGlobalRegistry(true),
		goose.WithSlog(db.logger),
	)
	p, err := goose.NewProvider(db.d.goose, db.write, dir, opts...)
	if err != nil {
		return nil, fmt.Errorf("load %s migrations: %w", db.d.name, err)
	}
	return p, nil
}

// migrationLocker returns a PostgreSQL advisory lock whose ID is derived
// from the current schema, so that databases in different schemas of one
// server (parallel tests, say) do not wait for each other.
func (db *DB) migrationLocker(ctx context.Context) (lock.SessionLocker, error) {
	var schema string
	if err := db.write.QueryRowContext(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return nil, fmt.Errorf("read current schema: %w", err)
	}
	h := fnv.New64a()
	h.Write([]byte("kici-migrate:" + schema))
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(int64(h.Sum64())),
		lock.WithLockTimeout(1, 300), // retry every second for 5 minutes
	)
	if err != nil {
		return nil, fmt.Errorf("create migration lock: %w", err)
	}
	return locker, nil
}

// appliedVersions lists the versions recorded as applied; none when the
// version table does not exist yet.
func (db *DB) appliedVersions(ctx context.Context) ([]int64, error) {
	existsQuery := "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
	if db.d.numbered {
		existsQuery = "SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = ?"
	}
	// Read through the read pool: on SQLite, /readyz must not wait behind
	// a long write transaction.
	var one int
	switch err := db.queryRow(ctx, existsQuery, migrationTable).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, err
	}
	rows, err := db.query(ctx, "SELECT DISTINCT version_id FROM "+migrationTable+" WHERE version_id > 0 ORDER BY version_id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var versions []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		versions = append(versions, v)
	}
	return versions, rows.Err()
}
