package config

import (
	"time"

	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/scaler"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/invalid")

const (
	gib = int64(1) << 30
	mib = int64(1) << 20
)

// validWant is the manager configuration each testdata/valid/<case>
// converts to. Every case directory must have an entry, and every entry a
// directory.
var validWant = map[string]scaler.Config{
	"minimal": {GlobalMaxAgents: 50},
	"bare-metal": {GlobalMaxAgents: 20, Scalers: []scaler.ScalerConfig{{
		Name: "build-hosts", Type: "bare-metal", MaxAgents: 4, MaxConcurrentSpawns: 2, FailJobsAfter: 3,
		OrchestratorURL: "ws://10.0.0.1:4000/ws",
		MandatoryLabels: []string{"trusted"},
		WarmPool:        scaler.WarmPool{Size: 1, IdleTimeout: 10 * time.Minute},
		ResourceCap:     scaler.Spec{CPUs: 16, MemoryBytes: 32 << 30},
		LabelSets: []scaler.LabelSet{
			{
				Labels:     []string{"linux", "trusted", "x64"},
				BinaryPath: "/usr/local/bin/kici-agent",
				Env:        map[string]string{"GOFLAGS": "-mod=mod", "RETRIES": "3", "VERBOSE": "true"},
				Requests:   scaler.Spec{CPUs: 2, MemoryBytes: 4 * gib},
				Limits:     scaler.Spec{CPUs: 2, MemoryBytes: 4 * gib},
			},
			{Labels: []string{"arm64", "trusted"}, BinaryPath: "/opt/kici/kici-agent"},
		},
	}}},
	"container": {GlobalMaxAgents: 50, Scalers: []scaler.ScalerConfig{
		{
			Name: "docker-pool", Type: "container", MaxAgents: 10, MaxConcurrentSpawns: 8, FailJobsAfter: 3,
			OrchestratorURL: "wss://ci.example.com/ws",
			LabelSets: []scaler.LabelSet{
				{
					Labels: []string{"docker", "linux"}, Image: "ghcr.io/kici-dev/agent:1.4", PullPolicy: "IfNotPresent",
					Volumes:  []string{"/var/cache/go:/root/go/pkg/mod", "/etc/ssl/certs:/etc/ssl/certs:ro"},
					Requests: scaler.Spec{CPUs: 1, MemoryBytes: 1 * gib},
					Limits:   scaler.Spec{CPUs: 2, MemoryBytes: 2 * gib},
				},
				{
					// Only limits: mirrored to requests, so defaults fill nothing.
					Labels: []string{"big", "docker", "linux"}, Image: "ghcr.io/kici-dev/agent:1.4", PullPolicy: "Always",
					Requests: scaler.Spec{CPUs: 8, MemoryBytes: 16 * gib},
					Limits:   scaler.Spec{CPUs: 8, MemoryBytes: 16 * gib},
				},
			},
		},
		{
			Name: "remote", Type: "container", MaxAgents: 2, MaxConcurrentSpawns: 8, FailJobsAfter: 3,
			LabelSets: []scaler.LabelSet{{
				Labels: []string{"remote-docker"}, Image: "kici-agent:dev", PullPolicy: "Never",
				Requests: scaler.Spec{CPUs: 1, MemoryBytes: 1 * gib},
				Limits:   scaler.Spec{CPUs: 2, MemoryBytes: 2 * gib},
			}},
		},
	}},
	"drop-ins": {GlobalMaxAgents: 50, Scalers: []scaler.ScalerConfig{
		bareMetal("main"), bareMetal("first"), bareMetal("second"),
	}},
	"resources": {GlobalMaxAgents: 50, Scalers: []scaler.ScalerConfig{{
		Name: "shapes", Type: "bare-metal", MaxAgents: 8, MaxConcurrentSpawns: 8, FailJobsAfter: 3,
		LabelSets: []scaler.LabelSet{
			shaped("plain", scaler.Spec{CPUs: 2, MemoryBytes: 2 * gib}, scaler.Spec{CPUs: 2, MemoryBytes: 2 * gib}),
			shaped("flat", scaler.Spec{CPUs: 0.5, MemoryBytes: 1536 * mib}, scaler.Spec{CPUs: 0.5, MemoryBytes: 1536 * mib}),
			shaped("requests-only", scaler.Spec{CPUs: 2, MemoryBytes: 512 * mib}, scaler.Spec{CPUs: 2, MemoryBytes: 512 * mib}),
			shaped("split", scaler.Spec{CPUs: 1, MemoryBytes: 2 * gib}, scaler.Spec{CPUs: 1.5, MemoryBytes: 2 * gib}),
			shaped("odd", scaler.Spec{CPUs: 2, MemoryBytes: 102}, scaler.Spec{CPUs: 2, MemoryBytes: 102}),
			withEnv(shaped("anchored", scaler.Spec{CPUs: 2, MemoryBytes: 2 * gib}, scaler.Spec{CPUs: 2, MemoryBytes: 2 * gib})),
			withEnv(shaped("anchored-too", scaler.Spec{CPUs: 2, MemoryBytes: 2 * gib}, scaler.Spec{CPUs: 2, MemoryBytes: 2 * gib})),
		},
	}}},
}

