package secrets_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/secrets"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
)

// TestWebhookSecretsAtRest: webhook secrets stored in plaintext by an
// older kici are sealed at start, sealed values open only for their own
// source, and a key rotation re-seals them with the job secrets.
func TestWebhookSecretsAtRest(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		oldKey, newKey := secrets.GenerateKey(), secrets.GenerateKey()
		svc, err := secrets.Open(ctx, logger(t), db, secrets.KeyConfig{Env: oldKey.Hex()})
		if err != nil {
			t.Fatal(err)
		}
		// As an older kici wrote them.
		if _, err := db.CreateSource(ctx, store.Source{Name: "app", Kind: store.SourceLocal, Location: "/src/app",
			WebhookSecrets: []string{"new-hmac-key", "old-hmac-key"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.CreateSource(ctx, store.Source{Name: "quiet", Kind: store.SourceLocal, Location: "/src/quiet"}); err != nil {
			t.Fatal(err)
		}

		n, err := svc.SealStoredWebhookSecrets(ctx)
		if err != nil || n != 1 {
			t.Fatalf("seal stored: got (%d, %v), want 1 source sealed", n, err)
		}
		row, err := db.GetSource(ctx, "app")
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range row.WebhookSecrets {
			if strings.Contains(v, "hmac-key") || !strings.HasPrefix(v, "kici-sealed:1:") {
				t.Errorf("stored webhook secret %q: want a value sealed under key version 1, without the plaintext", v)
			}
		}
		got, err := svc.OpenWebhookSecrets("app", row.WebhookSecrets)
		if diff := cmp.Diff([]string{"new-hmac-key", "old-hmac-key"}, got); err != nil || diff != "" {
			t.Fatalf("open (-want +got, err %v):\n%s", err, diff)
		}
		if n, err := svc.SealStoredWebhookSecrets(ctx); err != nil || n != 0 {
			t.Errorf("seal stored again: got (%d, %v), want nothing to do", n, err)
		}
		if _, err := svc.OpenWebhookSecrets("other", row.WebhookSecrets); err == nil {
			t.Error("a sealed webhook secret opened for another source")
		}
		legacy, err := svc.OpenWebhookSecrets("app", []string{"plain"})
		if err != nil || len(legacy) != 1 || legacy[0] != "plain" {
			t.Errorf("open a plaintext value: got (%v, %v), want it as it is", legacy, err)
		}

		if _, err := svc.Set(ctx, "", "TOKEN", "t0k3n", "tester"); err != nil {
			t.Fatal(err)
		}
		res, err := svc.Rotate(ctx, newKey)
		if err != nil {
			t.Fatal(err)
		}
		if res.Resealed != 2 {
			t.Errorf("rotation resealed %d, want 2 (one secret, one source's webhook secrets)", res.Resealed)
		}
		rotated, _ := db.GetSource(ctx, "app")
		again, err := secrets.Open(ctx, logger(t), db, secrets.KeyConfig{Env: newKey.Hex()})
		if err != nil {
			t.Fatal(err)
		}
		got, err = again.OpenWebhookSecrets("app", rotated.WebhookSecrets)
		if diff := cmp.Diff([]string{"new-hmac-key", "old-hmac-key"}, got); err != nil || diff != "" {
			t.Fatalf("open after rotation (-want +got, err %v):\n%s", err, diff)
		}
		if !strings.HasPrefix(rotated.WebhookSecrets[0], "kici-sealed:2:") {
			t.Errorf("after rotation: %q, want sealed under key version 2", rotated.WebhookSecrets[0])
		}
		if _, err := again.OpenWebhookSecrets("app", row.WebhookSecrets); err == nil {
			t.Error("a value sealed under the old key opened after the rotation")
		}
	})
}
