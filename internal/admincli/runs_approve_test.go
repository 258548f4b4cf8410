package admincli

import "testing"

func TestRunsApprove(t *testing.T) {
	t.Parallel()
	auditor := map[string]string{envToken: fakeAuditorToken}
	runGolden(t, []goldenCase{
		{name: "runs-approve", args: []string{"runs", "approve", "r-450"}, code: 0},
		{name: "runs-approve-json", args: []string{"runs", "approve", "r-450", "-o", "json"}, code: 0},
		{name: "runs-approve-not-awaiting", args: []string{"runs", "approve", "r-101"}, code: 1},
		{name: "runs-approve-unknown", args: []string{"runs", "approve", "r-404"}, code: 1},
		{name: "runs-approve-auditor", args: []string{"runs", "approve", "r-450"}, env: auditor, code: 1},
		{name: "runs-approve-no-id", args: []string{"runs", "approve"}, code: 2},
	})
}
