package admincli

import (
	"encoding/json"
	"testing"

	"github.com/kici-dev/kici/internal/cluster/pki"
)

func TestPeersJoinTokenCreate(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "peers-join-token-create", args: []string{"peers", "join-token", "create"}, code: 0},
		{name: "peers-join-token-create-json", args: []string{"peers", "join-token", "create", "--ttl", "1h", "-o", "json"}, code: 0},
		{name: "peers-join-token-create-too-long", args: []string{"peers", "join-token", "create", "--ttl", "31d"}, code: 1},
		{name: "peers-join-token-create-standalone", args: []string{"peers", "join-token", "create", "--ttl", "standalone"}, code: 1},
		{name: "peers-join-token-create-auditor", args: []string{"peers", "join-token", "create"}, env: map[string]string{envToken: fakeAuditorToken}, code: 1},
		{name: "peers-join-token-create-bad-output", args: []string{"peers", "join-token", "create", "-o", "yaml"}, code: 2},
	})
}

// TestPeersJoinTokenCreateJSON: -o json prints {"token": ...} as the
// contract says, the whole token a worker parses, and sends the ttl.
func TestPeersJoinTokenCreateJSON(t *testing.T) {
	t.Parallel()
	fake := newFakeAPI(t, false)
	stdout, stderr, code := runCLI(t.Context(), []string{"peers", "join-token", "create", "--ttl", "7d", "-o", "json"},
		map[string]string{envURL: fake.URL(), envToken: fakeToken})
	if code != 0 {
		t.Fatalf("exit status: got %d, want 0 (stderr %q)", code, stderr)
	}
	var out struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("stdout %q is not JSON: %v", stdout, err)
	}
	if _, err := pki.ParseJoinToken(out.Token); err != nil {
		t.Errorf("token %q does not parse: %v", out.Token, err)
	}
	reqs := fake.received()
	if len(reqs) != 1 || reqs[0].Method != "POST" || reqs[0].Path != "/api/v1/peers/join-tokens" {
		t.Fatalf("requests: got %+v, want one POST /api/v1/peers/join-tokens", reqs)
	}
	if body, ok := reqs[0].Body.(map[string]any); !ok || body["ttl"] != "7d" {
		t.Errorf("request body: got %#v, want ttl 7d", reqs[0].Body)
	}
}
