package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/apiv1"
)

// Three path-filtered workflows: docs/** and src/** on pull requests and
// pushes, *.md (top-level Markdown files) on pushes.
var changedFilesWorkflows = map[string]string{
	"docs.yml": `
name: docs
on:
  pull_request: {paths: ["docs/**"]}
  push: {paths: ["docs/**"]}
jobs:
  check: {runs-on: [linux], steps: [{run: "true"}]}
`,
	"src.yml": `
name: src
on:
  pull_request: {paths: ["src/**"]}
  push: {paths: ["src/**"]}
jobs:
  check: {runs-on: [linux], steps: [{run: "true"}]}
`,
	"md.yml": `
name: md
on:
  push: {paths: ["*.md"]}
jobs:
  check: {runs-on: [linux], steps: [{run: "true"}]}
`,
}

// deliverGitHub posts a signed GitHub delivery of kind to source and
// returns the workflows of the runs it started, sorted.
func (o *orchestrator) deliverGitHub(t *testing.T, source, secret, kind, id string, body []byte) []string {
	t.Helper()
	tr := o.postGitHub(t, source, secret, kind, id, body)
	workflows := []string{}
	for _, r := range tr.Runs {
		workflows = append(workflows, r.Workflow)
	}
	slices.Sort(workflows)
	return workflows
}

// TestChangedFilesFromMergeBaseAndNewBranch delivers, on a real
// orchestrator, a pull request whose only change since it forked from main
// is docs/a.md (while main itself moved on in src/), and the first push of
// a branch whose commit added README.md: the pull request runs the docs/**
// workflow and not the src/** one, and the push runs the *.md one only. A
// new branch listing no commits is diffed against the default branch.
func TestChangedFilesFromMergeBaseAndNewBranch(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL)
		dir := t.TempDir()
		write := func(name, text string) {
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for name, text := range changedFilesWorkflows {
			write(".kici/workflows/"+name, text)
		}
		write("src/main.go", "package main\n")
		gitIn(t, dir, "init", "-q", "-b", "main")
		gitIn(t, dir, "add", "-A")
		gitIn(t, dir, "commit", "-q", "-m", "base")
		gitIn(t, dir, "checkout", "-q", "-b", "patch-1")
		write("docs/a.md", "# a\n")
		gitIn(t, dir, "add", "-A")
		gitIn(t, dir, "commit", "-q", "-m", "docs")
		headSHA := gitIn(t, dir, "rev-parse", "HEAD")
		gitIn(t, dir, "checkout", "-q", "main")
		write("src/main.go", "package main\n\nfunc main() {}\n")
		gitIn(t, dir, "commit", "-q", "-am", "main moves on in src")
		baseSHA := gitIn(t, dir, "rev-parse", "HEAD")
		gitIn(t, dir, "checkout", "-q", "-b", "readme")
		write("README.md", "# hello\n")
		gitIn(t, dir, "add", "-A")
		gitIn(t, dir, "commit", "-q", "-m", "readme")
		readmeSHA := gitIn(t, dir, "rev-parse", "HEAD")
		gitIn(t, dir, "checkout", "-q", "main")

		const hook = "changed-files-hook"
		o.api(t, "POST", "/api/v1/sources", apiv1.Source{Name: "changed", Kind: "local", Path: dir, WebhookSecret: hook}, nil, http.StatusCreated)

		pr := fmt.Appendf(nil, `{"action": "opened", "number": 3,
  "pull_request": {"number": 3,
    "head": {"ref": "patch-1", "sha": %q, "repo": {"full_name": "octo-org/hello"}},
    "base": {"ref": "main", "sha": %q, "repo": {"full_name": "octo-org/hello"}}},
  "repository": {"full_name": "octo-org/hello"}, "sender": {"login": "mona"}}`, headSHA, baseSHA)
		if diff := cmp.Diff([]string{"docs"}, o.deliverGitHub(t, "changed", hook, "pull_request", "e2e-changed-pr", pr)); diff != "" {
			t.Errorf("workflows run by the pull request (-want +got):\n%s", diff)
		}

		push := fmt.Appendf(nil, `{"ref": "refs/heads/readme", "before": "0000000000000000000000000000000000000000",
  "after": %q, "created": true, "deleted": false,
  "repository": {"full_name": "octo-org/hello", "default_branch": "main"},
  "pusher": {"name": "mona"}, "sender": {"login": "mona"},
  "commits": [{"id": %q, "added": ["README.md"], "removed": [], "modified": []}]}`, readmeSHA, readmeSHA)
		if diff := cmp.Diff([]string{"md"}, o.deliverGitHub(t, "changed", hook, "push", "e2e-changed-push", push)); diff != "" {
			t.Errorf("workflows run by the new branch's push (-want +got):\n%s", diff)
		}

		// A new branch at patch-1's commit, with no commits listed (none
		// are new to the repository): its files are its diff from the
		// merge base with the default branch, docs/a.md.
		bare := fmt.Appendf(nil, `{"ref": "refs/heads/docs-copy", "before": "0000000000000000000000000000000000000000",
  "after": %q, "created": true, "repository": {"full_name": "octo-org/hello"}, "commits": []}`, headSHA)
		if diff := cmp.Diff([]string{"docs"}, o.deliverGitHub(t, "changed", hook, "push", "e2e-changed-push-2", bare)); diff != "" {
			t.Errorf("workflows run by the new branch listing no commits (-want +got):\n%s", diff)
		}
	})
}

// postGitHub posts body as a GitHub delivery of kind, signed with secret,
// to source's webhook, and returns the orchestrator's answer, failing the
// test unless it is a 200.
func (o *orchestrator) postGitHub(t *testing.T, source, secret, kind, id string, body []byte) apiv1.TriggerResponse {
	t.Helper()
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	req, err := http.NewRequest(http.MethodPost, "http://"+o.addr+"/webhooks/github/"+source, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", kind)
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var tr apiv1.TriggerResponse
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &tr) != nil {
		t.Fatalf("deliver %s: got %d %s, want 200", kind, resp.StatusCode, data)
	}
	return tr
}
