package admincli

import "testing"

func TestAgentsUndrain(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "agents-undrain", args: []string{"agents", "undrain", "agent-1"}, code: 0},
		{name: "agents-undrain-not-connected", args: []string{"agents", "undrain", "agent-7"}, code: 0},
		{name: "agents-undrain-not-drained", args: []string{"agents", "undrain", "agent-2"}, code: 1},
		{name: "agents-undrain-auditor", args: []string{"agents", "undrain", "agent-1"}, env: map[string]string{envToken: fakeAuditorToken}, code: 1},
		{name: "agents-undrain-two-ids", args: []string{"agents", "undrain", "agent-1", "agent-7"}, code: 2},
		{name: "agents-undrain-help", args: []string{"agents", "undrain", "--help"}, code: 0},
	})
}
