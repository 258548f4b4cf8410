package workflow

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// aliasBomb is the workflow of the "resource bombs" report: an env anchor
// of keys keys, and jobs jobs that each alias it.
func aliasBomb(keys, jobs int) []byte {
	var b strings.Builder
	b.WriteString("name: bomb\non: {push: {}}\nenv: &e\n")
	for i := range keys {
		fmt.Fprintf(&b, "  KEY_%04d: value-%04d\n", i, i)
	}
	b.WriteString("jobs:\n")
	for i := range jobs {
		fmt.Fprintf(&b, "  job%04d:\n    runs-on: [linux]\n    env: *e\n    steps: [{run: x}]\n", i)
	}
	return []byte(b.String())
}

// lineOfNth returns the 1-based line of the nth (1-based) line of src
// that equals line once trimmed, and the column of its first character.
func lineOfNth(src []byte, line string, nth int) (int, int) {
	seen := 0
	for i, l := range strings.Split(string(src), "\n") {
		if strings.TrimSpace(l) == line {
			seen++
			if seen == nth {
				return i + 1, len(l) - len(strings.TrimLeft(l, " ")) + 1
			}
		}
	}
	return 0, 0
}

// jobsWorkflow is a workflow of n plain jobs, each with a matrix of
// combos values when combos > 0.
func jobsWorkflow(n, combos int) []byte {
	var b strings.Builder
	b.WriteString("name: many\non: {push: {}}\njobs:\n")
	for i := range n {
		fmt.Fprintf(&b, "  j%d:\n    steps: [{run: x}]\n", i)
		if combos > 0 {
			b.WriteString("    matrix: {v: [")
			for c := range combos {
				if c > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "c%d", c)
			}
			b.WriteString("]}\n")
		}
	}
	return []byte(b.String())
}

// TestAliasBombRefused compiles the exact bomb of the report (an anchor of
// 2,000 env keys, 5,000 jobs aliasing it): it must be refused with one
// error at the alias that crosses MaxAliasNodes, naming the alias, having
// allocated a small fraction of what expanding it would take.
//
// Not parallel: it reads the process-wide allocation counter, which only
// this test may move while it runs (parallel tests wait for serial ones).
func TestAliasBombRefused(t *testing.T) {
	src := aliasBomb(2000, 5000)
	if len(src) < 300_000 {
		t.Fatalf("bomb is %d bytes, want the report's ~357 KB", len(src))
	}
	// Each *e adds the mapping and its 2,000 key and value scalars.
	perAlias := 1 + 2*2000
	crossing := MaxAliasNodes/perAlias + 1
	line, col := lineOfNth(src, "env: *e", crossing)
	const name = ".kici/workflows/bomb.yml"
	want := ErrorList{{File: name, Line: line, Col: col + len("env: "),
		Msg: fmt.Sprintf("alias *e: YAML aliases expand this file by more than %d nodes; write the repeated parts out or alias less", MaxAliasNodes)}}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	plan, err := Compile([]File{{Path: name, Data: src}})
	runtime.ReadMemStats(&after)

	if plan != nil {
		t.Fatalf("got a plan of %d workflows, want none", len(plan.Workflows))
	}
	var got ErrorList
	if !errors.As(err, &got) {
		t.Fatalf("got error %v (%T), want an ErrorList", err, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors differ (-want +got):\n%s", diff)
	}
	// Expanding the bomb takes gigabytes; parsing the text a few tens of
	// megabytes. The bound is generous so the test holds on any Go version.
	const bound = 100 << 20
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > bound {
		t.Errorf("got %d MB allocated refusing the bomb, want at most %d MB", alloc>>20, bound>>20)
	}
}

func TestCompileLimits(t *testing.T) {
	t.Parallel()
	const name = ".kici/workflows/w.yml"
	tests := []struct {
		name string
		src  string
		opts Options
		// want is a substring of the one error expected; empty means the
		// file compiles.
		want string
	}{
		{name: "alias to its own ancestor", src: "on: {push: {}}\njobs: &j\n  a: *j\n",
			want: "w.yml:3:6: alias *j refers to a node that contains it"},
		{name: "nested aliases that double", src: billionLaughs(30),
			want: fmt.Sprintf("YAML aliases expand this file by more than %d nodes", MaxAliasNodes)},
		{name: "aliases under the budget", src: "on: {push: {}}\njobs:\n  a: {steps: &s [{run: x}, {run: y}], env: &e {A: \"1\"}}\n  b: {steps: *s, env: *e}\n"},
		{name: "jobs at the default limit", src: string(jobsWorkflow(DefaultMaxJobsPerRun, 0))},
		{name: "one job over the default limit", src: string(jobsWorkflow(DefaultMaxJobsPerRun+1, 0)),
			want: fmt.Sprintf(`w.yml:4:3: workflow "many" has %d jobs, over the limit of %d jobs per run`, DefaultMaxJobsPerRun+1, DefaultMaxJobsPerRun)},
		{name: "matrix over the default limit", src: string(jobsWorkflow(5, 201)),
			want: fmt.Sprintf(`w.yml:4:3: workflow "many" expands to 1005 jobs (matrix included), over the limit of %d jobs per run`, DefaultMaxJobsPerRun)},
		{name: "matrix over a configured limit", src: string(jobsWorkflow(2, 3)), opts: Options{MaxJobsPerRun: 5},
			want: `w.yml:4:3: workflow "many" expands to 6 jobs (matrix included), over the limit of 5 jobs per run`},
		{name: "jobs over a configured limit", src: string(jobsWorkflow(6, 0)), opts: Options{MaxJobsPerRun: 5},
			want: `workflow "many" has 6 jobs, over the limit of 5 jobs per run`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plan, err := CompileWith([]File{{Path: name, Data: []byte(tt.src)}}, tt.opts)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want a plan", err)
				}
				if len(plan.Workflows) != 1 || len(plan.Workflows[0].Jobs) == 0 {
					t.Fatalf("got plan %+v, want one workflow with jobs", plan)
				}
				return
			}
			var list ErrorList
			if !errors.As(err, &list) || len(list) != 1 {
				t.Fatalf("got %v, want one error containing %q", err, tt.want)
			}
			if !strings.Contains(list[0].Error(), tt.want) {
				t.Errorf("got %q, want it to contain %q", list[0].Error(), tt.want)
			}
		})
	}
}

