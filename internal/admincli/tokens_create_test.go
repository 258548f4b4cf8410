package admincli

import "testing"

func TestTokensCreate(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "tokens-create", args: []string{"tokens", "create", "--name", "alice laptop", "--role", "admin"}, code: 0},
		{name: "tokens-create-json", args: []string{"tokens", "create", "--name", "dashboards", "--role", "auditor", "--expires-in", "90d", "-o", "json"}, code: 0},
		{name: "tokens-create-no-role", args: []string{"tokens", "create", "--name", "x"}, code: 2},
		{name: "tokens-create-bad-role", args: []string{"tokens", "create", "--name", "x", "--role", "root"}, code: 2},
		{name: "tokens-create-no-name", args: []string{"tokens", "create", "--role", "owner"}, code: 2},
		{name: "tokens-create-bad-expiry", args: []string{"tokens", "create", "--name", "x", "--role", "owner", "--expires-in", "soon"}, code: 1},
		{name: "tokens-create-wrong-token", args: []string{"tokens", "create", "--name", "x", "--role", "owner"}, env: map[string]string{envToken: "nope"}, code: 1},
	})
}
