package baremetal

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/scaler"
)

func TestParseStat(t *testing.T) {
	t.Parallel()
	// Fields 3 to 22 and a few after; the command name may hold spaces and
	// parentheses.
	rest := " S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 12345678 300"
	tests := []struct {
		name    string
		line    string
		want    procInfo
		wantErr bool
	}{
		{name: "plain", line: "4242 (kici-agent)" + rest, want: procInfo{State: 'S', Session: 4242, StartTime: 987654}},
		{name: "spaces and parentheses in the name", line: "4242 (a) (b c)" + rest, want: procInfo{State: 'S', Session: 4242, StartTime: 987654}},
		{name: "zombie", line: "7 (x) Z" + rest[2:], want: procInfo{State: 'Z', Session: 4242, StartTime: 987654}},
		{name: "no name", line: "4242 kici-agent S 1", wantErr: true},
		{name: "too short", line: "4242 (kici-agent) S 1 2 3", wantErr: true},
		{name: "bad start time", line: "4242 (x)" + strings.Replace(rest, "987654", "x", 1), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseStat([]byte(tc.line))
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseStat: got error %v, want error %t", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parseStat (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRing(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", maxLineBytes+10)
	tests := []struct {
		name   string
		max    int
		writes []string
		want   string
	}{
		{name: "empty", max: 3, want: ""},
		{name: "fewer lines than kept", max: 3, writes: []string{"a\nb\n"}, want: "a\nb"},
		{name: "keeps the last lines", max: 3, writes: []string{"1\n2\n3\n4\n5\n"}, want: "3\n4\n5"},
		{name: "line split across writes", max: 3, writes: []string{"he", "llo\nwor", "ld\n"}, want: "hello\nworld"},
		{name: "unterminated last line counts", max: 2, writes: []string{"1\n2\n3"}, want: "2\n3"},
		{name: "crlf", max: 3, writes: []string{"a\r\nb\r\n"}, want: "a\nb"},
		{name: "long line cut", max: 1, writes: []string{long + "\n"}, want: long[:maxLineBytes]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRing(tc.max)
			for _, w := range tc.writes {
				_, _ = r.Write([]byte(w))
			}
			if got := r.String(); got != tc.want {
				t.Errorf("ring: got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLastLines(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "agent.log")
	var b strings.Builder
	for i := range 20000 { // more than tailReadBytes
		fmt.Fprintf(&b, "line %d\n", i)
	}
	if err := os.WriteFile(path, []byte(b.String()+"fatal: the end"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := lastLines(path, 3), "line 19998\nline 19999\nfatal: the end"; got != want {
		t.Errorf("lastLines: got %q, want %q", got, want)
	}
	if got := lastLines(filepath.Join(t.TempDir(), "missing"), 3); got != "" {
		t.Errorf("lastLines of a missing file: got %q, want empty", got)
	}
}

func TestAgentEnv(t *testing.T) {
	t.Parallel()
	host := map[string]string{"PATH": "/usr/bin", "HOME": "/home/kici", "SECRET": "orchestrator's", "KICI_SECRET_KEY": "k"}
	lookup := func(k string) (string, bool) { v, ok := host[k]; return v, ok }
	req := scaler.SpawnRequest{
		Env:      map[string]string{"KICI_AGENT_ID": "a1", "KICI_LABELS": "x", "PATH": "/req"},
		LabelSet: scaler.LabelSet{Env: map[string]string{"KICI_LABELS": "y", "FOO": "bar"}},
	}
	want := []string{"FOO=bar", "HOME=/home/kici", "KICI_AGENT_ID=a1", "KICI_AGENT_WORKDIR=/w/a1", "KICI_LABELS=y", "PATH=/req"}
	if diff := cmp.Diff(want, agentEnv(lookup, req, "/w/a1")); diff != "" {
		t.Errorf("agentEnv (-want +got):\n%s", diff)
	}
}