// billionLaughs nests levels of aliases, each a list of ten of the one
// before: 10^levels nodes once expanded.
func billionLaughs(levels int) string {
	var b strings.Builder
	b.WriteString("on: {push: {}}\nx:\n  - &l0 [a, a, a, a, a, a, a, a, a, a]\n")
	for i := 1; i <= levels; i++ {
		p := fmt.Sprintf("*l%d", i-1)
		fmt.Fprintf(&b, "  - &l%d [%s]\n", i, strings.Repeat(p+", ", 9)+p)
	}
	b.WriteString("jobs: {a: {steps: [{run: x}]}}\n")
	return b.String()
}

func TestCheckJobCount(t *testing.T) {
	t.Parallel()
	wf := &Workflow{Name: "big", Jobs: make([]Job, 7)}
	if err := CheckJobCount(wf, 7); err != nil {
		t.Errorf("7 jobs, limit 7: got %v, want nil", err)
	}
	err := CheckJobCount(wf, 6)
	if want := `workflow "big" has 7 jobs, over the limit of 6 jobs per run`; err == nil || err.Error() != want {
		t.Errorf("7 jobs, limit 6: got %v, want %q", err, want)
	}
}

func TestTooManyWorkflowFiles(t *testing.T) {
	t.Parallel()
	wf := []byte("on: {push: {}}\njobs: {a: {steps: [{run: x}]}}\n")
	dir := t.TempDir()
	wdir := filepath.Join(dir, filepath.FromSlash(WorkflowsDir))
	if err := os.MkdirAll(wdir, 0o755); err != nil {
		t.Fatal(err)
	}
	var files []File
	for i := range MaxFiles + 1 {
		base := fmt.Sprintf("w%03d.yml", i)
		files = append(files, File{Path: WorkflowsDir + "/" + base, Data: wf})
		if err := os.WriteFile(filepath.Join(wdir, base), wf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Compile(files[:MaxFiles]); err != nil {
		t.Fatalf("%d files: got %v, want a plan", MaxFiles, err)
	}
	if _, err := Compile(files); !errors.Is(err, ErrTooManyFiles) {
		t.Errorf("Compile of %d files: got %v, want ErrTooManyFiles", len(files), err)
	}
	_, err := CompileDir(dir)
	if !errors.Is(err, ErrTooManyFiles) {
		t.Fatalf("CompileDir of %d files: got %v, want ErrTooManyFiles", len(files), err)
	}
	if want := fmt.Sprintf("%s: %d files: more than %d workflow files in %s", wdir, MaxFiles+1, MaxFiles, WorkflowsDir); err.Error() != want {
		t.Errorf("got %q, want %q", err.Error(), want)
	}
}

func TestCompileDirRefusesLargeFileUnread(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wdir := filepath.Join(dir, filepath.FromSlash(WorkflowsDir))
	if err := os.MkdirAll(wdir, 0o755); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(wdir, "big.yml")
	f, err := os.Create(full)
	if err != nil {
		t.Fatal(err)
	}
	// A sparse file: its size is over the limit without writing it.
	if err := f.Truncate(maxFileBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = CompileDir(dir)
	if want := fmt.Sprintf("%s: file is %d bytes, over the limit of %d", full, maxFileBytes+1, maxFileBytes); err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

// BenchmarkAliasBomb measures refusing the report's bomb.
func BenchmarkAliasBomb(b *testing.B) {
	files := []File{{Path: ".kici/workflows/bomb.yml", Data: aliasBomb(2000, 5000)}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(files); err == nil {
			b.Fatal("bomb compiled")
		}
	}
}
