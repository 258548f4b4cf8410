package admincli

import "testing"

func TestTokensList(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "tokens-list", args: []string{"tokens", "list"}, code: 0},
		{name: "tokens-list-json", args: []string{"tokens", "list", "-o", "json"}, code: 0},
		{name: "tokens-list-empty", args: []string{"tokens", "list"}, empty: true, code: 0},
		{name: "tokens-list-empty-json", args: []string{"tokens", "ls", "-o", "json"}, empty: true, code: 0},
	})
}
