package admincli

import "testing"

func TestRunsLogs(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "runs-logs", args: []string{"runs", "logs", "r-102"}, code: 0},
		{name: "runs-logs-job", args: []string{"runs", "logs", "r-102", "--job", "test (shard=1)"}, code: 0},
		{name: "runs-logs-job-id-step", args: []string{"runs", "logs", "r-102", "--job", "j-2", "--step", "1"}, code: 0},
		{name: "runs-logs-controls-escaped", args: []string{"runs", "logs", "r-400"}, code: 0},
		{name: "runs-logs-controls-raw", args: []string{"runs", "logs", "r-400", "--job", "evil", "--raw"}, code: 0},
		{name: "runs-logs-unknown-job", args: []string{"runs", "logs", "r-102", "--job", "deploy"}, code: 1},
		{name: "runs-logs-follow", args: []string{"runs", "logs", "r-103", "-f"}, code: 0},
		{name: "runs-logs-no-jobs", args: []string{"runs", "logs", "r-101"}, code: 0},
		{name: "runs-logs-unknown-run", args: []string{"runs", "logs", "r-404"}, code: 1},
		{name: "runs-logs-step-without-job", args: []string{"runs", "logs", "r-102", "--step", "1"}, code: 2},
	})
}
