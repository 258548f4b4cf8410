package admincli

import "testing"

func TestAgentTokensCreate(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "agent-tokens-create", args: []string{"agent-tokens", "create", "--labels", "linux,docker"}, code: 0},
		{name: "agent-tokens-create-json", args: []string{"agent-tokens", "create", "--labels", "linux", "--labels", "gpu", "-o", "json"}, code: 0},
		{name: "agent-tokens-create-no-labels", args: []string{"agent-tokens", "create"}, code: 2},
		{name: "agent-tokens-create-empty-label", args: []string{"agent-tokens", "create", "--labels", "linux,,gpu"}, code: 2},
		{name: "agent-tokens-create-wrong-token", args: []string{"agent-tokens", "create", "--labels", "linux"}, env: map[string]string{envToken: "nope"}, code: 1},
	})
}
