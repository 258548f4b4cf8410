package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// scalerYAML is a drop-in holding one bare-metal scaler labelled with its
// name.
func scalerYAML(name string) string {
	return "scalers:\n  - {name: " + name + ", type: bare-metal, maxAgents: 1, labelSets: [{labels: [" + name + "], binaryPath: /bin/agent}]}\n"
}

func names(f *File) []string {
	var out []string
	for _, s := range f.Scalers {
		out = append(out, s.Name)
	}
	return out
}

func TestParseMergesDropInsInTheOrderGiven(t *testing.T) {
	t.Parallel()
	main := "version: 1\n" + scalerYAML("main")
	f, err := Parse("scalers.yaml", []byte(main),
		NamedFile{Name: "scalers.d/b.yaml", Data: []byte(scalerYAML("bee"))},
		NamedFile{Name: "scalers.d/empty.yaml", Data: []byte("# nothing\n")},
		NamedFile{Name: "scalers.d/a.yaml", Data: []byte(scalerYAML("ay"))},
	)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"main", "bee", "ay"}, names(f)); diff != "" {
		t.Errorf("scaler order differs (-want +got):\n%s", diff)
	}
}

func TestLoadReadsDropInsInNameOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("scalers.yaml", "version: 1\nscalers: []\n")
	// Plain byte order: digits, then upper case, then lower case.
	write("scalers.d/b.yaml", scalerYAML("b"))
	write("scalers.d/a.yml", scalerYAML("a"))
	write("scalers.d/B.yaml", scalerYAML("upper-b"))
	write("scalers.d/10-x.yaml", scalerYAML("ten"))
	write("scalers.d/9-x.yaml", scalerYAML("nine"))
	write("scalers.d/.a.yaml", "not: read\n")
	write("scalers.d/c.yaml.bak", "not: read\n")
	write("scalers.d/d.json", "not: read\n")
	if err := os.Symlink(filepath.Join(dir, "scalers.d", "b.yaml"), filepath.Join(dir, "scalers.d", "z.yaml")); err != nil {
		t.Fatal(err)
	}
	f, err := Load(filepath.Join(dir, "scalers.yaml"))
	// z.yaml links to b.yaml, so scaler "b" is declared twice (and its
	// label set with it, which is not reported again).
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 || !strings.Contains(list[0].Msg, `scaler name "b" is already used`) {
		t.Fatalf("got %v, want one error about the symlinked duplicate", err)
	}
	for _, e := range list {
		if filepath.Base(e.File) != "z.yaml" {
			t.Errorf("got error in %s, want it in z.yaml: %v", e.File, e)
		}
	}
	if err := os.Remove(filepath.Join(dir, "scalers.d", "z.yaml")); err != nil {
		t.Fatal(err)
	}
	f, err = Load(filepath.Join(dir, "scalers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ten", "nine", "upper-b", "a", "b"}, names(f)); diff != "" {
		t.Errorf("scaler order differs (-want +got):\n%s", diff)
	}
}

func TestLoadFailures(t *testing.T) {
	t.Parallel()
	t.Run("missing main file", func(t *testing.T) {
		t.Parallel()
		_, err := Load(filepath.Join(t.TempDir(), "scalers.yaml"))
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("got %v, want fs.ErrNotExist", err)
		}
	})
	t.Run("scalers.d is a file", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		for _, name := range []string{"scalers.yaml", "scalers.d"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("version: 1\nscalers: []\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := Load(filepath.Join(dir, "scalers.yaml"))
		var list ErrorList
		if err == nil || errors.As(err, &list) || !strings.Contains(err.Error(), "drop-in directory") {
			t.Fatalf("got %v, want a read error naming the drop-in directory", err)
		}
	})
}

