package admincli

import "testing"

func TestAgentsDrain(t *testing.T) {
	t.Parallel()
	auditor := map[string]string{envToken: fakeAuditorToken}
	runGolden(t, []goldenCase{
		{name: "agents-drain", args: []string{"agents", "drain", "agent-2"}, code: 0},
		{name: "agents-drain-json", args: []string{"agents", "drain", "agent-2", "-o", "json"}, code: 0},
		{name: "agents-drain-reason", args: []string{"agents", "drain", "agent-2", "--reason", "kernel upgrade on ci-2"}, code: 0},
		{name: "agents-drain-reason-json", args: []string{"agents", "drain", "agent-2", "--reason", "kernel upgrade on ci-2", "-o", "json"}, code: 0},
		{name: "agents-drain-not-connected", args: []string{"agents", "drain", "agent-5", "--reason", "rack move"}, code: 0},
		{name: "agents-drain-auditor", args: []string{"agents", "drain", "agent-2"}, env: auditor, code: 1},
		{name: "agents-drain-no-id", args: []string{"agents", "drain"}, code: 2},
		{name: "agents-drain-empty-id", args: []string{"agents", "drain", " "}, code: 2},
		{name: "agents-drain-help", args: []string{"agents", "drain", "--help"}, code: 0},
	})
}
