package workflow

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCompileValidKeepsTheValidFiles: one invalid file (or one reusing a
// name) does not stop its siblings; CompileWith still refuses the lot.
func TestCompileValidKeepsTheValidFiles(t *testing.T) {
	t.Parallel()
	valid := func(name string) []byte {
		return []byte("name: " + name + "\non:\n  push: {}\njobs:\n  build:\n    runs-on: [linux]\n    steps:\n      - run: echo hi\n")
	}
	files := []File{
		{Path: ".kici/workflows/a.yml", Data: valid("a")},
		{Path: ".kici/workflows/broken.yml", Data: []byte("name: broken\non:\n  push: {}\njobs:\n  x:\n    runs-on: [linux]\n    no-such-key: 1\n    steps:\n      - run: echo\n")},
		{Path: ".kici/workflows/c.yml", Data: valid("c")},
		{Path: ".kici/workflows/d.yml", Data: valid("a")}, // a's name again
	}
	plan, errs, err := CompileValid(files, Options{})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	var names []string
	for _, wf := range plan.Workflows {
		names = append(names, wf.Name)
	}
	if diff := cmp.Diff([]string{"a", "c"}, names); diff != "" {
		t.Errorf("valid workflows (-want +got):\n%s", diff)
	}
	var bad []string
	for _, e := range errs {
		bad = append(bad, e.File)
	}
	if len(errs) < 2 || bad[0] != ".kici/workflows/broken.yml" || bad[len(bad)-1] != ".kici/workflows/d.yml" {
		t.Errorf("problems: got %v, want broken.yml's then d.yml's", errs)
	}
	if _, err := CompileWith(files, Options{}); err == nil || !strings.Contains(err.Error(), "broken.yml") {
		t.Errorf("CompileWith: got %v, want the problems of broken.yml", err)
	}
	many := make([]File, MaxFiles+1)
	for i := range many {
		many[i] = File{Path: ".kici/workflows/x.yml", Data: valid("x")}
	}
	if _, _, err := CompileValid(many, Options{}); !errors.Is(err, ErrTooManyFiles) {
		t.Errorf("too many files: got %v, want ErrTooManyFiles", err)
	}
}
