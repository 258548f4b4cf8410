package admincli

import "testing"

func TestAuditList(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "audit-list", args: []string{"audit", "list"}, code: 0},
		{name: "audit-list-json", args: []string{"audit", "list", "--outcome", "denied", "-o", "json"}, code: 0},
		{name: "audit-list-page", args: []string{"audit", "list", "--limit", "2"}, code: 0},
		{name: "audit-list-next-page", args: []string{"audit", "list", "--limit", "2", "--before", "au-5"}, code: 0},
		{name: "audit-list-empty", args: []string{"audit", "list"}, empty: true, code: 0},
		{name: "audit-list-bad-outcome", args: []string{"audit", "list", "--outcome", "maybe"}, code: 2},
		{name: "audit-list-bad-limit", args: []string{"audit", "list", "--limit", "0"}, code: 2},
	})
}
