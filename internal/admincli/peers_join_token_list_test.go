package admincli

import "testing"

func TestPeersJoinTokenList(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "peers-join-token-list", args: []string{"peers", "join-token", "list"}, code: 0},
		{name: "peers-join-token-list-json", args: []string{"peers", "join-tokens", "ls", "-o", "json"}, code: 0},
		{name: "peers-join-token-list-empty", args: []string{"peers", "join-token", "list"}, empty: true, code: 0},
		{name: "peers-join-token-list-auditor", args: []string{"peers", "join-token", "list"}, env: map[string]string{envToken: fakeAuditorToken}, code: 1},
	})
}
