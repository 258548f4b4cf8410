package admincli

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestScalerOrphansStop(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "scaler-orphans-stop", args: []string{"scaler", "orphans", "stop", "scaler-container-9f8e7d6c", "scaler-container-0b1c2d3e"}, code: 0},
		{name: "scaler-orphans-stop-json", args: []string{"scaler", "orphans", "stop", "scaler-container-9f8e7d6c", "-o", "json"}, code: 0},
		{name: "scaler-orphans-stop-no-id", args: []string{"scaler", "orphans", "stop"}, code: 2},
		{name: "scaler-orphans-stop-empty-id", args: []string{"scaler", "orphans", "stop", ""}, code: 2},
		{name: "scaler-orphans-stop-bad-id", args: []string{"scaler", "orphans", "stop", "scaler-container-9f8e7d6c", "../etc"}, code: 2},
		{name: "scaler-orphans-stop-tracked", args: []string{"scaler", "orphans", "stop", "scaler-container-9f8e7d6c", "scaler-container-1a2b3c4d"}, code: 1},
		{name: "scaler-orphans-stop-partly", args: []string{"scaler", "orphans", "stop", "scaler-container-9f8e7d6c", "scaler-firecracker-5e6f7a8b", "scaler-container-gone", "scaler-container-stuck"}, code: 1},
		{name: "scaler-orphans-stop-partly-json", args: []string{"scaler", "orphans", "stop", "scaler-container-9f8e7d6c", "scaler-container-gone", "-o", "json"}, code: 1},
		{name: "scaler-orphans-stop-not-configured", args: []string{"scaler", "orphans", "stop", "scaler-container-9f8e7d6c"}, env: map[string]string{envURL: "{url}" + fakeNoScaler}, code: 1},
		{name: "scaler-orphans-stop-wrong-token", args: []string{"scaler", "orphans", "stop", "scaler-container-9f8e7d6c"}, env: map[string]string{envToken: "nope"}, code: 1},
		{name: "scaler-orphans-stop-node", args: []string{"scaler", "orphans", "stop", "--node", "ci-2", "scaler-container-7e6d5c4b"}, code: 0},
		{name: "scaler-orphans-stop-node-json", args: []string{"scaler", "orphans", "stop", "--node", "ci-2", "scaler-container-7e6d5c4b", "-o", "json"}, code: 0},
		{name: "scaler-orphans-stop-node-tracked", args: []string{"scaler", "orphans", "stop", "--node", "ci-2", "scaler-container-7e6d5c4b", "scaler-container-3a4b5c6d"}, code: 1},
		{name: "scaler-orphans-stop-node-failed", args: []string{"scaler", "orphans", "stop", "--node", "ci-4", "scaler-container-7e6d5c4b"}, code: 1},
		{name: "scaler-orphans-stop-node-failed-json", args: []string{"scaler", "orphans", "stop", "--node", "ci-4", "scaler-container-7e6d5c4b", "-o", "json"}, code: 1},
		{name: "scaler-orphans-stop-node-all", args: []string{"scaler", "orphans", "stop", "--node", "all", "scaler-container-7e6d5c4b"}, code: 2},
		{name: "scaler-orphans-stop-node-unknown", args: []string{"scaler", "orphans", "stop", "--node", "ci-9", "scaler-container-7e6d5c4b"}, code: 1},
		{name: "scaler-orphans-stop-node-standalone", args: []string{"scaler", "orphans", "stop", "--node", "ci-2", "scaler-container-7e6d5c4b"}, env: map[string]string{envURL: "{url}" + fakeNoScaler}, code: 1},
		{name: "scaler-orphans-stop-unreachable", args: []string{"scaler", "orphans", "stop", "scaler-container-9f8e7d6c"}, env: map[string]string{envURL: "{dead}"}, code: 1},
	})
}

// TestScalerRequests checks what the scaler commands send: reload has no
// body, and stop sends each named id once.
func TestScalerRequests(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want []fakeRequest
	}{
		{
			name: "status",
			args: []string{"scaler", "status"},
			want: []fakeRequest{{Method: "GET", Path: "/api/v1/scalers"}},
		},
		{
			name: "reload",
			args: []string{"scaler", "reload"},
			want: []fakeRequest{{Method: "POST", Path: "/api/v1/scalers/reload"}},
		},
		{
			name: "orphans list",
			args: []string{"scaler", "orphans", "list"},
			want: []fakeRequest{{Method: "GET", Path: "/api/v1/scalers/orphans"}},
		},
		{
			name: "orphans stop sends each id once, in order",
			args: []string{"scaler", "orphans", "stop", "scaler-container-9f8e7d6c", "scaler-container-0b1c2d3e", "scaler-container-9f8e7d6c"},
			want: []fakeRequest{{Method: "POST", Path: "/api/v1/scalers/orphans/stop", Body: map[string]any{
				"ids": []any{"scaler-container-9f8e7d6c", "scaler-container-0b1c2d3e"},
			}}},
		},
		{
			name: "orphans list on a node",
			args: []string{"scaler", "orphans", "list", "--node", "ci-2"},
			want: []fakeRequest{{Method: "GET", Path: "/api/v1/scalers/orphans", Query: "node=ci-2"}},
		},
		{
			name: "orphans list on every node",
			args: []string{"scaler", "orphans", "list", "--node", "all"},
			want: []fakeRequest{{Method: "GET", Path: "/api/v1/scalers/orphans", Query: "node=all"}},
		},
		{
			name: "orphans list with a bad node sends nothing",
			args: []string{"scaler", "orphans", "list", "--node", "ci 2"},
		},
		{
			name: "orphans stop on a node sends it with the ids",
			args: []string{"scaler", "orphans", "stop", "--node", "ci-2", "scaler-container-7e6d5c4b", "scaler-container-7e6d5c4b"},
			want: []fakeRequest{{Method: "POST", Path: "/api/v1/scalers/orphans/stop", Body: map[string]any{
				"ids": []any{"scaler-container-7e6d5c4b"}, "node": "ci-2",
			}}},
		},
		{
			name: "orphans stop on every node sends nothing",
			args: []string{"scaler", "orphans", "stop", "--node", "all", "scaler-container-7e6d5c4b"},
		},
		{
			name: "orphans stop without an id sends nothing",
			args: []string{"scaler", "orphans", "stop"},
		},
		{
			name: "orphans stop with a bad id sends nothing",
			args: []string{"scaler", "orphans", "stop", "scaler-container-9f8e7d6c", ".."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := newFakeAPI(t, false)
			_, stderr, _ := runCLI(t.Context(), tt.args, map[string]string{envURL: fake.URL(), envToken: fakeToken})
			t.Logf("stderr: %s", stderr)
			if diff := cmp.Diff(tt.want, fake.received()); diff != "" {
				t.Errorf("requests differ (-want +got):\n%s", diff)
			}
		})
	}
}
