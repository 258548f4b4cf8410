package workflow

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

// TestGoldenValid compiles each testdata/valid/<case> repository and
// compares the plan with <case>/plan.golden.json.
func TestGoldenValid(t *testing.T) {
	t.Parallel()
	cases, err := filepath.Glob("testdata/valid/*")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	for _, dir := range cases {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			plan, err := CompileDir(dir)
			if err != nil {
				t.Fatalf("compile %s: %v", dir, err)
			}
			got, err := plan.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			compareGolden(t, filepath.Join(dir, "plan.golden.json"), string(got))

			// The plan must read back as a lock file unchanged.
			back, err := ParseLock(got)
			if err != nil {
				t.Fatalf("parse own plan as lock: %v", err)
			}
			if diff := cmp.Diff(plan, back); diff != "" {
				t.Errorf("lock round trip differs (-compiled +read):\n%s", diff)
			}
		})
	}
}

// TestGoldenInvalid compiles each testdata/invalid/<case> repository and
// compares the full error list with <case>/errors.golden.
func TestGoldenInvalid(t *testing.T) {
	t.Parallel()
	cases, err := filepath.Glob("testdata/invalid/*")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	for _, dir := range cases {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			plan, err := CompileDir(dir)
			if plan != nil {
				t.Fatalf("got a plan for an invalid repository, want none")
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("got error %v (%T), want an ErrorList", err, err)
			}
			for _, e := range list {
				if e.Line < 1 || e.Col < 1 || !strings.HasSuffix(e.File, ".yml") && !strings.HasSuffix(e.File, ".yaml") {
					t.Errorf("error without a usable position: %q", e.Error())
				}
			}
			rel := list.WithPrefix(func(f string) string {
				r, _ := filepath.Rel(dir, f)
				return filepath.ToSlash(r)
			})
			compareGolden(t, filepath.Join(dir, "errors.golden"), rel.Error()+"\n")
		})
	}
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

func TestCompileDirWithoutWorkflows(t *testing.T) {
	t.Parallel()
	_, err := CompileDir(t.TempDir())
	if !errors.Is(err, ErrNoWorkflows) {
		t.Fatalf("got %v, want ErrNoWorkflows", err)
	}
}
