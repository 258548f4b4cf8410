package admincli

import "testing"

func TestSourcesRemove(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "sources-remove", args: []string{"sources", "remove", "hello"}, code: 0},
		{name: "sources-remove-unknown", args: []string{"sources", "rm", "nope"}, code: 1},
		{name: "sources-remove-no-name", args: []string{"sources", "remove"}, code: 2},
	})
}
