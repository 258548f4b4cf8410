package secrets_test

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/secrets"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
)

func logger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

func TestSetResolveDelete(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		key := secrets.GenerateKey()
		svc, err := secrets.Open(ctx, logger(t), db, secrets.KeyConfig{Env: key.Hex()})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []struct{ scope, name, value string }{
			{"", "TOKEN", "global-token"},
			{"", "SHARED", "shared-value"},
			{"repo", "TOKEN", "repo-token"},
			{"other", "ONLY_OTHER", "other-value"},
		} {
			created, err := svc.Set(ctx, s.scope, s.name, s.value, "tester")
			if err != nil || !created {
				t.Fatalf("set %s/%s: got (%t, %v), want created", s.scope, s.name, created, err)
			}
		}
		if created, err := svc.Set(ctx, "", "SHARED", "shared-value-2", "tester"); err != nil || created {
			t.Fatalf("replace: got (%t, %v), want replaced", created, err)
		}
		got, err := svc.Resolve(ctx, "repo", "", []string{"TOKEN", "SHARED"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]string{"TOKEN": "repo-token", "SHARED": "shared-value-2"}, got); diff != "" {
			t.Errorf("resolve for repo (-want +got):\n%s", diff)
		}
		got, err = svc.Resolve(ctx, "elsewhere", "", []string{"TOKEN"})
		if err != nil || got["TOKEN"] != "global-token" {
			t.Errorf("resolve for another source: got (%v, %v), want the global TOKEN", got, err)
		}
		var missing *secrets.MissingError
		if _, err := svc.Resolve(ctx, "repo", "", []string{"TOKEN", "ONLY_OTHER", "NOPE"}); !errors.As(err, &missing) ||
			!cmp.Equal(missing.Names, []string{"ONLY_OTHER", "NOPE"}) {
			t.Errorf("resolve missing: got %v, want ONLY_OTHER and NOPE missing (a secret of another source is not visible)", err)
		}
		list, err := svc.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			if s.Ciphertext != "" {
				t.Errorf("list %s: got a sealed value, want metadata only", s.Name)
			}
		}
		if len(list) != 4 {
			t.Errorf("list: got %d secrets, want 4", len(list))
		}
		if err := svc.Delete(ctx, "repo", "TOKEN"); err != nil {
			t.Fatal(err)
		}
		if err := svc.Delete(ctx, "repo", "TOKEN"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("delete twice: got %v, want ErrNotFound", err)
		}
		if got, _ := svc.Resolve(ctx, "repo", "", []string{"TOKEN"}); got["TOKEN"] != "global-token" {
			t.Errorf("after deleting the source's TOKEN: got %q, want the global one", got["TOKEN"])
		}

		// A sealed value moved to another row does not open there.
		rows, err := db.ListSecrets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var shared store.Secret
		for _, r := range rows {
			if r.Name == "SHARED" {
				shared = r
			}
		}
		moved := shared
		moved.Name = "MOVED"
		if _, err := db.PutSecret(ctx, moved); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Resolve(ctx, "repo", "", []string{"MOVED"}); !errors.Is(err, secrets.ErrOpen) {
			t.Errorf("resolve a moved value: got %v, want ErrOpen", err)
		}
		if err := svc.Delete(ctx, "", "MOVED"); err != nil {
			t.Fatal(err)
		}

		for _, bad := range []struct{ name, value string }{
			{"lower", "v"}, {"KICI_X", "v"}, {"1X", "v"}, {"OK", ""}, {"OK", "abc"}, {"OK", "żół"}, {"OK", "a\x00bc"},
			{"OK", strings.Repeat("x", secrets.MaxValueBytes+1)},
		} {
			if _, err := svc.Set(ctx, "", bad.name, bad.value, "tester"); err == nil {
				t.Errorf("set %q: got no error, want one", bad.name)
			}
		}
	})
}

