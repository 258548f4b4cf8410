package store

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSecrets(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		for _, s := range []Secret{
			{Scope: "", Name: "TOKEN", Ciphertext: "v1:a", KeyVersion: 1, UpdatedBy: "t1"},
			{Scope: "repo", Name: "TOKEN", Ciphertext: "v1:b", KeyVersion: 1, UpdatedBy: "t1"},
			{Scope: "", Name: "OTHER", Ciphertext: "v1:c", KeyVersion: 1, UpdatedBy: "t1"},
		} {
			created, err := db.PutSecret(ctx, s)
			if err != nil || !created {
				t.Fatalf("put %s/%s: got (%t, %v), want created", s.Scope, s.Name, created, err)
			}
		}
		created, err := db.PutSecret(ctx, Secret{Scope: "", Name: "TOKEN", Ciphertext: "v1:a2", KeyVersion: 1, UpdatedBy: "t2"})
		if err != nil || created {
			t.Fatalf("replace: got (%t, %v), want replaced", created, err)
		}
		got, err := db.LookupSecrets(ctx, []string{"", "repo"}, []string{"TOKEN"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Ciphertext != "v1:a2" || got[0].UpdatedBy != "t2" || !got[0].UpdatedAt.After(got[0].CreatedAt) || got[1].Scope != "repo" {
			t.Errorf("lookup: got %+v, want the replaced global TOKEN, then repo's", got)
		}
		if err := db.ResealSecret(ctx, "repo", "TOKEN", "v1:b2", 2); err != nil {
			t.Fatal(err)
		}
		if err := db.ResealSecret(ctx, "repo", "NOPE", "v1:x", 2); !errors.Is(err, ErrNotFound) {
			t.Errorf("reseal a missing secret: got %v, want ErrNotFound", err)
		}
		if err := db.DeleteSecret(ctx, "", "OTHER"); err != nil {
			t.Fatal(err)
		}
		if err := db.DeleteSecret(ctx, "", "OTHER"); !errors.Is(err, ErrNotFound) {
			t.Errorf("delete twice: got %v, want ErrNotFound", err)
		}
		list, err := db.ListSecrets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range list {
			names = append(names, s.Scope+"/"+s.Name+"@"+s.Ciphertext)
		}
		if diff := cmp.Diff([]string{"/TOKEN@v1:a2", "repo/TOKEN@v1:b2"}, names); diff != "" {
			t.Errorf("secrets (-want +got):\n%s", diff)
		}

		if _, err := db.GetSecretKeyCheck(ctx); !errors.Is(err, ErrNotFound) {
			t.Errorf("key check before any: got %v, want ErrNotFound", err)
		}
		for _, c := range []SecretKeyCheck{{KeyVersion: 1, Sealed: "v1:one"}, {KeyVersion: 2, Sealed: "v1:two"}} {
			if err := db.PutSecretKeyCheck(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		c, err := db.GetSecretKeyCheck(ctx)
		if err != nil || c.KeyVersion != 2 || c.Sealed != "v1:two" {
			t.Errorf("key check: got (%+v, %v), want version 2", c, err)
		}
	})
}
