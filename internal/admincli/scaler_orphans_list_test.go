package admincli

import "testing"

func TestScalerOrphansList(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "scaler-orphans-list", args: []string{"scaler", "orphans", "list"}, code: 0},
		{name: "scaler-orphans-list-json", args: []string{"scaler", "orphans", "list", "-o", "json"}, code: 0},
		{name: "scaler-orphans-list-empty", args: []string{"scaler", "orphans", "list"}, empty: true, code: 0},
		{name: "scaler-orphans-list-empty-json", args: []string{"scaler", "orphans", "ls", "-o", "json"}, empty: true, code: 0},
		{name: "scaler-orphans-list-partial", args: []string{"scaler", "orphans", "list"}, env: map[string]string{envURL: "{url}" + fakeFailing}, code: 1},
		{name: "scaler-orphans-list-partial-json", args: []string{"scaler", "orphans", "list", "-o", "json"}, env: map[string]string{envURL: "{url}" + fakeFailing}, code: 1},
		{name: "scaler-orphans-list-not-configured", args: []string{"scaler", "orphans", "list"}, env: map[string]string{envURL: "{url}" + fakeNoScaler}, code: 1},
		{name: "scaler-orphans-unknown-subcommand", args: []string{"scaler", "orphans", "lst"}, code: 2},
	})
}
