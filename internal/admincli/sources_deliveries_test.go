package admincli

import "testing"

func TestSourcesDeliveries(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "sources-deliveries", args: []string{"sources", "deliveries", "hello"}, code: 0},
		{name: "sources-deliveries-json", args: []string{"sources", "deliveries", "hello", "-o", "json"}, code: 0},
		{name: "sources-deliveries-page", args: []string{"sources", "deliveries", "hello", "--limit", "2"}, code: 0},
		{name: "sources-deliveries-next-page", args: []string{"sources", "deliveries", "hello", "--limit", "2", "--cursor", "2"}, code: 0},
		{name: "sources-deliveries-bad-cursor", args: []string{"sources", "deliveries", "hello", "--cursor", "x"}, code: 1},
		{name: "sources-deliveries-bad-limit", args: []string{"sources", "deliveries", "hello", "--limit", "0"}, code: 2},
		{name: "sources-deliveries-empty", args: []string{"sources", "deliveries", "hello"}, empty: true, code: 0},
		{name: "sources-deliveries-unknown", args: []string{"sources", "deliveries", "nope"}, code: 1},
		{name: "sources-deliveries-no-name", args: []string{"sources", "deliveries"}, code: 2},
	})
}

func TestSourcesRedeliver(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "sources-redeliver", args: []string{"sources", "redeliver", "hello", "ev-1"}, code: 0},
		{name: "sources-redeliver-json", args: []string{"sources", "redeliver", "hello", "ev-1", "-o", "json"}, code: 0},
		{name: "sources-redeliver-invalid-workflow", args: []string{"sources", "redeliver", "hello", "ev-3"}, code: 0},
		{name: "sources-redeliver-rejected", args: []string{"sources", "redeliver", "hello", "ev-2"}, code: 1},
		{name: "sources-redeliver-unknown", args: []string{"sources", "redeliver", "hello", "ev-9"}, code: 1},
		{name: "sources-redeliver-auditor", args: []string{"sources", "redeliver", "hello", "ev-1"}, env: map[string]string{envToken: fakeAuditorToken}, code: 1},
		{name: "sources-redeliver-one-arg", args: []string{"sources", "redeliver", "hello"}, code: 2},
	})
}
