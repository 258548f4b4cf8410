package admincli

import "testing"

func TestAgentsList(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "agents-list", args: []string{"agents", "list"}, code: 0},
		{name: "agents-list-json", args: []string{"agents", "list", "-o", "json"}, code: 0},
		{name: "agents-list-empty", args: []string{"agents", "list"}, empty: true, code: 0},
		{name: "agents-list-empty-json", args: []string{"agents", "list", "-o", "json"}, empty: true, code: 0},
	})
}
