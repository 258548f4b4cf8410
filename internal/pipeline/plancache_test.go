package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kici-dev/kici/internal/scheduler"
	"github.com/kici-dev/kici/internal/source"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/trigger"
	"github.com/kici-dev/kici/internal/workflow"
)

// countingSource counts the workflow reads of a source.
type countingSource struct {
	source.Source
	reads atomic.Int64
	fail  atomic.Bool // when set, Workflows fails as a broken read would
}

func (c *countingSource) Workflows(ctx context.Context, sha string) ([]workflow.File, []byte, error) {
	c.reads.Add(1)
	if c.fail.Load() {
		return nil, nil, fmt.Errorf("read %s: %w", sha, context.DeadlineExceeded)
	}
	return c.Source.Workflows(ctx, sha)
}

func gitCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=kici test", "-c", "user.email=test@kici.invalid",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func commitFile(t *testing.T, repo, name, content string) string {
	t.Helper()
	p := filepath.Join(repo, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, repo, "add", "-A")
	gitCmd(t, repo, "commit", "-qm", "change "+name)
	return gitCmd(t, repo, "rev-parse", "HEAD")
}

const manualWF = "name: %s\non: {manual: {}}\njobs:\n  build:\n    steps:\n      - run: echo hi\n"

// TestPlanCache checks that a second trigger of the same commit reads
// the source's workflows no more, while another commit, another location
// of the source, or a read that failed reads again.
func TestPlanCache(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := store.Open(t.Context(), store.Config{DataDir: filepath.Join(dir, "data")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(dir, "repo")
	gitCmd(t, dir, "init", "-q", "-b", "main", repo)
	c1 := commitFile(t, repo, ".kici/workflows/ci.yml", fmt.Sprintf(manualWF, "ci"))
	c2 := commitFile(t, repo, ".kici/workflows/ci.yml", fmt.Sprintf(manualWF, "ci2"))
	row, err := db.CreateSource(t.Context(), store.Source{Name: "app", Kind: "local", Location: repo})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	p := New(logger, db, scheduler.New(logger, db, scheduler.Config{}, nil, nil), Config{DataDir: dir})
	local := &source.Local{Path: repo}
	t.Cleanup(func() { _ = local.Close() })
	src := &countingSource{Source: local}
	p.sources["app"] = cachedSource{row: row, src: src}

	trig := func(sha string) Result {
		t.Helper()
		ev := trigger.ManualEvent("main", nil)
		ev.SHA = sha
		res, err := p.Trigger(t.Context(), "app", ev)
		if err != nil {
			t.Fatalf("trigger %s: %v", sha, err)
		}
		if len(res.Runs) != 1 {
			t.Fatalf("trigger %s: got %d runs, want 1", sha, len(res.Runs))
		}
		return res
	}
	trig(c1)
	if got := trig(c1).Runs[0].Workflow; got != "ci" {
		t.Errorf("second trigger of c1 ran workflow %q, want ci", got)
	}
	if got := src.reads.Load(); got != 1 {
		t.Errorf("two triggers of one commit read the workflows %d times, want 1", got)
	}
	if got := trig(c2).Runs[0].Workflow; got != "ci2" {
		t.Errorf("trigger of c2 ran workflow %q, want ci2", got)
	}
	if got := src.reads.Load(); got != 2 {
		t.Errorf("after another commit: %d reads, want 2", got)
	}

	// The same name and commit at another location is another plan.
	moved := row
	moved.Location = repo + "/."
	if _, _, err := p.plan(t.Context(), moved, src, c1); err != nil {
		t.Fatal(err)
	}
	if got := src.reads.Load(); got != 3 {
		t.Errorf("after the location changed: %d reads, want 3", got)
	}

	// A failed read is not kept; a deterministic error is.
	src.fail.Store(true)
	c3 := commitFile(t, repo, "README.md", "no workflows change\n")
	if _, _, err := p.plan(t.Context(), row, src, c3); err == nil {
		t.Fatal("plan with a failing read: got no error")
	}
	src.fail.Store(false)
	if plan, _, err := p.plan(t.Context(), row, src, c3); err != nil || plan.Workflows[0].Name != "ci2" {
		t.Fatalf("plan after the failed read: %v", err)
	}
	if got := src.reads.Load(); got != 5 {
		t.Errorf("after a failed read and a retry: %d reads, want 5", got)
	}
	gitCmd(t, repo, "rm", "-q", ".kici/workflows/ci.yml")
	gitCmd(t, repo, "commit", "-qm", "none")
	none := gitCmd(t, repo, "rev-parse", "HEAD")
	for range 2 {
		if _, _, err := p.plan(t.Context(), row, src, none); err == nil {
			t.Fatal("plan of a commit without workflows: got no error")
		}
	}
	if got := src.reads.Load(); got != 6 {
		t.Errorf("two plans of a commit without workflows: %d reads in all, want 6", got)
	}
}

// TestPlanCacheBounded checks that the cache keeps at most its size,
// dropping the least recently used entry.
func TestPlanCacheBounded(t *testing.T) {
	t.Parallel()
	c := newPlanCache(3)
	k := func(i int) planKey { return planKey{source: "s", sha: fmt.Sprint(i)} }
	for i := range 3 {
		c.put(k(i), planResult{plan: &workflow.Plan{SchemaVersion: i}})
	}
	c.get(k(0)) // 1 is now the least recently used
	c.put(k(3), planResult{})
	if got := c.len(); got != 3 {
		t.Errorf("got %d entries, want 3", got)
	}
	if _, ok := c.get(k(1)); ok {
		t.Error("entry 1 (least recently used) is still kept")
	}
	for _, i := range []int{0, 2, 3} {
		if _, ok := c.get(k(i)); !ok {
			t.Errorf("entry %d was dropped", i)
		}
	}
}
