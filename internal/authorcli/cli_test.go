package authorcli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/")

// TestCommands runs the kici command as a user would and compares its
// exit status, stdout and stderr with golden files.
func TestCommands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		code int
	}{
		{name: "validate-ok", args: []string{"validate", "testdata/repo"}, code: 0},
		{name: "validate-example", args: []string{"validate", "../../examples/hello"}, code: 0},
		{name: "validate-broken", args: []string{"validate", "../workflow/testdata/invalid/structure"}, code: 1},
		{name: "validate-missing-dir", args: []string{"validate", "testdata/nope"}, code: 1},
		{name: "validate-too-many-args", args: []string{"validate", "a", "b"}, code: 2},
		{name: "compile-broken", args: []string{"compile", "../workflow/testdata/invalid/syntax"}, code: 1},
		{name: "preview-push-main", args: []string{"preview", "testdata/repo", "push", "--ref", "main", "--changed-file", "src/a.go"}, code: 0},
		{name: "preview-push-docs-only", args: []string{"preview", "testdata/repo", "push", "--ref", "main", "--changed-file", "src/README.md"}, code: 0},
		{name: "preview-push-unknown-files", args: []string{"preview", "testdata/repo", "push", "--ref", "main"}, code: 0},
		{name: "preview-tag-json", args: []string{"preview", "testdata/repo", "tag", "--ref", "v1.0.0", "-o", "json"}, code: 0},
		{name: "preview-pr", args: []string{"preview", "testdata/repo", "pull_request", "--base", "main", "--head", "feature", "--action", "closed"}, code: 0},
		{name: "preview-manual-missing-input", args: []string{"preview", "testdata/repo", "manual"}, code: 0},
		{name: "preview-manual-json", args: []string{"preview", "testdata/repo", "manual", "--input", "target=production", "-o", "json"}, code: 0},
		{name: "preview-schedule", args: []string{"preview", "testdata/repo", "schedule", "--cron", "0 3 * * *"}, code: 0},
		{name: "preview-github-push-json", args: []string{"preview", "testdata/repo", "--github-event", "push", "--payload", "testdata/push_commits.json", "-o", "json"}, code: 0},
		{name: "preview-github-tag", args: []string{"preview", "testdata/repo", "--github-event", "push", "--payload", "testdata/push_tag.json"}, code: 0},
		{name: "preview-github-pr", args: []string{"preview", "testdata/repo", "--github-event", "pull_request", "--payload", "testdata/pull_request_synchronize_fork.json"}, code: 0},
		{name: "preview-github-pr-changed-file", args: []string{"preview", "testdata/repo", "--github-event", "pull_request", "--payload", "testdata/pull_request_synchronize_fork.json", "--changed-file", "docs/a.md"}, code: 0},
		{name: "preview-github-new-branch", args: []string{"preview", "testdata/repo", "--github-event", "push", "--payload", "testdata/push_new_branch.json"}, code: 0},
		{name: "preview-github-ping-json", args: []string{"preview", "testdata/repo", "--github-event", "ping", "--payload", "testdata/ping.json", "-o", "json"}, code: 0},
		{name: "preview-dashed-input-default", args: []string{"preview", "testdata/dashed", "manual"}, code: 0},
		{name: "preview-dashed-input-set", args: []string{"preview", "testdata/dashed", "manual", "--input", "dry-run=false"}, code: 0},
		{name: "validate-dashed-input", args: []string{"validate", "testdata/dashed"}, code: 0},
		{name: "preview-unknown-event", args: []string{"preview", "testdata/repo", "merge"}, code: 2},
		{name: "preview-payload-without-kind", args: []string{"preview", "--payload", "x.json"}, code: 2},
		{name: "preview-bad-input", args: []string{"preview", "testdata/repo", "manual", "--input", "novalue"}, code: 2},
		{name: "preview-bad-output", args: []string{"preview", "testdata/repo", "push", "-o", "yaml"}, code: 2},
		{name: "unknown-flag", args: []string{"validate", "--nope"}, code: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := Main(tt.args, strings.NewReader(""), &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit status: got %d, want %d (stderr %q)", code, tt.code, stderr.String())
			}
			got := "$ kici " + strings.Join(tt.args, " ") + "\n--- stdout\n" + stdout.String() + "--- stderr\n" + stderr.String()
			path := filepath.Join("testdata", "golden", tt.name+".txt")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (go test -update writes it): %v", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("output differs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHelpExplainsEveryFlag walks the command tree: every command has a
// short description and every flag a usage text.
func TestHelpExplainsEveryFlag(t *testing.T) {
	t.Parallel()
	root := newRoot(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{})
	for _, c := range append(root.Commands(), root) {
		if c.Short == "" && c.Name() != "help" && c.Name() != "completion" {
			t.Errorf("command %q has no short description", c.Name())
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Usage == "" {
				t.Errorf("flag --%s of %q has no help text", f.Name, c.Name())
			}
		})
	}
}

func TestCompileWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src, err := os.ReadFile("testdata/repo/.kici/workflows/ops.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".kici", "workflows"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".kici", "workflows", "ops.yml"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"compile", "--write", dir}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var printed bytes.Buffer
	if code := Main([]string{"compile", dir}, nil, &printed, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	written, err := os.ReadFile(filepath.Join(dir, ".kici", "kici.lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(printed.String(), string(written)); diff != "" {
		t.Errorf("written lock differs from printed plan (-printed +written):\n%s", diff)
	}
}
