package store

import (
	"fmt"
	"testing"
	"time"
)

// TestTimeComparisons checks that stored timestamps compare in time order
// on both engines, fractions of a second included: SQLite keeps them as
// text, with trailing zeros of the fraction trimmed.
func TestTimeComparisons(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		tests := []struct {
			name    string
			expires time.Duration  // after testNow
			purgeAt time.Duration  // after testNow
			zone    *time.Location // of the purge time; nil is UTC
			want    int64          // records purged
		}{
			{name: "whole second, equal", expires: 0, purgeAt: 0, want: 1},
			{name: "fraction after whole second", expires: 500 * time.Millisecond, purgeAt: 0, want: 0},
			{name: "whole second after fraction", expires: 0, purgeAt: 500 * time.Millisecond, want: 1},
			{name: "shorter fraction is later", expires: 500 * time.Millisecond, purgeAt: 123 * time.Millisecond, want: 0},
			{name: "longer fraction is later", expires: 123 * time.Millisecond, purgeAt: 500 * time.Millisecond, want: 1},
			{name: "10us versus 2us", expires: 10 * time.Microsecond, purgeAt: 2 * time.Microsecond, want: 0},
			{name: "2us versus 10us", expires: 2 * time.Microsecond, purgeAt: 10 * time.Microsecond, want: 1},
			{name: "sub-microsecond is dropped", expires: time.Microsecond + 999, purgeAt: time.Microsecond, want: 1},
			{name: "next day", expires: 24 * time.Hour, purgeAt: 23*time.Hour + 59*time.Minute, want: 0},
			{name: "purge time in another zone", expires: time.Hour, purgeAt: 2 * time.Hour,
				zone: time.FixedZone("UTC+5", 5*3600), want: 1},
			{name: "purge time in another zone, not yet", expires: 2 * time.Hour, purgeAt: time.Hour,
				zone: time.FixedZone("UTC+5", 5*3600), want: 0},
		}
		// Not parallel: each case purges the whole table.
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ctx := t.Context()
				if _, err := db.MarkDelivery(ctx, "times", fmt.Sprint(i), testNow.Add(tt.expires)); err != nil {
					t.Fatalf("mark: %v", err)
				}
				purgeAt := testNow.Add(tt.purgeAt)
				if tt.zone != nil {
					purgeAt = purgeAt.In(tt.zone)
				}
				got, err := db.PurgeExpiredDeliveries(ctx, purgeAt)
				if err != nil {
					t.Fatalf("purge: %v", err)
				}
				if got != tt.want {
					t.Errorf("record expiring at +%v, purged at +%v: got %d purged, want %d", tt.expires, tt.purgeAt, got, tt.want)
				}
				// Empty the table for the next case.
				if _, err := db.PurgeExpiredDeliveries(ctx, testNow.Add(48*time.Hour)); err != nil {
					t.Fatalf("purge all: %v", err)
				}
			})
		}
	})
}
