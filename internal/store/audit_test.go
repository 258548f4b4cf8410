package store

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAudit(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		var ids []string
		for _, e := range []AuditEntry{
			{ActorType: "bootstrap", ActorID: "bootstrap", Action: "token.create", Target: "token:1", Outcome: "allowed", Status: 201},
			{ActorType: "anonymous", Action: "secret.list", Outcome: "denied", Status: 401, Detail: "no admin token", ClientAddr: "10.0.0.1"},
			{ActorType: "admin_token", ActorID: "t1", ActorName: "alice", Role: "auditor", Action: "secret.set", Target: "secret:A", Outcome: "denied", Status: 403},
			{ActorType: "admin_token", ActorID: "t1", ActorName: "alice", Role: "auditor", Action: "secret.delete", Target: "secret:A", Outcome: "failed", Status: 404},
		} {
			got, err := db.InsertAudit(ctx, e)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID == "" || got.CreatedAt.IsZero() {
				t.Errorf("inserted %+v: want an ID and a time", got)
			}
			ids = append(ids, got.ID)
		}
		tests := []struct {
			name string
			f    AuditFilter
			want []string // IDs, newest first
		}{
			{name: "all", f: AuditFilter{}, want: []string{ids[3], ids[2], ids[1], ids[0]}},
			{name: "by actor", f: AuditFilter{ActorID: "t1"}, want: []string{ids[3], ids[2]}},
			{name: "by action", f: AuditFilter{Action: "secret.set"}, want: []string{ids[2]}},
			{name: "by action prefix", f: AuditFilter{Action: "secret."}, want: []string{ids[3], ids[2], ids[1]}},
			{name: "by outcome", f: AuditFilter{Outcome: "denied"}, want: []string{ids[2], ids[1]}},
			{name: "limit", f: AuditFilter{Limit: 2}, want: []string{ids[3], ids[2]}},
			{name: "before", f: AuditFilter{Before: ids[2], Limit: 2}, want: []string{ids[1], ids[0]}},
			{name: "since", f: AuditFilter{Since: testNow.Add(time.Hour)}, want: nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				list, err := db.ListAudit(ctx, tt.f)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, e := range list {
					got = append(got, e.ID)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("entries (-want +got):\n%s", diff)
				}
			})
		}
	})
}