func bareMetal(name string) scaler.ScalerConfig {
	return scaler.ScalerConfig{
		Name: name, Type: "bare-metal", MaxAgents: 1, MaxConcurrentSpawns: 8, FailJobsAfter: 3,
		LabelSets: []scaler.LabelSet{{Labels: []string{name}, BinaryPath: "/usr/bin/kici-agent"}},
	}
}

func shaped(label string, req, lim scaler.Spec) scaler.LabelSet {
	return scaler.LabelSet{Labels: []string{label}, BinaryPath: "/usr/local/bin/kici-agent", Requests: req, Limits: lim}
}

func withEnv(ls scaler.LabelSet) scaler.LabelSet {
	ls.Env = map[string]string{"A": "1"}
	return ls
}

// TestGoldenValid loads each testdata/valid/<case>/scalers.yaml with its
// drop-ins and compares the manager configuration with validWant.
func TestGoldenValid(t *testing.T) {
	t.Parallel()
	dirs, err := filepath.Glob("testdata/valid/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no valid cases: %v", err)
	}
	seen := map[string]bool{}
	for _, dir := range dirs {
		name := filepath.Base(dir)
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want, ok := validWant[name]
			if !ok {
				t.Fatalf("no entry in validWant for testdata/valid/%s", name)
			}
			f, err := Load(filepath.Join(dir, "scalers.yaml"))
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if diff := cmp.Diff(want, f.ManagerConfig()); diff != "" {
				t.Errorf("manager config differs (-want +got):\n%s", diff)
			}
			// A file compared with itself plans no change.
			if p := Plan(f, f); len(p.Added)+len(p.Removed)+len(p.Updated)+len(p.TypeChanged) != 0 || p.GlobalChanged {
				t.Errorf("Plan(f, f) = %+v, want every scaler unchanged", p)
			}
		})
	}
	for name := range validWant {
		if !seen[name] {
			t.Errorf("validWant has %q but testdata/valid/%s does not exist", name, name)
		}
	}
}

// TestGoldenInvalid loads each testdata/invalid/<case>/scalers.yaml and
// compares the whole error list, with positions relative to the case
// directory, with <case>/errors.golden.
func TestGoldenInvalid(t *testing.T) {
	t.Parallel()
	dirs, err := filepath.Glob("testdata/invalid/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no invalid cases: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			f, err := Load(filepath.Join(dir, "scalers.yaml"))
			if f != nil {
				t.Fatalf("got a file for an invalid configuration, want none")
			}
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("got error %v (%T), want a non-empty ErrorList", err, err)
			}
			var b strings.Builder
			for _, e := range list {
				if e.Line < 1 || e.Col < 1 || e.Msg == "" {
					t.Errorf("error without a usable position: %q", e.Error())
				}
				rel, _ := filepath.Rel(dir, e.File)
				c := *e
				c.File = filepath.ToSlash(rel)
				b.WriteString(c.Error() + "\n")
			}
			compareGolden(t, filepath.Join(dir, "errors.golden"), b.String())
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
