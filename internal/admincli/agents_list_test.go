package admincli

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/apiv1"
)

func TestAgentsList(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "agents-list", args: []string{"agents", "list"}, code: 0},
		{name: "agents-list-json", args: []string{"agents", "list", "-o", "json"}, code: 0},
		{name: "agents-list-empty", args: []string{"agents", "list"}, empty: true, code: 0},
		{name: "agents-list-empty-json", args: []string{"agents", "list", "-o", "json"}, empty: true, code: 0},
	})
}

// TestPrintAgents covers the drains the fake does not serve: drained
// agents with none connected, a draining agent whose drain is not in the
// list, and a reason that spans lines.
func TestPrintAgents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		al   apiv1.AgentList
		want string
	}{
		{
			name: "none connected, some drained",
			al: apiv1.AgentList{Drains: []apiv1.AgentDrain{
				{AgentID: "agent-7", Reason: "disk\nreplacement", DrainedAt: before(time.Hour)},
			}},
			want: "no agents connected\n\ndrained, not connected:\n  agent-7: disk replacement (drained 1h ago)\n",
		},
		{
			name: "draining without its drain",
			al: apiv1.AgentList{Agents: []apiv1.Agent{
				{ID: "agent-1", Labels: []string{"linux"}, Draining: true, ConnectedAt: before(time.Minute)},
			}},
			want: "ID       BACKEND  HOST  VERSION  LABELS  BUSY WITH  CONNECTED  DRAIN\n" +
				"agent-1  -        -     -        linux   idle       1m ago     drained\n",
		},
		{
			name: "nothing at all",
			want: "no agents connected\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			if err := printAgents(&b, fakeNow, tt.al); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("output differs (-want +got):\n%s", diff)
			}
		})
	}
}
