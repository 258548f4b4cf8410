package admincli

import "testing"

func TestRunsCancel(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "runs-cancel", args: []string{"runs", "cancel", "r-103"}, code: 0},
		{name: "runs-cancel-force-json", args: []string{"runs", "cancel", "r-103", "--force", "-o", "json"}, code: 0},
		{name: "runs-cancel-ended", args: []string{"runs", "cancel", "r-101"}, code: 1},
		{name: "runs-cancel-unknown", args: []string{"runs", "cancel", "r-404"}, code: 1},
	})
}