func TestRotate(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		oldKey, newKey := secrets.GenerateKey(), secrets.GenerateKey()
		svc, err := secrets.Open(ctx, logger(t), db, secrets.KeyConfig{Env: oldKey.Hex()})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"A", "B", "C"} {
			if _, err := svc.Set(ctx, "", n, "value of "+n, "tester"); err != nil {
				t.Fatal(err)
			}
		}
		before, _ := db.ListSecrets(ctx)
		if _, err := svc.Rotate(ctx, oldKey); !errors.Is(err, secrets.ErrSameKey) {
			t.Errorf("rotate to the same key: got %v, want ErrSameKey", err)
		}
		res, err := svc.Rotate(ctx, newKey)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(secrets.RotateResult{Resealed: 3, KeyVersion: 2, Fingerprint: newKey.Fingerprint()}, res); diff != "" {
			t.Errorf("result (-want +got):\n%s", diff)
		}
		after, _ := db.ListSecrets(ctx)
		for i := range after {
			if after[i].Ciphertext == before[i].Ciphertext || after[i].KeyVersion != 2 || !after[i].UpdatedAt.Equal(before[i].UpdatedAt) {
				t.Errorf("secret %s after rotation: got %+v, want a new sealed value at key version 2 and the same times", after[i].Name, after[i])
			}
		}
		got, err := svc.Resolve(ctx, "any", "", []string{"A", "B", "C"})
		if err != nil || got["B"] != "value of B" {
			t.Fatalf("resolve after rotation: got (%v, %v)", got, err)
		}
		// A new process with the old key refuses to start; with the new
		// key it opens everything.
		if _, err := secrets.Open(ctx, logger(t), db, secrets.KeyConfig{Env: oldKey.Hex()}); !errors.Is(err, secrets.ErrWrongKey) {
			t.Errorf("open with the old key: got %v, want ErrWrongKey", err)
		}
		again, err := secrets.Open(ctx, logger(t), db, secrets.KeyConfig{Env: newKey.Hex()})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := again.Resolve(ctx, "any", "", []string{"C"}); err != nil || got["C"] != "value of C" {
			t.Errorf("resolve in a new process: got (%v, %v)", got, err)
		}
	})
}

// TestRotateIsAllOrNothing: a secret that does not open aborts the
// rotation, and every secret stays under the old key.
func TestRotateIsAllOrNothing(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		oldKey := secrets.GenerateKey()
		svc, err := secrets.Open(ctx, logger(t), db, secrets.KeyConfig{Env: oldKey.Hex()})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"A", "B"} {
			if _, err := svc.Set(ctx, "", n, "value of "+n, "tester"); err != nil {
				t.Fatal(err)
			}
		}
		// Z sorts last and holds garbage: A and B are resealed before it fails.
		if _, err := db.PutSecret(ctx, store.Secret{Name: "Z", Ciphertext: "v1:garbage", KeyVersion: 1}); err != nil {
			t.Fatal(err)
		}
		before, _ := db.ListSecrets(ctx)
		if _, err := svc.Rotate(ctx, secrets.GenerateKey()); err == nil {
			t.Fatal("rotate with a broken secret: got no error, want one")
		}
		after, _ := db.ListSecrets(ctx)
		if diff := cmp.Diff(before, after); diff != "" {
			t.Errorf("secrets changed by a failed rotation (-before +after):\n%s", diff)
		}
		if svc.KeyVersion() != 1 {
			t.Errorf("key version: got %d, want 1", svc.KeyVersion())
		}
	})
}

// TestKeyFile: with SQLite and no KICI_SECRET_KEY the key is generated
// into the data dir, a rotation replaces it there, and an interrupted
// rotation is finished at the next start.
func TestKeyFile(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		dir := t.TempDir()
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		svc, err := secrets.Open(ctx, log, db, secrets.KeyConfig{DataDir: dir, Generate: true})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, secrets.KeyFile)
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("key file: got (%v, %v), want mode 0600", st, err)
		}
		data, _ := os.ReadFile(path)
		if !strings.Contains(logs.String(), "secret key generated") || strings.Contains(logs.String(), strings.TrimSpace(string(data))) {
			t.Errorf("log %q: want a warning about the generated key, without the key", logs.String())
		}
		if _, err := svc.Set(ctx, "", "A", "alpha", "tester"); err != nil {
			t.Fatal(err)
		}
		newKey := secrets.GenerateKey()
		res, err := svc.Rotate(ctx, newKey)
		if err != nil || res.KeyFile != path {
			t.Fatalf("rotate: got (%+v, %v), want the key file replaced", res, err)
		}
		if data, _ := os.ReadFile(path); strings.TrimSpace(string(data)) != newKey.Hex() {
			t.Errorf("key file after rotation: not the new key")
		}

		// Simulate a crash after the commit of a second rotation, before
		// the key file was replaced: the new key is only in the pending file.
		third := secrets.GenerateKey()
		if _, err := svc.Rotate(ctx, third); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, secrets.PendingKeyFile), []byte(third.Hex()+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(newKey.Hex()+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		again, err := secrets.Open(ctx, log, db, secrets.KeyConfig{DataDir: dir, Generate: true})
		if err != nil {
			t.Fatalf("open after an interrupted rotation: %v", err)
		}
		if got, err := again.Resolve(ctx, "x", "", []string{"A"}); err != nil || got["A"] != "alpha" {
			t.Errorf("resolve: got (%v, %v)", got, err)
		}
		if _, err := os.Stat(filepath.Join(dir, secrets.PendingKeyFile)); !os.IsNotExist(err) {
			t.Errorf("pending key file: got %v, want it gone", err)
		}

		// Without the env key and without permission to generate (PostgreSQL)
		// there is no key.
		if _, err := secrets.Open(ctx, log, db, secrets.KeyConfig{DataDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "KICI_SECRET_KEY is required") {
			t.Errorf("no key, no generating: got %v, want KICI_SECRET_KEY required", err)
		}
	})
}

