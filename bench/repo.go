package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// trivialWorkflow is one job of one step that does nothing: what the
// latency and dispatch benchmarks run.
const trivialWorkflow = `name: trivial
on:
  push: {branches: [main]}
jobs:
  t:
    steps:
      - run: "true"
`

// matrixWorkflow returns a workflow of one matrix job with n combinations,
// each one trivial step.
func matrixWorkflow(name string, n int) string {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprint(i)
	}
	return fmt.Sprintf(`name: %s
on:
  push: {branches: [main]}
jobs:
  t:
    matrix:
      i: [%s]
    steps:
      - run: "true"
`, name, strings.Join(vals, ", "))
}

// makeRepo creates a git repository under dir whose one commit on main
// holds the given workflow files, and returns its path.
func makeRepo(ctx context.Context, dir string, workflows map[string]string) (string, error) {
	repo := filepath.Join(dir, "repo")
	for name, text := range workflows {
		p := filepath.Join(repo, ".kici", "workflows", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			return "", err
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"-c", "user.name=bench", "-c", "user.email=bench@kici.invalid", "commit", "-q", "-m", "workflows"},
	} {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", repo}, args...)...)
		cmd.Env = minimalEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("git %s: %w: %s", args[0], err, out)
		}
	}
	return repo, nil
}
