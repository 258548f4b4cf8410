package admincli

import "testing"

func TestSourcesAdd(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "sources-add-local", args: []string{"sources", "add", "hello2", "--path", "/srv/kici/hello2"}, code: 0},
		{name: "sources-add-github-json", args: []string{"sources", "add", "app2", "--github", "kici-dev/app2", "--webhook-secret", "s3cret", "-o", "json"}, code: 0},
		{name: "sources-add-git", args: []string{"sources", "add", "lib", "--git-url", "https://git.example.com/lib.git"}, code: 0},
		{name: "sources-add-exists", args: []string{"sources", "add", "hello", "--path", "/srv/kici/hello"}, code: 1},
		{name: "sources-add-two-locations", args: []string{"sources", "add", "x", "--path", "/x", "--github", "a/b"}, code: 2},
		{name: "sources-add-bad-github", args: []string{"sources", "add", "x", "--github", "nope"}, code: 2},
		{name: "sources-add-no-name", args: []string{"sources", "add", "--path", "/x"}, code: 2},
		{name: "sources-add-fork-run-json", args: []string{"sources", "add", "oss", "--github", "kici-dev/oss", "--fork-pull-requests", "run", "-o", "json"}, code: 0},
		{name: "sources-add-git-github-repo", args: []string{"sources", "add", "mirror", "--git-url", "https://git.example.com/app.git", "--github-repo", "kici-dev/app"}, code: 0},
		{name: "sources-add-local-github-repo-json", args: []string{"sources", "add", "mirror", "--path", "/srv/kici/app", "--github-repo", "kici-dev/app", "-o", "json"}, code: 0},
		{name: "sources-add-bad-github-repo", args: []string{"sources", "add", "mirror", "--path", "/x", "--github-repo", "kici-dev"}, code: 2},
		{name: "sources-add-github-with-github-repo", args: []string{"sources", "add", "x", "--github", "a/b", "--github-repo", "a/c"}, code: 2},
		{name: "sources-add-fork-bad", args: []string{"sources", "add", "oss", "--github", "kici-dev/oss", "--fork-pull-requests", "always"}, code: 2},
	})
}