func TestErrorsFollowTheMergeOrder(t *testing.T) {
	t.Parallel()
	// The main file's problems come first even though "a.yaml" sorts
	// before "z-main.yaml", and all of them are reported.
	_, err := Parse("z-main.yaml", []byte("version: 1\nscalers: []\nbogus: 1\nglobalMaxAgents: -1\n"),
		NamedFile{Name: "a.yaml", Data: []byte("version: 1\n")},
		NamedFile{Name: "0.yaml", Data: []byte("scalers: 3\n")},
	)
	want := strings.Join([]string{
		`z-main.yaml:3:1: bogus: unknown key (known keys: version, globalMaxAgents, defaults, scalers, firecracker)`,
		`z-main.yaml:4:18: globalMaxAgents: must be a positive number (at most 100000), got -1`,
		`a.yaml:1:1: version: only allowed in the main file: a drop-in file contributes its "scalers" list and nothing else`,
		`0.yaml:1:10: scalers: expected a list, got a number`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}

func TestOverlap(t *testing.T) {
	t.Parallel()
	const head = "version: 1\nscalers:\n"
	tests := []struct {
		name    string
		main    string
		dropIn  string
		wantErr string // "" for a valid configuration
	}{
		{
			name: "same set in one scaler is allowed",
			main: head + `  - {name: a, type: bare-metal, maxAgents: 1, labelSets: [{labels: [x, y], binaryPath: /a}, {labels: [Y, x], binaryPath: /b}]}`,
		},
		{
			name: "subset on another scaler is allowed",
			main: head + `  - {name: a, type: bare-metal, maxAgents: 1, labelSets: [{labels: [x, y], binaryPath: /a}]}` + "\n" +
				`  - {name: b, type: bare-metal, maxAgents: 1, labelSets: [{labels: [x], binaryPath: /a}]}`,
		},
		{
			name: "same set after normalisation on another scaler",
			main: head + `  - {name: a, type: bare-metal, maxAgents: 1, labelSets: [{labels: [x, y], binaryPath: /a}]}` + "\n" +
				`  - {name: b, type: container, maxAgents: 1, labelSets: [{labels: [Y, X, x], image: alpine}]}`,
			wantErr: `scalers.yaml:4:67: scalers[1].labelSets[0].labels: label set "x,y" is also declared by scaler "a" (at scalers.yaml:3:68): two scalers may not declare the same label set`,
		},
		{
			name:    "across a drop-in",
			main:    head + `  - {name: a, type: bare-metal, maxAgents: 1, labelSets: [{labels: [x], binaryPath: /a}]}`,
			dropIn:  "scalers:\n" + `  - {name: b, type: bare-metal, maxAgents: 1, labelSets: [{labels: [X], binaryPath: /a}]}`,
			wantErr: `d.yaml:2:68: scalers[0].labelSets[0].labels: label set "x" is also declared by scaler "a" (at scalers.yaml:3:68): two scalers may not declare the same label set`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var dropIns []NamedFile
			if tt.dropIn != "" {
				dropIns = append(dropIns, NamedFile{Name: "d.yaml", Data: []byte(tt.dropIn)})
			}
			_, err := Parse("scalers.yaml", []byte(tt.main), dropIns...)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Errorf("got %v, want %s", err, tt.wantErr)
			}
		})
	}
}

func TestFileDefaults(t *testing.T) {
	t.Parallel()
	f := mustParse(t, `version: 1
scalers:
  - name: c
    type: container
    maxAgents: 3
    warmPool: {}
    labelSets: [{labels: [c], image: alpine}]
`)
	want := &File{
		GlobalMaxAgents: 50,
		Scalers: []Scaler{{
			Name: "c", Type: "container", MaxAgents: 3, MaxConcurrentSpawns: 8, FailJobsAfter: 3,
			LabelSets: []LabelSet{{Labels: []string{"c"}, Image: "alpine", ImagePullPolicy: "IfNotPresent"}},
			WarmPool:  WarmPool{IdleTimeout: 300 * time.Second},
			Container: Container{Runtime: "auto"},
		}},
		Firecracker: defaultFirecrackerNetwork(),
	}
	if diff := cmp.Diff(want, f); diff != "" {
		t.Errorf("file differs (-want +got):\n%s", diff)
	}
}

func TestManagerConfigSharesNoMemory(t *testing.T) {
	t.Parallel()
	f := mustParse(t, `version: 1
scalers:
  - {name: a, type: bare-metal, maxAgents: 1, mandatoryLabels: [x], labelSets: [{labels: [x], binaryPath: /a, env: {K: v}}]}
`)
	cfg := f.ManagerConfig()
	cfg.Scalers[0].MandatoryLabels[0] = "changed"
	cfg.Scalers[0].LabelSets[0].Labels[0] = "changed"
	cfg.Scalers[0].LabelSets[0].Env["K"] = "changed"
	if diff := cmp.Diff(mustParse(t, `version: 1
scalers:
  - {name: a, type: bare-metal, maxAgents: 1, mandatoryLabels: [x], labelSets: [{labels: [x], binaryPath: /a, env: {K: v}}]}
`), f); diff != "" {
		t.Errorf("changing the manager config changed the file (-want +got):\n%s", diff)
	}
}

func TestAliasExpansionIsBounded(t *testing.T) {
	t.Parallel()
	// Each level holds ten aliases of the one before: 10^9 nodes once
	// expanded, from a file of a few hundred bytes.
	var b strings.Builder
	b.WriteString("version: 1\nl0: &l0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= 9; i++ {
		p := "*l" + string(rune('0'+i-1))
		b.WriteString("l" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " [")
		b.WriteString(strings.TrimSuffix(strings.Repeat(p+", ", 10), ", "))
		b.WriteString("]\n")
	}
	b.WriteString("scalers: []\n")
	start := time.Now()
	_, err := Parse("scalers.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "aliases expand the document") {
		t.Fatalf("got %v, want the alias bound", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("rejecting the file took %s", took)
	}
}

func TestErrorWithoutPath(t *testing.T) {
	t.Parallel()
	e := &Error{File: "scalers.yaml", Line: 1, Col: 1, Msg: "file is empty"}
	if got, want := e.Error(), "scalers.yaml:1:1: file is empty"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
