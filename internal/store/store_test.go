package store

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // a field name the error must mention; "" for valid
	}{
		{name: "sqlite", cfg: Config{DataDir: "/var/lib/kici"}},
		{name: "postgres", cfg: Config{DatabaseURL: "postgres://kici:secret@db/kici"}},
		{name: "postgresql scheme", cfg: Config{DatabaseURL: "postgresql://db/kici", DataDir: "ignored"}},
		{name: "nothing", cfg: Config{}, wantErr: "DataDir"},
		{name: "other scheme", cfg: Config{DatabaseURL: "mysql://db/kici"}, wantErr: "DatabaseURL"},
		{name: "not a URL", cfg: Config{DatabaseURL: "postgres://kici:se%cret@db"}, wantErr: "DatabaseURL"},
		{name: "question mark in data dir", cfg: Config{DataDir: "/tmp/what?"}, wantErr: "DataDir"},
		{name: "negative MaxConns", cfg: Config{DataDir: "/d", MaxConns: -1}, wantErr: "MaxConns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("got %v, want an error naming %s", err, tt.wantErr)
			case err != nil && strings.Contains(err.Error(), "secret"):
				t.Errorf("got %v, want an error that does not reveal the password", err)
			}
		})
	}
}

func TestTxRetries(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		db.retryBase = 0 // no back-off: the test is about the attempt count
		lostRace := &pgconn.PgError{Code: pgSerializationFailure}
		permanent := errors.New("permanent")
		tests := []struct {
			name      string
			failFirst int   // attempts that fail with err
			err       error // what those attempts return
			wantCalls int
			wantErr   error
		}{
			{name: "success", wantCalls: 1},
			{name: "lost race, then success", failFirst: 2, err: lostRace, wantCalls: 3},
			{name: "lost race every time", failFirst: 99, err: lostRace, wantCalls: txMaxAttempts, wantErr: lostRace},
			{name: "other error is not retried", failFirst: 99, err: permanent, wantCalls: 1, wantErr: permanent},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				name := strings.ReplaceAll(tt.name, " ", "-")
				calls := 0
				err := db.Tx(ctx, func(tx *Tx) error {
					calls++
					if _, err := tx.CreateSource(ctx, Source{Name: name, Kind: SourceLocal, Location: "/x"}); err != nil {
						return err
					}
					if calls <= tt.failFirst {
						return tt.err
					}
					return nil
				})
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("got error %v, want %v", err, tt.wantErr)
				}
				if calls != tt.wantCalls {
					t.Errorf("got %d calls, want %d", calls, tt.wantCalls)
				}
				// Only a committed attempt leaves the source behind.
				_, getErr := db.GetSource(ctx, name)
				if committed := getErr == nil; committed != (tt.wantErr == nil) {
					t.Errorf("source written: got %t, want %t (get: %v)", committed, tt.wantErr == nil, getErr)
				}
			})
		}
	})
}

func TestClockIsStrictlyIncreasing(t *testing.T) {
	t.Parallel()
	fixed := time.Date(2026, 1, 1, 0, 0, 0, 999, time.FixedZone("CET", 3600))
	c := &clock{now: func() time.Time { return fixed }}
	first := c.Now()
	if want := time.Date(2025, 12, 31, 23, 0, 0, 0, time.UTC); !first.Equal(want) || first.Location() != time.UTC {
		t.Errorf("got first stamp %v, want %v in UTC", first, want)
	}
	prev := first
	for range 3 {
		next := c.Now()
		if got, want := next.Sub(prev), time.Microsecond; got != want {
			t.Errorf("got stamps %v apart, want %v", got, want)
		}
		prev = next
	}
}
