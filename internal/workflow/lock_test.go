package workflow

import (
	"errors"
	"strings"
	"testing"
)

func TestParseLock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		data    string
		want    string // substring of the error; "" for success
		version bool   // the error wraps ErrLockVersion
	}{
		{name: "current version", data: `{"schemaVersion": 1, "workflows": []}`},
		{name: "other version", data: `{"schemaVersion": 29, "workflows": []}`, want: "schema version 29, but this kici reads version 1; regenerate it with `kici compile > .kici/kici.lock.json`", version: true},
		{name: "no version", data: `{"workflows": []}`, want: "missing \"schemaVersion\""},
		{name: "not json", data: `{`, want: "not valid JSON"},
		{name: "unknown field", data: `{"schemaVersion": 1, "workflows": [], "extra": 1}`, want: "unknown field"},
		{name: "unknown need", data: `{"schemaVersion": 1, "workflows": [{"name": "w", "jobs": [{"name": "a", "needs": [{"job": "b", "on": ["success"]}], "steps": [{"name": "s", "run": "x"}]}]}]}`, want: "needs unknown job \"b\""},
		{name: "cycle", data: `{"schemaVersion": 1, "workflows": [{"name": "w", "jobs": [
			{"name": "a", "needs": [{"job": "b", "on": ["success"]}], "steps": [{"name": "s", "run": "x"}]},
			{"name": "b", "needs": [{"job": "a", "on": ["success"]}], "steps": [{"name": "s", "run": "x"}]}]}]}`, want: "cycle"},
		{name: "job without steps", data: `{"schemaVersion": 1, "workflows": [{"name": "w", "jobs": [{"name": "a", "steps": []}]}]}`, want: "has no steps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plan, err := ParseLock([]byte(tt.data))
			if tt.want == "" {
				if err != nil || plan == nil {
					t.Fatalf("got %v, want a plan", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
			if got := errors.Is(err, ErrLockVersion); got != tt.version {
				t.Errorf("errors.Is(err, ErrLockVersion) = %v, want %v", got, tt.version)
			}
		})
	}
}

func TestIsWorkflowFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path string
		want bool
	}{
		{".kici/workflows/ci.yml", true},
		{".kici/workflows/ci.yaml", true},
		{".kici/workflows/ci.json", false},
		{".kici/workflows/sub/ci.yml", false},
		{".kici/workflows/.hidden.yml", false},
		{"ci.yml", false},
	}
	for _, tt := range tests {
		if got := IsWorkflowFile(tt.path); got != tt.want {
			t.Errorf("IsWorkflowFile(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

func TestContentHashIgnoresLineEnds(t *testing.T) {
	t.Parallel()
	a, b := ContentHash([]byte("a\nb\n")), ContentHash([]byte("a\r\nb\r\n"))
	if a != b {
		t.Errorf("CRLF changed the hash: %s vs %s", a, b)
	}
	if a == ContentHash([]byte("a\nc\n")) {
		t.Errorf("different sources share hash %s", a)
	}
}
