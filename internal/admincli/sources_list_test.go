package admincli

import "testing"

func TestSourcesList(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "sources-list", args: []string{"sources", "list"}, code: 0},
		{name: "sources-list-json", args: []string{"sources", "list", "-o", "json"}, code: 0},
		{name: "sources-list-empty", args: []string{"sources", "list"}, empty: true, code: 0},
		{name: "sources-list-empty-json", args: []string{"sources", "list", "-o", "json"}, empty: true, code: 0},
		{name: "sources-list-bad-output", args: []string{"sources", "list", "-o", "yaml"}, code: 2},
		// The global flags and the environment.
		{name: "sources-list-wrong-token", args: []string{"sources", "list"}, env: map[string]string{envToken: "nope"}, code: 1},
		{name: "sources-list-no-token", args: []string{"sources", "list"}, env: map[string]string{envToken: ""}, code: 1},
		{name: "sources-list-token-flag", args: []string{"sources", "list", "--token", fakeToken}, env: map[string]string{envToken: "nope"}, code: 0},
		{name: "sources-list-unreachable", args: []string{"sources", "list"}, env: map[string]string{envURL: "{dead}"}, code: 1},
		{name: "sources-list-url-flag", args: []string{"--url", "{url}", "sources", "list"}, env: map[string]string{envURL: "{dead}"}, code: 0},
		{name: "sources-list-bad-url", args: []string{"sources", "list"}, env: map[string]string{envURL: "ftp://example.com"}, code: 2},
	})
}
