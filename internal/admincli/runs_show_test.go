package admincli

import "testing"

func TestRunsShow(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "runs-show", args: []string{"runs", "show", "r-102"}, code: 0},
		{name: "runs-show-running", args: []string{"runs", "show", "r-103"}, code: 0},
		{name: "runs-show-actor", args: []string{"runs", "show", "r-104"}, code: 0},
		{name: "runs-show-json", args: []string{"runs", "show", "r-102", "-o", "json"}, code: 0},
		{name: "runs-show-unknown", args: []string{"runs", "show", "r-404"}, code: 1},
		{name: "runs-show-no-id", args: []string{"runs", "show"}, code: 2},
	})
}
