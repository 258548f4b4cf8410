package trigger

import (
	"errors"
	"slices"
	"testing"

	"github.com/kici-dev/kici/internal/workflow"
)

// The seed corpora live in testdata/fuzz/<FuzzName>/: every fixture of
// testdata/github with its kind, plus small hand-written bodies. Keep any
// crasher the fuzzer finds there as a seed.

// fuzzPlan has a trigger of every type with every filter, so fuzzed events
// also exercise the matcher.
var fuzzPlan = &workflow.Plan{Workflows: []workflow.Workflow{{
	Name: "all",
	Triggers: []workflow.Trigger{
		{Type: workflow.TriggerPush, Branches: []string{"main", "release/**", "{a,b}*"}, BranchesIgnore: []string{"wip/*"},
			Paths: []string{"src/**", "!src/**/*_test.go", "[a-"}},
		{Type: workflow.TriggerTag, Tags: []string{"v*"}},
		{Type: workflow.TriggerPullRequest, Branches: []string{"main"}, Paths: []string{"!docs/**"}},
		{Type: workflow.TriggerManual, Inputs: []workflow.Input{
			{Name: "environment", Type: workflow.InputChoice, Options: []string{"prod"}},
			{Name: "debug", Type: workflow.InputBoolean},
			{Name: "replicas", Type: workflow.InputNumber},
		}},
		{Type: workflow.TriggerSchedule, Cron: "0 3 * * *"},
	},
}}}

// checkEvent asserts the invariants of a successfully normalised event.
func checkEvent(t *testing.T, ev Event, provider string) {
	t.Helper()
	if err := ev.Validate(); err != nil {
		t.Fatalf("got invalid event %+v: %v", ev, err)
	}
	if ev.Kind == KindSchedule {
		t.Fatalf("got kind %q from a delivery, want a delivery kind", ev.Kind)
	}
	if ev.Provider != provider {
		t.Fatalf("got provider %q, want %q", ev.Provider, provider)
	}
	if !slices.IsSorted(ev.ChangedFiles) {
		t.Fatalf("got unsorted changed files %q", ev.ChangedFiles)
	}
	if len(slices.Compact(slices.Clone(ev.ChangedFiles))) != len(ev.ChangedFiles) {
		t.Fatalf("got duplicate changed files %q", ev.ChangedFiles)
	}
	for _, d := range MatchAll(fuzzPlan, ev) {
		if d.Reason == "" {
			t.Fatalf("got decision without reason for %+v", ev)
		}
	}
}

// checkError asserts that a failure is reported usefully.
func checkError(t *testing.T, err error) {
	t.Helper()
	if err.Error() == "" {
		t.Fatal("got an error with empty text")
	}
	var ig *IgnoredError
	if errors.As(err, &ig) && ig.Reason == "" {
		t.Fatalf("got IgnoredError without reason: %+v", ig)
	}
}

func FuzzNormalizeGitHub(f *testing.F) {
	f.Fuzz(func(t *testing.T, kind string, body []byte) {
		ev, err := NormalizeGitHub(kind, body)
		if err != nil {
			checkError(t, err)
			return
		}
		checkEvent(t, ev, ProviderGitHub)
	})
}

func FuzzNormalizeGeneric(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := NormalizeGeneric(body)
		if err != nil {
			checkError(t, err)
			return
		}
		if ev.Kind != KindPush && ev.Kind != KindTag {
			t.Fatalf("got kind %q, want push or tag", ev.Kind)
		}
		checkEvent(t, ev, ProviderGeneric)
	})
}
