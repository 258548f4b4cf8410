package admincli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTrigger(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "trigger", args: []string{"trigger", "hello"}, code: 0},
		{name: "trigger-json", args: []string{"trigger", "hello", "--ref", "main", "-o", "json"}, code: 0},
		{name: "trigger-manual", args: []string{"trigger", "hello", "--input", "greeting=bonjour"}, code: 0},
		{name: "trigger-no-match", args: []string{"trigger", "hello", "--ref", "feature"}, code: 1},
		{name: "trigger-no-match-json", args: []string{"trigger", "hello", "--ref", "feature", "-o", "json"}, code: 1},
		{name: "trigger-unknown-source", args: []string{"trigger", "nope"}, code: 1},
		{name: "trigger-problems", args: []string{"trigger", "hello", "--ref", "partly-invalid"}, code: 0},
		{name: "trigger-problems-json", args: []string{"trigger", "hello", "--ref", "partly-invalid", "-o", "json"}, code: 0},
		{name: "trigger-problems-no-match", args: []string{"trigger", "hello", "--ref", "invalid-no-match"}, code: 1},
		{name: "trigger-wait-success", args: []string{"trigger", "hello", "--wait"}, code: 0},
		{name: "trigger-wait-failure", args: []string{"trigger", "hello", "--ref", "broken", "--wait"}, code: 1},
		{name: "trigger-wait-json", args: []string{"trigger", "hello", "--wait", "-o", "json"}, code: 0},
		{name: "trigger-bad-event", args: []string{"trigger", "hello", "--event", "pull_request"}, code: 2},
		{name: "trigger-input-not-manual", args: []string{"trigger", "hello", "--event", "push", "--input", "a=b"}, code: 2},
		{name: "trigger-bad-input", args: []string{"trigger", "hello", "--input", "novalue"}, code: 2},
		{name: "trigger-no-source", args: []string{"trigger"}, code: 2},
		{name: "trigger-workflow", args: []string{"trigger", "hello", "--event", "manual", "--workflow", "ops"}, code: 0},
		{name: "trigger-workflow-unknown", args: []string{"trigger", "hello", "--event", "manual", "--workflow", "ops", "--workflow", "nope"}, code: 1},
		{name: "trigger-workflow-empty", args: []string{"trigger", "hello", "--workflow", ""}, code: 2},
		{name: "trigger-changed-file", args: []string{"trigger", "hello", "--changed-file", "docs/a.md", "--changed-file", "src/main.go"}, code: 0},
		{name: "trigger-changed-file-no-match", args: []string{"trigger", "hello", "--changed-file", "docs/a.md"}, code: 1},
		{name: "trigger-changed-file-not-push", args: []string{"trigger", "hello", "--event", "tag", "--ref", "v1", "--changed-file", "a.go"}, code: 2},
		{name: "trigger-changed-file-absolute", args: []string{"trigger", "hello", "--changed-file", "/etc/passwd"}, code: 2},
	})
}

// TestTriggerWaitSeveralRuns follows two runs at once: their lines mix in
// any order, so only the outcome and the prefixes are checked.
func TestTriggerWaitSeveralRuns(t *testing.T) {
	t.Parallel()
	fake := newFakeAPI(t, false)
	stdout, stderr, code := runCLI(t.Context(), []string{"trigger", "multi", "--wait"},
		map[string]string{envURL: fake.URL(), envToken: fakeToken})
	if code != 0 {
		t.Fatalf("exit status: got %d, want 0 (stderr %q)", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) < 2 {
		t.Fatalf("got stdout %q, want the outcome of two runs at its end", stdout)
	}
	if diff := cmp.Diff([]string{"run r-200 success", "run r-210 success"}, lines[len(lines)-2:]); diff != "" {
		t.Errorf("outcome lines differ (-want +got):\n%s", diff)
	}
	for _, want := range []string{"hello/lint | lint ok for kici-hello\n", "docs/lint | docs ok\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("got stdout %q, want it to contain %q", stdout, want)
		}
	}
}
