package admincli

import "testing"

func TestSecretsDelete(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "secrets-delete", args: []string{"secrets", "delete", "DEPLOY_TOKEN"}, code: 0},
		{name: "secrets-delete-source", args: []string{"secrets", "delete", "NPM_TOKEN", "--source", "web"}, code: 0},
		{name: "secrets-delete-unknown", args: []string{"secrets", "delete", "NPM_TOKEN"}, code: 1},
	})
}
