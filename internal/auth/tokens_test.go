package auth_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/auth"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
)

func TestAdminTokens(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		now := time.Now()
		tokens := auth.NewAdminTokens(db, auth.AdminTokensConfig{Bootstrap: "bootstrap-secret-value", Now: func() time.Time { return now }})
		boot, err := tokens.Authenticate(ctx, "bootstrap-secret-value")
		if err != nil {
			t.Fatalf("bootstrap: %v", err)
		}
		if diff := cmp.Diff(auth.Principal{Type: auth.ActorBootstrap, ID: "bootstrap", Name: "bootstrap", Role: auth.Owner}, boot); diff != "" {
			t.Errorf("bootstrap principal (-want +got):\n%s", diff)
		}

		plain, row, err := tokens.Create(ctx, "ci bot", auth.Auditor, boot, nil)
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		if !strings.HasPrefix(plain, "kadm_") || len(plain) != len("kadm_")+64 {
			t.Errorf("token %q: want kadm_ and 64 hex digits", plain)
		}
		if row.Hash == plain || strings.Contains(row.Hash, plain[5:]) || row.Prefix != plain[:12] || row.CreatedBy != "bootstrap" {
			t.Errorf("stored row %+v: want only a hash, a 12-character prefix, created by bootstrap", row)
		}
		expired := now.Add(-time.Second)
		revokedPlain, revoked, err := tokens.Create(ctx, "gone", auth.Owner, boot, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.RevokeAdminToken(ctx, revoked.ID, now); err != nil {
			t.Fatal(err)
		}

		got, err := tokens.Authenticate(ctx, plain)
		if err != nil {
			t.Fatalf("authenticate: %v", err)
		}
		if diff := cmp.Diff(auth.Principal{Type: auth.ActorAdminToken, ID: row.ID, Name: "ci bot", Role: auth.Auditor}, got); diff != "" {
			t.Errorf("principal (-want +got):\n%s", diff)
		}
		list, err := db.ListAdminTokens(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if list[0].LastUsedAt == nil {
			t.Errorf("last used: got nil after a use, want a time")
		}

		failures := []struct {
			name  string
			token string
			want  error
			why   string
		}{
			{name: "missing", token: "", want: auth.ErrMissingToken},
			{name: "unknown", token: "kadm_" + strings.Repeat("0", 64), want: auth.ErrInvalidToken, why: "unknown"},
			{name: "not an admin token", token: "some-other-secret", want: auth.ErrInvalidToken, why: "not a kadm_ token"},
			{name: "revoked", token: revokedPlain, want: auth.ErrInvalidToken, why: "revoked"},
			{name: "bootstrap with a suffix", token: "bootstrap-secret-valuex", want: auth.ErrInvalidToken},
		}
		for _, tt := range failures {
			t.Run(tt.name, func(t *testing.T) {
				_, err := tokens.Authenticate(ctx, tt.token)
				if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.why) {
					t.Errorf("got %v, want %v saying %q", err, tt.want, tt.why)
				}
			})
		}
		// An expired token, found by its hash.
		exp, _, err := tokens.Create(ctx, "short-lived", auth.Admin, boot, &expired)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tokens.Authenticate(ctx, exp); !errors.Is(err, auth.ErrInvalidToken) || !strings.Contains(err.Error(), "expired") {
			t.Errorf("expired: got %v, want ErrInvalidToken saying expired", err)
		}
	})
}

func TestCheckTokenName(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		in      string
		wantErr bool
	}{
		{name: "plain", in: "alice laptop"},
		{name: "empty", in: "", wantErr: true},
		{name: "blank", in: "  ", wantErr: true},
		{name: "too long", in: strings.Repeat("x", 101), wantErr: true},
		{name: "control character", in: "a\nb", wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := auth.CheckTokenName(tt.in); (err != nil) != tt.wantErr {
				t.Errorf("CheckTokenName(%q): got %v, want error %t", tt.in, err, tt.wantErr)
			}
		})
	}
}
