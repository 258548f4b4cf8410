package admincli

import (
	"strings"
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		d    time.Duration
		want string
	}{
		{name: "negative", d: -time.Second, want: "0s"},
		{name: "milliseconds", d: 850 * time.Millisecond, want: "850ms"},
		{name: "seconds", d: 42 * time.Second, want: "42s"},
		{name: "whole minute", d: time.Minute, want: "1m"},
		{name: "minutes and seconds", d: 65 * time.Second, want: "1m5s"},
		{name: "ten seconds past", d: 2*time.Minute + 10*time.Second, want: "2m10s"},
		{name: "whole hours", d: 2 * time.Hour, want: "2h"},
		{name: "hours and minutes", d: 2*time.Hour + 3*time.Minute + 20*time.Second, want: "2h3m"},
		{name: "days", d: 76 * time.Hour, want: "3d4h"},
		{name: "whole days", d: 48 * time.Hour, want: "2d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := duration(tt.d); got != tt.want {
				t.Errorf("duration(%v): got %q, want %q", tt.d, got, tt.want)
			}
		})
	}
}

func TestAgo(t *testing.T) {
	t.Parallel()
	now := fakeNow
	tests := []struct {
		name string
		t    time.Time
		want string
	}{
		{name: "zero", t: time.Time{}, want: "-"},
		{name: "future", t: now.Add(time.Minute), want: "just now"},
		{name: "now", t: now, want: "just now"},
		{name: "seconds", t: now.Add(-45 * time.Second), want: "45s ago"},
		{name: "minutes", t: now.Add(-5*time.Minute - 59*time.Second), want: "5m ago"},
		{name: "hours", t: now.Add(-3 * time.Hour), want: "3h ago"},
		{name: "days", t: now.Add(-50 * time.Hour), want: "2d ago"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := ago(now, tt.t); got != tt.want {
				t.Errorf("ago(%v): got %q, want %q", tt.t, got, tt.want)
			}
		})
	}
}

// TestTableEscapesCells: a job name or error chosen by a workflow author
// (an OSC 52 clipboard write, a tab that would shift the columns) is
// printed escaped in every listing.
func TestTableEscapesCells(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cells []string
		want  string
	}{
		{name: "plain", cells: []string{"build", "success"}, want: "build  success\n"},
		{name: "osc 52 in a name", cells: []string{"x\x1b]52;c;ZXZpbA==\a", "failure"}, want: "x\\x1b]52;c;ZXZpbA==\\x07  failure\n"},
		{name: "tab and cr in an error", cells: []string{"job", "a\tb\rc"}, want: "job  a\\tb\\rc\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf strings.Builder
			tb := newTable(&buf)
			tb.row(tt.cells...)
			if err := tb.flush(); err != nil {
				t.Fatal(err)
			}
			if got := buf.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
