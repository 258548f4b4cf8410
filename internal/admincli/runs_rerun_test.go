package admincli

import "testing"

func TestRunsRerun(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "runs-rerun", args: []string{"runs", "rerun", "r-102"}, code: 0},
		{name: "runs-rerun-json", args: []string{"runs", "rerun", "r-102", "-o", "json"}, code: 0},
		{name: "runs-rerun-failed", args: []string{"runs", "rerun", "r-102", "--failed"}, code: 0},
		{name: "runs-rerun-failed-json", args: []string{"runs", "rerun", "r-102", "--failed", "-o", "json"}, code: 0},
		{name: "runs-rerun-failed-running", args: []string{"runs", "rerun", "r-103", "--failed"}, code: 1},
		{name: "runs-rerun-unknown", args: []string{"runs", "rerun", "r-404"}, code: 1},
		{name: "runs-rerun-two-ids", args: []string{"runs", "rerun", "r-1", "r-2"}, code: 2},
	})
}
