package auth_test

import (
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/auth"
)

func TestFailureLimiter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	l := auth.NewFailureLimiter(auth.FailureLimiterConfig{MaxFailures: 3, Window: time.Minute, Now: func() time.Time { return now }})
	for i := range 2 {
		if l.Fail("10.0.0.1") {
			t.Fatalf("failure %d: got blocked, want not yet", i+1)
		}
	}
	if _, blocked := l.Blocked("10.0.0.1"); blocked {
		t.Fatal("after 2 failures: got blocked, want not yet")
	}
	// The third failure is the last one allowed: it blocks.
	if !l.Fail("10.0.0.1") {
		t.Fatal("failure 3: got not blocked, want this one to block")
	}
	if _, blocked := l.Blocked("10.0.0.1"); !blocked {
		t.Fatal("after 3 failures: got not blocked, want blocked")
	}
	if l.Fail("10.0.0.1") {
		t.Error("failure 4: got a second block report, want one")
	}
	now = now.Add(20 * time.Second)
	if wait, blocked := l.Blocked("10.0.0.1"); !blocked || wait != 40*time.Second {
		t.Errorf("20 s later: got (%s, %t), want blocked for 40s more", wait, blocked)
	}
	if _, blocked := l.Blocked("10.0.0.2"); blocked {
		t.Error("another address: got blocked, want not")
	}
	now = now.Add(41 * time.Second)
	if _, blocked := l.Blocked("10.0.0.1"); blocked {
		t.Error("after the block: got blocked, want free")
	}
	// Failures spread over more than a window never block.
	for range 10 {
		now = now.Add(30 * time.Second)
		if l.Fail("10.0.0.3") {
			t.Fatal("slow failures: got blocked, want not")
		}
		now = now.Add(31 * time.Second)
	}
}

func TestFailureLimiterDisabled(t *testing.T) {
	t.Parallel()
	var nilLimiter *auth.FailureLimiter
	off := auth.NewFailureLimiter(auth.FailureLimiterConfig{MaxFailures: -1})
	for _, l := range []*auth.FailureLimiter{nilLimiter, off} {
		for range 100 {
			if l.Fail("10.0.0.1") {
				t.Fatal("got blocked, want a disabled limiter never to block")
			}
		}
		if _, blocked := l.Blocked("10.0.0.1"); blocked {
			t.Error("got blocked, want a disabled limiter never to block")
		}
	}
}
