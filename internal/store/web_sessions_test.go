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

// TestGetRunJob: a run's job is found by id or by name with its steps, a
// job of another run or an unknown key is ErrNotFound.
func TestGetRunJob(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		run := createTestRun(t, db, testJob("build", []string{"linux"}), testJob("test", []string{"linux"}, "build"))
		other := createTestRun(t, db, testJob("build", []string{"linux"}))
		want := run.Jobs[1]
		for _, key := range []string{want.ID, want.Name} {
			got, err := db.GetRunJob(ctx, run.ID, key)
			if err != nil || got.ID != want.ID || len(got.Steps) != len(want.Steps) {
				t.Fatalf("GetRunJob(%s): %+v, %v; want job %s with %d steps", key, got, err, want.ID, len(want.Steps))
			}
		}
		for _, key := range []string{other.Jobs[0].ID, "deploy"} {
			if _, err := db.GetRunJob(ctx, run.ID, key); !errors.Is(err, ErrNotFound) {
				t.Errorf("GetRunJob(%s): %v, want ErrNotFound", key, err)
			}
		}
	})
}
