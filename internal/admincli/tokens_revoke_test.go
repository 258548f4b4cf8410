package admincli

import "testing"

func TestTokensRevoke(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "tokens-revoke", args: []string{"tokens", "revoke", "tok-2"}, code: 0},
		{name: "tokens-revoke-unknown", args: []string{"tokens", "revoke", "tok-9"}, code: 1},
		{name: "tokens-revoke-no-id", args: []string{"tokens", "revoke"}, code: 2},
	})
}
