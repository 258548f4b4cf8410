package source_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kici-dev/kici/internal/source"
	"github.com/kici-dev/kici/internal/workflow"
)

// The repository every kind of source is tested with:
//
//	c1  tag v1, branch feature/x: ci.yml (v1), no lock
//	c2  branch main: ci.yml (v2), deploy.yaml, the lock; README.md removed
//	c3  branch bare: no .kici at all
var (
	ciV1 = "name: ci\non: {push: {}}\njobs:\n  build:\n    steps:\n      - run: echo v1\n"
	ciV2 = "name: ci\non: {push: {}}\njobs:\n  build:\n    steps:\n      - run: echo v2\n"
	dep  = "name: deploy\non: {tag: {}}\njobs:\n  ship:\n    steps:\n      - run: ./deploy.sh\n"
	lock = `{"schemaVersion":1,"workflows":[]}` + "\n"

	ignored = map[string]string{
		".kici/workflows/notes.txt":      "not a workflow\n",
		".kici/workflows/.hidden.yml":    "name: hidden\n",
		".kici/workflows/sub/nested.yml": "name: nested\n",
	}
	tree1 = merge(ignored, map[string]string{
		".kici/workflows/ci.yml": ciV1,
		"README.md":              "hello\n",
		"src/main.go":            "package main\n",
	})
	tree2 = merge(ignored, map[string]string{
		".kici/workflows/ci.yml":      ciV2,
		".kici/workflows/deploy.yaml": dep,
		workflow.LockPath:             lock,
		"src/main.go":                 "package main\n\nfunc main() {}\n",
		"docs/guide.md":               "# guide\n",
	})
	tree3 = map[string]string{"README.md": "no workflows here\n"}

	changed12 = []string{
		workflow.LockPath, ".kici/workflows/ci.yml", ".kici/workflows/deploy.yaml",
		"README.md", "docs/guide.md", "src/main.go",
	}
)

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// fixture is the test repository as one kind of source sees it.
type fixture struct {
	src        source.Source
	c1, c2, c3 string
}

// kinds builds each kind of source over the test repository.
var kinds = []struct {
	name  string
	build func(t *testing.T) fixture
}{
	{name: "local", build: func(t *testing.T) fixture {
		dir, c1, c2, c3 := makeRepo(t)
		return fixture{src: &source.Local{Path: dir}, c1: c1, c2: c2, c3: c3}
	}},
	{name: "git", build: func(t *testing.T) fixture {
		dir, c1, c2, c3 := makeRepo(t)
		g := &source.Git{URL: "file://" + dir, CacheDir: filepath.Join(t.TempDir(), "cache", "mirror.git")}
		return fixture{src: g, c1: c1, c2: c2, c3: c3}
	}},
	{name: "github", build: func(t *testing.T) fixture {
		fake := newFake(t)
		return fixture{src: &source.GitHub{Repo: fakeRepo, Token: fakeToken, APIBaseURL: fake.URL}, c1: fake.c1, c2: fake.c2, c3: fake.c3}
	}},
}

// forEachKind runs fn, in parallel, once per kind of source.
func forEachKind(t *testing.T, fn func(t *testing.T, f fixture)) {
	t.Helper()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			fn(t, k.build(t))
		})
	}
}

// gitEnv is the environment of the test's own git commands: no system or
// global configuration, a fixed identity and dates.
func gitEnv(home string) []string {
	return append(os.Environ(),
		"HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=kici test", "GIT_AUTHOR_EMAIL=test@kici.invalid",
		"GIT_COMMITTER_NAME=kici test", "GIT_COMMITTER_EMAIL=test@kici.invalid",
		"GIT_AUTHOR_DATE=2026-05-01T12:00:00Z", "GIT_COMMITTER_DATE=2026-05-01T12:00:00Z",
	)
}

// gitT runs git in dir for the test and returns its trimmed output.
func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false",
		"-c", "tag.gpgsign=false", "-C", dir}, args...)...)
	cmd.Env = gitEnv(dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commitTree replaces the work tree of dir with files and commits it.
func commitTree(t testing.TB, dir string, files map[string]string, msg string) string {
	t.Helper()
	gitT(t, dir, "rm", "-rq", "--ignore-unmatch", ".")
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-qm", msg)
	return gitT(t, dir, "rev-parse", "HEAD")
}

// makeRepo creates the test repository with the git CLI.
func makeRepo(t *testing.T) (dir, c1, c2, c3 string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "origin")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "init", "-q", "-b", "main")
	c1 = commitTree(t, dir, tree1, "first")
	gitT(t, dir, "tag", "-a", "v1", "-m", "v1")
	gitT(t, dir, "branch", "feature/x")
	c2 = commitTree(t, dir, tree2, "second")
	gitT(t, dir, "checkout", "-qb", "bare")
	c3 = commitTree(t, dir, tree3, "third")
	gitT(t, dir, "checkout", "-q", "main")
	return dir, c1, c2, c3
}

// untar reads a tar.gz into path → content, files only.
func untar(t *testing.T, data []byte) map[string]string {
	t.Helper()
	gr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("gunzip: %v", err)
	}
	tr := tar.NewReader(gr)
	files := map[string]string{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("untar: %v", err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("untar %s: %v", hdr.Name, err)
		}
		files[hdr.Name] = string(b)
	}
	return files
}

func fileMap(files []workflow.File) map[string]string {
	m := map[string]string{}
	for _, f := range files {
		m[f.Path] = string(f.Data)
	}
	return m
}

func paths(files []workflow.File) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	return out
}