func TestMasks(t *testing.T) {
	t.Parallel()
	got := secrets.Masks(map[string]string{"A": "p@ss word"})
	want := []string{"cEBzcyB3b3Jk", "p%40ss+word"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("masks (-want +got):\n%s", diff)
	}
}

func TestCheckValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, value, wantErr string
	}{
		{name: "empty", value: "", wantErr: "secret value: empty"},
		{name: "one character", value: "x", wantErr: "secret value: 1 character(s), at least 4"},
		{name: "three characters", value: "abc", wantErr: "secret value: 3 character(s), at least 4"},
		{name: "three characters of two bytes each", value: "żół", wantErr: "secret value: 3 character(s), at least 4"},
		{name: "four characters", value: "abcd"},
		{name: "NUL", value: "ab\x00cd", wantErr: "NUL"},
		{name: "too long", value: strings.Repeat("x", secrets.MaxValueBytes+1), wantErr: "at most 65536"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := secrets.CheckValue(tc.value)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("CheckValue: got %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("CheckValue: got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestShortSecretStoredEarlier: a value shorter than MinValueChars stored
// before the limit existed still opens and reaches its jobs (the agent
// masks it as a whole word); only setting one is refused.
func TestShortSecretStoredEarlier(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		key := secrets.GenerateKey()
		svc, err := secrets.Open(ctx, logger(t), db, secrets.KeyConfig{Env: key.Hex()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Set(ctx, "", "PIN", "42", "tester"); err == nil || !strings.Contains(err.Error(), "at least 4") {
			t.Fatalf("set a 2-character secret: got %v, want refused", err)
		}
		sealed, err := secrets.Seal(key, secrets.SecretAAD("", "PIN"), []byte("42"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.PutSecret(ctx, store.Secret{Name: "PIN", Ciphertext: sealed, KeyVersion: svc.KeyVersion(), UpdatedBy: "tester"}); err != nil {
			t.Fatal(err)
		}
		got, err := svc.Resolve(ctx, "repo", "", []string{"PIN"})
		if err != nil || got["PIN"] != "42" {
			t.Errorf("resolve the stored short secret: got (%v, %v), want 42", got, err)
		}
	})
}

// TestEnvironmentSecrets: a job of an environment receives the
// environment's secret over its source's and every source's; a job
// without the environment never receives it, and Missing agrees with
// Resolve.
func TestEnvironmentSecrets(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		svc, err := secrets.Open(ctx, logger(t), db, secrets.KeyConfig{Env: secrets.GenerateKey().Hex()})
		if err != nil {
			t.Fatal(err)
		}
		prod := secrets.EnvironmentScope("production")
		for _, s := range []struct{ scope, name, value string }{
			{"", "TOKEN", "global"},
			{"repo", "TOKEN", "repo"},
			{prod, "TOKEN", "prod"},
			{prod, "DEPLOY_KEY", "prod-key"},
		} {
			if _, err := svc.Set(ctx, s.scope, s.name, s.value, "tester"); err != nil {
				t.Fatal(err)
			}
		}
		got, err := svc.Resolve(ctx, "repo", "production", []string{"TOKEN", "DEPLOY_KEY"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]string{"TOKEN": "prod", "DEPLOY_KEY": "prod-key"}, got); diff != "" {
			t.Errorf("a production job's secrets (-want +got):\n%s", diff)
		}
		var missing *secrets.MissingError
		if _, err := svc.Resolve(ctx, "repo", "", []string{"DEPLOY_KEY"}); !errors.As(err, &missing) {
			t.Errorf("a job without the environment resolved DEPLOY_KEY: %v, want it missing", err)
		}
		if _, err := svc.Resolve(ctx, "repo", "staging", []string{"DEPLOY_KEY"}); !errors.As(err, &missing) {
			t.Errorf("a staging job resolved production's DEPLOY_KEY: %v, want it missing", err)
		}
		if got, _ := svc.Resolve(ctx, "repo", "staging", []string{"TOKEN"}); got["TOKEN"] != "repo" {
			t.Errorf("a staging job's TOKEN %q, want the source's", got["TOKEN"])
		}
		for _, c := range []struct {
			env  string
			want []string
		}{{"production", nil}, {"", []string{"DEPLOY_KEY"}}, {"staging", []string{"DEPLOY_KEY"}}} {
			m, err := svc.Missing(ctx, "repo", c.env, []string{"TOKEN", "DEPLOY_KEY"})
			if err != nil || !cmp.Equal(m, c.want) {
				t.Errorf("Missing in %q: %v (%v), want %v", c.env, m, err, c.want)
			}
		}
	})
}
