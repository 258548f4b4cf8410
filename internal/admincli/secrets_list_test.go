package admincli

import "testing"

func TestSecretsList(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "secrets-list", args: []string{"secrets", "list"}, code: 0},
		{name: "secrets-list-json", args: []string{"secrets", "list", "-o", "json"}, code: 0},
		{name: "secrets-list-empty", args: []string{"secrets", "list"}, empty: true, code: 0},
		{name: "secrets-list-wrong-token", args: []string{"secrets", "list"}, env: map[string]string{envToken: "nope"}, code: 1},
	})
}
