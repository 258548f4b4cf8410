package admincli

import "testing"

func TestRunsList(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "runs-list", args: []string{"runs", "list"}, code: 0},
		{name: "runs-list-json", args: []string{"runs", "list", "-o", "json"}, code: 0},
		{name: "runs-list-filtered", args: []string{"runs", "list", "--status", "success", "--source", "hello", "--limit", "1"}, code: 0},
		{name: "runs-list-by-workflow-and-branch", args: []string{"runs", "list", "--workflow", "hello", "--branch", "main"}, code: 0},
		{name: "runs-list-empty", args: []string{"runs", "list"}, empty: true, code: 0},
		{name: "runs-list-bad-status", args: []string{"runs", "list", "--status", "done"}, code: 2},
		{name: "runs-list-bad-limit", args: []string{"runs", "list", "--limit", "-1"}, code: 2},
		{name: "runs-list-limit-not-number", args: []string{"runs", "list", "--limit", "ten"}, code: 2},
	})
}
