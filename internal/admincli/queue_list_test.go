package admincli

import "testing"

func TestQueueList(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "queue-list", args: []string{"queue", "list"}, code: 0},
		{name: "queue-list-json", args: []string{"queue", "list", "-o", "json"}, code: 0},
		{name: "queue-list-empty", args: []string{"queue", "list"}, empty: true, code: 0},
		{name: "queue-list-limit", args: []string{"queue", "list", "--limit", "1"}, code: 0},
		{name: "queue-list-limit-json", args: []string{"queue", "list", "--limit", "1", "-o", "json"}, code: 0},
		{name: "queue-list-bad-limit", args: []string{"queue", "list", "--limit", "-1"}, code: 2},
	})
}
