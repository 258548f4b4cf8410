package workflow

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzCompile feeds arbitrary bytes to the compiler as a workflow file.
// Whatever the input, Compile must not panic; it returns either a plan that
// passes its own invariants and reads back as a lock file, or an ErrorList
// whose every entry names the file and a real position.
func FuzzCompile(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/*/.kici/workflows/*.y*ml")
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const name = ".kici/workflows/fuzz.yml"
		plan, err := Compile([]File{{Path: name, Data: data}})
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("got %v (%T), want a non-empty ErrorList", err, err)
			}
			for _, e := range list {
				if e.File != name || e.Line < 1 || e.Col < 1 || e.Msg == "" {
					t.Fatalf("badly positioned error %q", e.Error())
				}
			}
			return
		}
		if err := plan.Check(); err != nil {
			t.Fatalf("compiled plan fails its own check: %v", err)
		}
		out, err := plan.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseLock(out); err != nil {
			t.Fatalf("compiled plan does not read back: %v", err)
		}
	})
}
