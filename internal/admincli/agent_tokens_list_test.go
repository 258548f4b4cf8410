package admincli

import "testing"

func TestAgentTokensList(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "agent-tokens-list", args: []string{"agent-tokens", "list"}, code: 0},
		{name: "agent-tokens-list-json", args: []string{"agent-tokens", "list", "-o", "json"}, code: 0},
		{name: "agent-tokens-list-empty", args: []string{"agent-tokens", "list"}, empty: true, code: 0},
	})
}
