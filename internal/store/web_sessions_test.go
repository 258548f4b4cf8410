package store

import (
	"errors"
	"testing"
	"time"
)

func TestWebSessions(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			clock := newTestClock()
			db, _ := twoHandles(t, e, clock)
			now := clock.now()
			s := WebSession{IDHash: "h1", TokenHash: "tok", CSRF: "c1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
			if err := db.CreateWebSession(ctx, s); err != nil {
				t.Fatal(err)
			}
			got, err := db.WebSessionByHash(ctx, "h1")
			if err != nil || got.TokenHash != "tok" || got.CSRF != "c1" || !got.ExpiresAt.Equal(s.ExpiresAt) {
				t.Fatalf("read back: %+v, %v", got, err)
			}
			clock.advance(2 * time.Hour)
			if _, err := db.WebSessionByHash(ctx, "h1"); !errors.Is(err, ErrNotFound) {
				t.Errorf("expired session: got %v, want ErrNotFound", err)
			}
			// A new login sweeps the expired one away.
			now = clock.now()
			if err := db.CreateWebSession(ctx, WebSession{IDHash: "h2", TokenHash: "tok", CSRF: "c2", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			if n := countRows(t, db, "web_sessions"); n != 1 {
				t.Errorf("sessions after a login past an expiry: %d, want 1", n)
			}
			if err := db.DeleteWebSession(ctx, "h2"); err != nil {
				t.Fatal(err)
			}
			if _, err := db.WebSessionByHash(ctx, "h2"); !errors.Is(err, ErrNotFound) {
				t.Errorf("after logout: got %v, want ErrNotFound", err)
			}
		})
	}
}
