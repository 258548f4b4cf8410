package trigger

import (
	"fmt"
	"testing"

	"github.com/kici-dev/kici/internal/workflow"
)

// benchPlan is a monorepo-like plan of n workflows, each with a push and a
// pull_request trigger filtered by branch and path. Workflow i builds
// service i, so most workflows scan every changed file and match none.
func benchPlan(n int) *workflow.Plan {
	plan := &workflow.Plan{SchemaVersion: workflow.SchemaVersion}
	for i := range n {
		paths := []string{fmt.Sprintf("services/svc%d/**", i), "libs/shared/**", "!**/*.md"}
		plan.Workflows = append(plan.Workflows, workflow.Workflow{
			Name: fmt.Sprintf("svc%d", i),
			File: fmt.Sprintf(".kici/workflows/svc%d.yml", i),
			Triggers: []workflow.Trigger{
				{Type: workflow.TriggerPullRequest, Branches: []string{"main"}, Paths: paths},
				{Type: workflow.TriggerPush, Branches: []string{"main", "release/**"}, BranchesIgnore: []string{"wip/**"}, Paths: paths},
			},
		})
	}
	return plan
}

// benchEvent is a push to main changing 20 files in three services and docs.
func benchEvent() Event {
	files := make([]string, 0, 20)
	for i := range 6 {
		files = append(files,
			fmt.Sprintf("services/svc%d/handler.go", 40+i),
			fmt.Sprintf("services/svc%d/README.md", 40+i),
			fmt.Sprintf("docs/svc%d.md", 40+i),
		)
	}
	files = append(files, "go.mod", "go.sum")
	return withFiles(PushEvent("main", shaA), sortedFiles(files)...)
}

func BenchmarkMatchAll100(b *testing.B) {
	const n = 100
	plan, ev := benchPlan(n), benchEvent()
	if got := len(ev.ChangedFiles); got != 20 {
		b.Fatalf("got %d changed files, want 20", got)
	}
	matched := 0
	for _, d := range MatchAll(plan, ev) {
		if d.Matched {
			matched++
		}
	}
	if matched != 6 {
		b.Fatalf("got %d matched workflows, want 6", matched)
	}
	b.ReportAllocs()
	for b.Loop() {
		MatchAll(plan, ev)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/workflow")
}
