package source_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/kici-dev/kici/internal/source"
	"github.com/kici-dev/kici/internal/workflow"
)

// BenchmarkResolveAndWorkflows measures what a trigger asks of a source:
// resolve a ref, then read the workflows at the commit, on a repository of
// a few workflow files (and other files beside them).
func BenchmarkResolveAndWorkflows(b *testing.B) {
	tree := map[string]string{"README.md": "hello\n", "src/main.go": "package main\n", workflow.LockPath: lock}
	for i := range 5 {
		tree[fmt.Sprintf("%s/w%d.yml", workflow.WorkflowsDir, i)] = ciV1
	}
	dir := filepath.Join(b.TempDir(), "origin")
	gitT(b, b.TempDir(), "init", "-q", "-b", "main", dir)
	sha := commitTree(b, dir, tree, "bench")
	for _, bc := range []struct {
		name string
		src  source.Source
		ref  string
	}{
		{name: "local branch", src: &source.Local{Path: dir}, ref: "main"},
		{name: "git sha", src: &source.Git{URL: "file://" + dir, CacheDir: filepath.Join(b.TempDir(), "m.git")}, ref: sha},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := b.Context()
			for b.Loop() {
				got, err := bc.src.Resolve(ctx, bc.ref)
				if err != nil || got != sha {
					b.Fatalf("resolve: got %s, %v; want %s", got, err, sha)
				}
				files, lk, err := bc.src.Workflows(ctx, got)
				if err != nil || len(files) != 5 || lk == nil {
					b.Fatalf("workflows: got %d files, lock %v, %v", len(files), lk != nil, err)
				}
			}
		})
	}
}
