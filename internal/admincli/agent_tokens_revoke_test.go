package admincli

import "testing"

func TestAgentTokensRevoke(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "agent-tokens-revoke", args: []string{"agent-tokens", "revoke", "at-7"}, code: 0},
		{name: "agent-tokens-revoke-json", args: []string{"agent-tokens", "revoke", "at-7", "-o", "json"}, code: 0},
		{name: "agent-tokens-revoke-unknown", args: []string{"agent-tokens", "revoke", "at-1"}, code: 1},
		{name: "agent-tokens-revoke-two-ids", args: []string{"agent-tokens", "revoke", "at-7", "at-8"}, code: 2},
	})
}
