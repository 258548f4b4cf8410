package admincli

import (
	"strings"
	"testing"
)

func TestSecretsSet(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "secrets-set", args: []string{"secrets", "set", "DEPLOY_TOKEN"}, stdin: "s3cr3t-value\n", code: 0},
		{name: "secrets-set-source", args: []string{"secrets", "set", "NPM_TOKEN", "--source", "web"}, stdin: "npm-value", code: 0},
		{name: "secrets-set-unknown-source", args: []string{"secrets", "set", "NPM_TOKEN", "--source", "nope"}, stdin: "npm-value", code: 1},
		{name: "secrets-set-bad-name", args: []string{"secrets", "set", "deploy"}, stdin: "v", code: 1},
		{name: "secrets-set-no-value", args: []string{"secrets", "set", "DEPLOY_TOKEN"}, code: 2},
		{name: "secrets-set-too-big", args: []string{"secrets", "set", "BIG"}, stdin: strings.Repeat("x", maxSecretValue+1), code: 2},
		{name: "secrets-set-no-name", args: []string{"secrets", "set"}, stdin: "v", code: 2},
	})
}

// TestSecretsSetSendsTheValueOnlyInTheBody: the value goes in the JSON
// body, one trailing newline dropped, and never in the path or query.
func TestSecretsSetSendsTheValueOnlyInTheBody(t *testing.T) {
	t.Parallel()
	fake := newFakeAPI(t, false)
	stdout, stderr, code := runCLIInput(t.Context(), []string{"secrets", "set", "DEPLOY_TOKEN", "--source", "web"},
		map[string]string{envURL: fake.URL(), envToken: fakeToken}, "two\nlines\r\n")
	if code != 0 {
		t.Fatalf("exit status: got %d, want 0 (stderr %q)", code, stderr)
	}
	if strings.Contains(stdout+stderr, "two") {
		t.Errorf("output shows the value: %q %q", stdout, stderr)
	}
	got := fake.received()
	if len(got) != 1 || got[0].Path != "/api/v1/secrets/DEPLOY_TOKEN" || got[0].Query != "source=web" ||
		got[0].Body.(map[string]any)["value"] != "two\nlines" {
		t.Errorf("requests: got %+v, want one PUT with the value in the body", got)
	}
}
