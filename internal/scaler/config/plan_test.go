package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// mustParse reads a main file given as YAML, failing the test on error.
func mustParse(t *testing.T, src string) *File {
	t.Helper()
	f, err := Parse("scalers.yaml", []byte(src))
	if err != nil {
		t.Fatalf("parse:\n%s\n%v", src, err)
	}
	return f
}

// planFile writes a file of bare-metal scalers, each a one-line YAML
// flow mapping of the keys that differ from the usual ones.
func planFile(global string, scalers ...string) string {
	var b strings.Builder
	b.WriteString("version: 1\n" + global + "\nscalers:\n")
	for _, s := range scalers {
		b.WriteString("  - " + s + "\n")
	}
	return b.String()
}

const (
	metalA      = `{name: a, type: bare-metal, maxAgents: 2, labelSets: [{labels: [a], binaryPath: /bin/agent}]}`
	metalA3     = `{name: a, type: bare-metal, maxAgents: 3, labelSets: [{labels: [a], binaryPath: /bin/agent}]}`
	containerA  = `{name: a, type: container, maxAgents: 2, labelSets: [{labels: [a], image: alpine}]}`
	metalB      = `{name: b, type: bare-metal, maxAgents: 1, labelSets: [{labels: [b], binaryPath: /bin/agent}]}`
	metalBSized = `{name: b, type: bare-metal, maxAgents: 1, labelSets: [{labels: [b], binaryPath: /bin/agent, resources: {cpus: 1, memory: 1g}}]}`
	metalC      = `{name: c, type: bare-metal, maxAgents: 1, labelSets: [{labels: [c], binaryPath: /bin/agent}]}`
	metalCTwo   = `{name: c, type: bare-metal, maxAgents: 1, labelSets: [{labels: [c], binaryPath: /bin/agent}, {labels: [c, big], binaryPath: /bin/agent}]}`
	metalCSwap  = `{name: c, type: bare-metal, maxAgents: 1, labelSets: [{labels: [c, big], binaryPath: /bin/agent}, {labels: [c], binaryPath: /bin/agent}]}`
	metalCWarm  = `{name: c, type: bare-metal, maxAgents: 1, warmPool: {enabled: true, size: 1}, labelSets: [{labels: [c], binaryPath: /bin/agent}]}`
	metalCURL   = `{name: c, type: bare-metal, maxAgents: 1, orchestratorUrl: "ws://h:4000/ws", labelSets: [{labels: [c], binaryPath: /bin/agent}]}`
	metalCEnv   = `{name: c, type: bare-metal, maxAgents: 1, labelSets: [{labels: [c], binaryPath: /bin/agent, env: {}}]}`
	defaults1   = "defaults: {resources: {cpus: 1}}"
	defaults2   = "defaults: {resources: {cpus: 2}}"
)

func TestPlan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		from, to string // "" is a nil *File
		want     ReloadPlan
		wantErr  string
	}{
		{
			name: "first load adds everything",
			to:   planFile("", metalA, metalB),
			want: ReloadPlan{Added: []string{"a", "b"}, GlobalChanged: true},
		},
		{
			name: "no file any more removes everything",
			from: planFile("", metalA, metalB),
			want: ReloadPlan{Removed: []string{"a", "b"}, GlobalChanged: true},
		},
		{
			name: "same file",
			from: planFile("", metalA, metalB),
			to:   planFile("", metalA, metalB),
			want: ReloadPlan{Unchanged: []string{"a", "b"}},
		},
		{
			name: "scaler order alone changes nothing",
			from: planFile("", metalA, metalB),
			to:   planFile("", metalB, metalA),
			want: ReloadPlan{Unchanged: []string{"b", "a"}},
		},
		{
			name: "added, removed, updated and unchanged together",
			from: planFile("", metalA, metalB),
			to:   planFile("", metalC, metalA3, metalB),
			want: ReloadPlan{Added: []string{"c"}, Updated: []string{"a"}, Unchanged: []string{"b"}},
		},
		{
			name: "removed keeps the old order",
			from: planFile("", metalC, metalA, metalB),
			to:   planFile(""),
			want: ReloadPlan{Removed: []string{"c", "a", "b"}},
		},
		{
			name: "a new label set updates",
			from: planFile("", metalC),
			to:   planFile("", metalCTwo),
			want: ReloadPlan{Updated: []string{"c"}},
		},
		{
			name: "label set order updates: the first matching set wins",
			from: planFile("", metalCTwo),
			to:   planFile("", metalCSwap),
			want: ReloadPlan{Updated: []string{"c"}},
		},
		{
			name: "warm pool updates",
			from: planFile("", metalC),
			to:   planFile("", metalCWarm),
			want: ReloadPlan{Updated: []string{"c"}},
		},
		{
			name: "orchestrator URL updates",
			from: planFile("", metalC),
			to:   planFile("", metalCURL),
			want: ReloadPlan{Updated: []string{"c"}},
		},
		{
			name: "an empty env is no env",
			from: planFile("", metalC),
			to:   planFile("", metalCEnv),
			want: ReloadPlan{Unchanged: []string{"c"}},
		},
		{
			name: "global limit changes",
			from: planFile("globalMaxAgents: 10", metalA),
			to:   planFile("globalMaxAgents: 20", metalA),
			want: ReloadPlan{Unchanged: []string{"a"}, GlobalChanged: true},
		},
		{
			name: "defaults update the scalers whose resolved resources change",
			from: planFile(defaults1, metalA, metalBSized),
			to:   planFile(defaults2, metalA, metalBSized),
			want: ReloadPlan{Updated: []string{"a"}, Unchanged: []string{"b"}, GlobalChanged: true},
		},
		{
			name:    "type change is refused",
			from:    planFile("", metalA, metalB),
			to:      planFile("", containerA, metalB),
			want:    ReloadPlan{Unchanged: []string{"b"}, TypeChanged: []*TypeChangeError{{Scaler: "a", From: "bare-metal", To: "container"}}},
			wantErr: `scaler "a" changes type from bare-metal to container; restart the orchestrator to apply`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var from, to *File
			if tt.from != "" {
				from = mustParse(t, tt.from)
			}
			if tt.to != "" {
				to = mustParse(t, tt.to)
			}
			got := Plan(from, to)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Plan differs (-want +got):\n%s", diff)
			}
			err := got.Err()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Err() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Errorf("Err() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
