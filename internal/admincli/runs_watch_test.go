package admincli

import "testing"

func TestRunsWatch(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		// r-103's first stream breaks off after one line: watch reconnects.
		{name: "runs-watch", args: []string{"runs", "watch", "r-103"}, code: 0},
		{name: "runs-watch-failure", args: []string{"runs", "watch", "r-201"}, code: 1},
		{name: "runs-watch-controls-escaped", args: []string{"runs", "watch", "r-400"}, code: 1},
		{name: "runs-watch-ended", args: []string{"runs", "watch", "r-300"}, code: 1},
		{name: "runs-watch-unknown", args: []string{"runs", "watch", "r-404"}, code: 1},
	})
}
