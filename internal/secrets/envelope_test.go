package secrets_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kici-dev/kici/internal/secrets"
)

func TestEnvelope(t *testing.T) {
	t.Parallel()
	k := secrets.GenerateKey()
	aad := secrets.SecretAAD("", "DEPLOY_TOKEN")
	a, err := secrets.Seal(k, aad, []byte("hunter2"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := secrets.Seal(k, aad, []byte("hunter2"))
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Errorf("two seals of one value: got the same envelope, want different nonces")
	}
	if strings.Contains(a, "hunter2") || !strings.HasPrefix(a, "v1:") {
		t.Errorf("envelope %q: want v1: and no plaintext", a)
	}
	pt, err := secrets.OpenSealed(k, aad, a)
	if err != nil || string(pt) != "hunter2" {
		t.Fatalf("open: got (%q, %v), want hunter2", pt, err)
	}
	tampered := a[:len(a)-2] + "AA"
	if a[len(a)-2:] == "AA" {
		tampered = a[:len(a)-2] + "BB"
	}
	tests := []struct {
		name   string
		key    secrets.Key
		aad    []byte
		sealed string
	}{
		{name: "another key", key: secrets.GenerateKey(), aad: aad, sealed: a},
		{name: "another name", key: k, aad: secrets.SecretAAD("", "OTHER"), sealed: a},
		{name: "another scope", key: k, aad: secrets.SecretAAD("repo", "DEPLOY_TOKEN"), sealed: a},
		{name: "scope and name shifted", key: k, aad: secrets.SecretAAD("DEPLOY", "_TOKEN"), sealed: a},
		{name: "tampered", key: k, aad: aad, sealed: tampered},
		{name: "truncated", key: k, aad: aad, sealed: "v1:AAAA"},
		{name: "unknown version", key: k, aad: aad, sealed: "v9:" + a[3:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := secrets.OpenSealed(tt.key, tt.aad, tt.sealed); !errors.Is(err, secrets.ErrOpen) {
				t.Errorf("got %v, want ErrOpen", err)
			}
		})
	}
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	good := strings.Repeat("ab", 32)
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{name: "64 hex digits", in: good},
		{name: "with a newline", in: good + "\n"},
		{name: "too short", in: "abcd", wantErr: "want 64 hex digits"},
		{name: "not hex", in: strings.Repeat("zz", 32), wantErr: "not hex"},
		{name: "base64 of 32 bytes", in: "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s=", wantErr: "want 64 hex digits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k, err := secrets.ParseKey(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error saying %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), tt.in) {
					t.Errorf("error %q repeats the key", err)
				}
				return
			}
			if err != nil || k.Hex() != good {
				t.Fatalf("got (%s, %v), want the key", k.Hex(), err)
			}
			if s := k.String(); strings.Contains(s, good) || !strings.HasPrefix(s, "key:") {
				t.Errorf("String() = %q: want a fingerprint, not the key", s)
			}
		})
	}
}
