package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/scaler"
)

// FuzzLoadBytes feeds arbitrary bytes to Parse as a main file and one
// drop-in. Whatever the input, Parse must not panic; it returns either an
// ErrorList whose every entry names one of the two files and a real
// position, or a file that keeps every promise the package documents.
func FuzzLoadBytes(f *testing.F) {
	mains, _ := filepath.Glob("testdata/*/*/scalers.yaml")
	for _, m := range mains {
		data, err := os.ReadFile(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, []byte{})
		drops, _ := filepath.Glob(filepath.Join(filepath.Dir(m), "scalers.d", "*.y*ml"))
		for _, d := range drops {
			drop, err := os.ReadFile(d)
			if err != nil {
				continue // the directory named sub.yaml
			}
			f.Add(data, drop)
		}
	}
	f.Fuzz(func(t *testing.T, main, drop []byte) {
		const mainName, dropName = "scalers.yaml", "scalers.d/fuzz.yaml"
		file, err := Parse(mainName, main, NamedFile{Name: dropName, Data: drop})
		if err != nil {
			var list ErrorList
			if file != nil || !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("got %v, %v (%T), want no file and a non-empty ErrorList", file, err, err)
			}
			for _, e := range list {
				if (e.File != mainName && e.File != dropName) || e.Line < 1 || e.Col < 1 || e.Msg == "" {
					t.Fatalf("badly positioned error %q", e.Error())
				}
			}
			return
		}
		checkInvariants(t, file)
		again, err := Parse(mainName, main, NamedFile{Name: dropName, Data: drop})
		if err != nil {
			t.Fatalf("second parse failed: %v", err)
		}
		if diff := cmp.Diff(file, again); diff != "" {
			t.Fatalf("parsing twice differs (-first +second):\n%s", diff)
		}
		if p := Plan(file, again); len(p.Unchanged) != len(file.Scalers) || p.GlobalChanged {
			t.Fatalf("Plan of a file with itself = %+v, want everything unchanged", p)
		}
	})
}

// checkInvariants fails t unless f keeps the promises of File's and
// ManagerConfig's documentation.
func checkInvariants(t *testing.T, f *File) {
	t.Helper()
	cfg := f.ManagerConfig()
	if cfg.GlobalMaxAgents < 1 {
		t.Fatalf("GlobalMaxAgents = %d", cfg.GlobalMaxAgents)
	}
	names := map[string]bool{}
	owner := map[string]string{}
	for i, sc := range cfg.Scalers {
		s := f.Scalers[i]
		if !nameRE.MatchString(sc.Name) || names[sc.Name] {
			t.Fatalf("bad or repeated name %q", sc.Name)
		}
		names[sc.Name] = true
		if sc.Type != TypeBareMetal && sc.Type != TypeContainer {
			t.Fatalf("scaler %q: type %q", sc.Name, sc.Type)
		}
		if sc.MaxAgents < 1 || sc.MaxConcurrentSpawns < 1 || len(sc.LabelSets) == 0 {
			t.Fatalf("scaler %q: %+v", sc.Name, sc)
		}
		if s.WarmPool.Size > s.MaxAgents || s.WarmPool.IdleTimeout <= 0 {
			t.Fatalf("scaler %q: warm pool %+v", sc.Name, s.WarmPool)
		}
		if s.Container.NetworkIsolation || (sc.Type == TypeBareMetal && !cmp.Equal(s.Container, Container{})) {
			t.Fatalf("scaler %q: container options %+v", sc.Name, s.Container)
		}
		checkLabels(t, sc.Name, sc.MandatoryLabels, false)
		for _, ls := range sc.LabelSets {
			checkLabels(t, sc.Name, ls.Labels, true)
			for _, m := range sc.MandatoryLabels {
				if !slices.Contains(ls.Labels, m) {
					t.Fatalf("scaler %q: label set %v lacks mandatory %q", sc.Name, ls.Labels, m)
				}
			}
			if o, ok := owner[ls.Key()]; ok && o != sc.Name {
				t.Fatalf("label set %q on scalers %q and %q", ls.Key(), o, sc.Name)
			}
			owner[ls.Key()] = sc.Name
			switch sc.Type {
			case TypeContainer:
				if ls.Image == "" || ls.BinaryPath != "" || ls.PullPolicy == "" {
					t.Fatalf("container label set %+v", ls)
				}
			case TypeBareMetal:
				if !filepath.IsAbs(ls.BinaryPath) || ls.Image != "" || ls.PullPolicy != "" || ls.Volumes != nil {
					t.Fatalf("bare-metal label set %+v", ls)
				}
			}
			checkSpec(t, ls.Requests)
			checkSpec(t, ls.Limits)
			if (Resources{Requests: ls.Requests, Limits: ls.Limits}).exceeds() != "" {
				t.Fatalf("scaler %q: requests %+v over limits %+v", sc.Name, ls.Requests, ls.Limits)
			}
		}
	}
}

func checkLabels(t *testing.T, name string, labels []string, atLeastOne bool) {
	t.Helper()
	if atLeastOne && len(labels) == 0 {
		t.Fatalf("scaler %q: a label set without labels", name)
	}
	if len(labels) > 0 && !slices.Equal(labels, scaler.NormalizeLabels(labels)) {
		t.Fatalf("scaler %q: labels %q are not normalised", name, labels)
	}
	for _, l := range labels {
		if checkLabel(l) != "" || strings.HasPrefix(l, "kici:") {
			t.Fatalf("scaler %q: bad label %q", name, l)
		}
	}
}

func checkSpec(t *testing.T, s scaler.Spec) {
	t.Helper()
	if !(s.CPUs >= 0 && s.CPUs <= maxCPUs) || s.MemoryBytes < 0 {
		t.Fatalf("bad spec %+v", s)
	}
}
