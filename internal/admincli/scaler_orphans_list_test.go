package admincli

import (
	"strings"
	"testing"
)

func TestScalerOrphansList(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "scaler-orphans-list", args: []string{"scaler", "orphans", "list"}, code: 0},
		{name: "scaler-orphans-list-json", args: []string{"scaler", "orphans", "list", "-o", "json"}, code: 0},
		{name: "scaler-orphans-list-empty", args: []string{"scaler", "orphans", "list"}, empty: true, code: 0},
		{name: "scaler-orphans-list-empty-json", args: []string{"scaler", "orphans", "ls", "-o", "json"}, empty: true, code: 0},
		{name: "scaler-orphans-list-partial", args: []string{"scaler", "orphans", "list"}, env: map[string]string{envURL: "{url}" + fakeFailing}, code: 1},
		{name: "scaler-orphans-list-partial-json", args: []string{"scaler", "orphans", "list", "-o", "json"}, env: map[string]string{envURL: "{url}" + fakeFailing}, code: 1},
		{name: "scaler-orphans-list-not-configured", args: []string{"scaler", "orphans", "list"}, env: map[string]string{envURL: "{url}" + fakeNoScaler}, code: 1},
		{name: "scaler-orphans-list-node", args: []string{"scaler", "orphans", "list", "--node", "ci-2"}, code: 0},
		{name: "scaler-orphans-list-node-self", args: []string{"scaler", "orphans", "list", "--node", "ci-1"}, code: 0},
		{name: "scaler-orphans-list-node-without-scalers", args: []string{"scaler", "orphans", "list", "--node", "ci-3"}, code: 0},
		{name: "scaler-orphans-list-node-failed", args: []string{"scaler", "orphans", "list", "--node", "ci-4"}, code: 1},
		{name: "scaler-orphans-list-node-failed-json", args: []string{"scaler", "orphans", "list", "--node", "ci-4", "-o", "json"}, code: 1},
		{name: "scaler-orphans-list-node-all", args: []string{"scaler", "orphans", "list", "--node", "all"}, code: 1},
		{name: "scaler-orphans-list-node-all-json", args: []string{"scaler", "orphans", "list", "--node", "all", "-o", "json"}, code: 1},
		{name: "scaler-orphans-list-node-unknown", args: []string{"scaler", "orphans", "list", "--node", "ci-9"}, code: 1},
		{name: "scaler-orphans-list-node-bad", args: []string{"scaler", "orphans", "list", "--node", "ci/2"}, code: 2},
		{name: "scaler-orphans-list-node-empty", args: []string{"scaler", "orphans", "list", "--node", ""}, code: 2},
		{name: "scaler-orphans-list-node-standalone", args: []string{"scaler", "orphans", "list", "--node", "ci-2"}, env: map[string]string{envURL: "{url}" + fakeNoScaler}, code: 1},
		{name: "scaler-orphans-unknown-subcommand", args: []string{"scaler", "orphans", "lst"}, code: 2},
	})
}

// TestPrintNodeError: a node's error in a --node all block is "error: "
// and its first line, the other lines indented, blank lines and control
// characters never printed as they are.
func TestPrintNodeError(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ reason, want string }{
		{reason: "worker gone", want: "error: worker gone\n"},
		{reason: "stop agent: failed\n\n--- last output ---\r\nboom\x1b[2J\n", want: "error: stop agent: failed\n  --- last output ---\n  boom\\x1b[2J\n"},
		{reason: "", want: "error: the node answered no reason\n"},
	} {
		var b strings.Builder
		printNodeError(&b, tt.reason)
		if b.String() != tt.want {
			t.Errorf("printNodeError(%q): got %q, want %q", tt.reason, b.String(), tt.want)
		}
	}
}
