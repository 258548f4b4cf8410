package e2e

import (
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestInlineArchive: a small repository's archive comes with the dispatch,
// so the agent makes no archive request; one over the inline limit is
// downloaded as before. Both runs succeed and read the checked-out file.
func TestInlineArchive(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		blob       int  // bytes of random data committed beside the workflow
		wantInline bool // the job log says the archive came with the job
	}{
		{name: "small repository", blob: 0, wantInline: true},
		{name: "archive over the inline limit", blob: 320 << 10, wantInline: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := startOrchestrator(t, "")
			dir := o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {branches: [main]}}
jobs:
  build:
    runs-on: [linux]
    steps:
      - run: cat hello.txt
`})
			files := map[string][]byte{"hello.txt": []byte("hello from the repository\n")}
			if tc.blob > 0 {
				b := make([]byte, tc.blob)
				_, _ = rand.Read(b) // incompressible, so the tar.gz stays over the limit
				files["blob.bin"] = b
			}
			for name, data := range files {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, args := range [][]string{{"add", "-A"},
				{"-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "files"}} {
				cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
				cmd.Env = minimalEnv()
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v: %s", args, err, out)
				}
			}
			startAgent(t, o, "", "agent-a", []string{"linux"})
			// The first dispatch of a commit inlines its archive only if
			// git makes it within a short wait, which a loaded machine may
			// miss; the second finds it in the archive cache.
			first := o.push(t)
			if r := o.waitRun(t, first, 60*time.Second, "first run to end", ended); r.Status != "success" {
				t.Fatalf("first run: got %s (%s), want success", r.Status, r.Error)
			}
			id := o.push(t)
			r := o.waitRun(t, id, 60*time.Second, "run to end", ended)
			if r.Status != "success" {
				t.Fatalf("run status: got %s (%s), want success; jobs %+v", r.Status, r.Error, r.Jobs)
			}
			lines := o.logs(t, id, "build")
			if !slices.Contains(lines, "hello from the repository") {
				t.Errorf("job log: got %q, want the line of hello.txt", lines)
			}
			inline := slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "[kici] using the archive sent with the job") })
			fetched := slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "[kici] fetching ") })
			if inline != tc.wantInline || fetched == tc.wantInline {
				t.Errorf("job log: got inline %v, fetched %v, want inline %v, fetched %v; lines %q",
					inline, fetched, tc.wantInline, !tc.wantInline, lines)
			}
		})
	}
}
