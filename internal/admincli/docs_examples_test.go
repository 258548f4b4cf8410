package admincli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDocsExamplesMatchGolden: every example of `runs …`, `trigger …` and
// `schedules …` in docs/admin.md whose command line is also a golden
// case's shows what that case prints (stdout, then stderr), so that the
// docs show what the code does (step numbers from 0, errors, escaped
// control characters).
func TestDocsExamplesMatchGolden(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "admin.md"))
	if err != nil {
		t.Fatal(err)
	}
	golden := map[string][]string{} // command line: the outputs of its cases
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cmdLine, rest, _ := strings.Cut(string(b), "\n")
		_, rest, _ = strings.Cut(rest, "--- stdout\n")
		stdout, stderr, _ := strings.Cut(rest, "--- stderr\n")
		golden[cmdLine] = append(golden[cmdLine], stdout+stderr)
	}
	matched := 0
	for _, ex := range consoleExamples(string(doc)) {
		if !strings.HasPrefix(ex.cmd, "$ kici-admin runs ") && !strings.HasPrefix(ex.cmd, "$ kici-admin trigger ") &&
			!strings.HasPrefix(ex.cmd, "$ kici-admin schedules ") ||
			strings.Contains(ex.out, "  ...\n") { // an abbreviated answer
			continue
		}
		outs, ok := golden[ex.cmd]
		if !ok || slices.Contains(outs, ex.out) {
			matched += len(outs)
			continue
		}
		matched++
		// A command several cases run (against an empty or a dead
		// server) shows one of their outputs; report the closest.
		best := outs[0]
		for _, o := range outs {
			if len(cmp.Diff(o, ex.out)) < len(cmp.Diff(best, ex.out)) {
				best = o
			}
		}
		t.Errorf("docs/admin.md shows for %q (-golden +docs):\n%s", ex.cmd, cmp.Diff(best, ex.out))
	}
	if matched < 10 {
		t.Errorf("got %d examples that are golden cases too, want at least 10 (did the format change?)", matched)
	}
}

// example is one command of a console block and what it printed.
type example struct{ cmd, out string }

// consoleExamples returns the commands of the ```console blocks of doc:
// each "$ " line and the lines up to the next one; "$ echo $?" and the
// status it prints are left out.
func consoleExamples(doc string) []example {
	var out []example
	in, skip := false, false
	for line := range strings.SplitSeq(doc, "\n") {
		switch {
		case strings.HasPrefix(line, "```console"):
			in = true
			continue
		case in && line == "```":
			in = false
			continue
		case !in:
			continue
		}
		switch {
		case line == "$ echo $?":
			skip = true
		case strings.HasPrefix(line, "$ "):
			skip = false
			out = append(out, example{cmd: line})
		case skip:
		case len(out) > 0:
			out[len(out)-1].out += line + "\n"
		}
	}
	return out
}
