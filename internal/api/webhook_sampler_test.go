package api

import (
	"testing"
	"time"
)

// TestRejectSampler: per window, a key gets perKey records and every key
// together total; the rest are counted, and the next record of a key says
// how many of its deliveries were not recorded before it.
func TestRejectSampler(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	s := newRejectSampler(3, 5, time.Minute, func() time.Time { return now })
	a := rejectKey{source: "repo", client: "192.0.2.1"}
	b := rejectKey{source: "repo", client: "192.0.2.2"}
	unknown := rejectKey{client: "192.0.2.1"}

	type admitted struct {
		record  bool
		dropped int
	}
	admit := func(k rejectKey) admitted {
		record, dropped := s.admit(k)
		return admitted{record, dropped}
	}
	steps := []struct {
		name  string
		key   rejectKey
		later time.Duration // added to the clock before the step
		want  admitted
	}{
		{name: "a 1", key: a, want: admitted{true, 0}},
		{name: "a 2", key: a, want: admitted{true, 0}},
		{name: "a 3", key: a, want: admitted{true, 0}},
		{name: "a 4 is over the key's limit", key: a, want: admitted{false, 0}},
		{name: "a 5", key: a, want: admitted{false, 0}},
		{name: "another address has its own limit", key: b, want: admitted{true, 0}},
		{name: "unknown sources share a key", key: unknown, want: admitted{true, 0}},
		{name: "the total is reached", key: b, want: admitted{false, 0}},
		{name: "the window is not over yet", key: a, later: 59 * time.Second, want: admitted{false, 0}},
		{name: "next window: a is recorded with its drops", key: a, later: time.Second, want: admitted{true, 3}},
		{name: "and b with its one", key: b, want: admitted{true, 1}},
		{name: "drops are reported once", key: a, want: admitted{true, 0}},
	}
	for _, st := range steps {
		now = now.Add(st.later)
		if got := admit(st.key); got != st.want {
			t.Errorf("%s: got (record %t, dropped before %d), want (%t, %d)", st.name, got.record, got.dropped, st.want.record, st.want.dropped)
		}
	}
	// A new window forgets the keys with nothing left to report.
	now = now.Add(time.Minute)
	s.admit(a)
	if got := len(s.keys); got != 1 {
		t.Errorf("after a window: got %d keys remembered, want 1", got)
	}
}

// TestRejectSamplerBoundsKeys: past maxSampledKeys keys in a window, a new
// key is not recorded (and not remembered) until the window ends.
func TestRejectSamplerBoundsKeys(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	s := newRejectSampler(1, maxSampledKeys*2, time.Minute, func() time.Time { return now })
	for i := range maxSampledKeys {
		if ok, _ := s.admit(rejectKey{source: "repo", client: "addr-" + time.Duration(i).String()}); !ok {
			t.Fatalf("key %d: got not recorded, want recorded", i)
		}
	}
	if ok, _ := s.admit(rejectKey{source: "repo", client: "one-too-many"}); ok {
		t.Error("a key past the bound: got recorded, want not")
	}
	if got := len(s.keys); got != maxSampledKeys {
		t.Errorf("got %d keys, want %d", got, maxSampledKeys)
	}
	now = now.Add(time.Minute)
	if ok, _ := s.admit(rejectKey{source: "repo", client: "one-too-many"}); !ok {
		t.Error("the same key in the next window: got not recorded, want recorded")
	}
}
