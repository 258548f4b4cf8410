package secrets_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/kici-dev/kici/internal/secrets"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
)

// TestBlob: a sealed blob opens for its purpose under the key it was
// sealed with, and for nothing else.
func TestBlob(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		key := secrets.GenerateKey()
		svc, err := secrets.Open(ctx, logger(t), db, secrets.KeyConfig{Env: key.Hex()})
		if err != nil {
			t.Fatal(err)
		}
		plain := []byte("-----BEGIN PRIVATE KEY-----\nnot really\n-----END PRIVATE KEY-----\n")
		sealed, err := svc.SealBlob("cluster-ca-key", plain)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(sealed, "PRIVATE KEY") || !strings.HasPrefix(sealed, "kici-blob:1:") {
			t.Errorf("sealed blob %q: want kici-blob:1: and no plaintext", sealed)
		}
		got, err := svc.OpenBlob("cluster-ca-key", sealed)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("open: got (%q, %v), want the plaintext", got, err)
		}
		if _, err := svc.SealBlob("", plain); err == nil {
			t.Error("seal without a purpose: got nil, want an error")
		}

		// Another orchestrator on another key: the key check refuses it at
		// start, so test the blob against a service on a fresh database.
		other, err := secrets.Open(ctx, logger(t), openOther(t), secrets.KeyConfig{Env: secrets.GenerateKey().Hex()})
		if err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name    string
			svc     *secrets.Service
			purpose string
			sealed  string
		}{
			{name: "another purpose", svc: svc, purpose: "webhook", sealed: sealed},
			{name: "another key", svc: other, purpose: "cluster-ca-key", sealed: sealed},
			{name: "tampered", svc: svc, purpose: "cluster-ca-key", sealed: sealed[:len(sealed)-4] + flip(sealed[len(sealed)-4:])},
			{name: "no prefix", svc: svc, purpose: "cluster-ca-key", sealed: strings.TrimPrefix(sealed, "kici-blob:")},
			{name: "malformed version", svc: svc, purpose: "cluster-ca-key", sealed: "kici-blob:x:" + sealed[len("kici-blob:1:"):]},
			{name: "older key version", svc: svc, purpose: "cluster-ca-key", sealed: "kici-blob:0:" + sealed[len("kici-blob:1:"):]},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				if got, err := tt.svc.OpenBlob(tt.purpose, tt.sealed); !errors.Is(err, secrets.ErrOpen) {
					t.Errorf("got (%q, %v), want ErrOpen", got, err)
				}
			})
		}
	})
}

// openOther opens a fresh, migrated SQLite database.
func openOther(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), store.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return db
}

// flip changes every character of s to another base64 character.
func flip(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
	}
	return string(b)
}

// TestRotateResealsClusterCAKey: the cluster CA's sealed key opens with
// the new key after a rotation (and the old sealing no longer does).
func TestRotateResealsClusterCAKey(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		svc, err := secrets.Open(ctx, logger(t), db, secrets.KeyConfig{Env: secrets.GenerateKey().Hex()})
		if err != nil {
			t.Fatal(err)
		}
		sealed, err := svc.SealBlob(secrets.PurposeClusterCAKey, []byte("the CA key"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.InsertClusterCA(ctx, store.ClusterCA{CertPEM: "cert", KeySealed: sealed}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Rotate(ctx, secrets.GenerateKey()); err != nil {
			t.Fatal(err)
		}
		row, err := db.GetClusterCA(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if row.KeySealed == sealed || row.CertPEM != "cert" {
			t.Fatalf("CA row after rotation: %+v, want the key sealed anew and the certificate kept", row)
		}
		got, err := svc.OpenBlob(secrets.PurposeClusterCAKey, row.KeySealed)
		if err != nil || string(got) != "the CA key" {
			t.Errorf("open the re-sealed CA key: %q, %v", got, err)
		}
		if _, err := svc.OpenBlob(secrets.PurposeClusterCAKey, sealed); err == nil {
			t.Error("the old sealing still opens")
		}
	})
}
