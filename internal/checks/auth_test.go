package checks

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
)

// newAppKey returns an RSA key and its PKCS#1 PEM, as GitHub hands out an
// App's private key.
func newAppKey(t *testing.T) (*rsa.PrivateKey, []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

func TestReporterAuthenticatesAsAGitHubApp(t *testing.T) {
	t.Parallel()
	key, keyPEM := newAppKey(t)
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		f.gh.EnableApp(4242, &key.PublicKey)
		// The fake checks JWTs and tokens against the real time.
		f.clock.now = time.Now()
		r, err := New(slog.New(slog.NewTextHandler(t.Output(), nil)), db, Config{
			APIURL: f.gh.URL, AppID: 4242, AppKey: keyPEM, PublicURL: publicURL, Now: f.clock.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		run := createRun(t, db, "app")
		step(t, r, run.ID, 1)
		setRun(t, db, run, store.RunRunning, "", nil)
		step(t, r, run.ID, 1)
		if n := f.gh.InstallationTokens(); n != 1 {
			t.Errorf("after two reports: got %d installation tokens minted, want 1 (cached)", n)
		}
		// Shortly before the hour is up, the token is replaced.
		f.clock.Add(installationTokenTTLForTest - installationTokenMargin + time.Second)
		setRun(t, db, run, store.RunSuccess, "", nil)
		step(t, r, run.ID, 1)
		if n := f.gh.InstallationTokens(); n != 2 {
			t.Errorf("near the token's expiry: got %d installation tokens minted, want 2", n)
		}
		if got := onlyCheckRun(t, f.gh); got.Status != "completed" || got.Conclusion != "success" {
			t.Errorf("got check run %s/%s, want completed/success", got.Status, got.Conclusion)
		}
	})
}

// installationTokenTTLForTest is how long GitHub's installation tokens
// (and the fake's) are valid.
const installationTokenTTLForTest = time.Hour

func TestReporterWithAWrongAppKeyRecordsTheError(t *testing.T) {
	t.Parallel()
	key, _ := newAppKey(t)
	_, otherPEM := newAppKey(t)
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		f.gh.EnableApp(4242, &key.PublicKey)
		f.clock.now = time.Now()
		r, err := New(slog.New(slog.NewTextHandler(t.Output(), nil)), db, Config{
			APIURL: f.gh.URL, AppID: 4242, AppKey: otherPEM, Now: f.clock.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		run := createRun(t, db, "app")
		step(t, r, run.ID, 0)
		row, err := db.GetCheckReport(t.Context(), run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(row.LastError, "installation") || !strings.Contains(row.LastError, "401") {
			t.Errorf("last error: got %q, want the installation lookup's 401", row.LastError)
		}
		if n := len(f.gh.CheckRuns(testRepo)); n != 0 {
			t.Errorf("got %d check runs, want none", n)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "token", cfg: Config{Token: "t"}},
		{name: "app", cfg: Config{AppID: 1, AppKey: []byte("k")}},
		{name: "nothing", cfg: Config{}, wantErr: "Token: required without AppID"},
		{name: "app without key", cfg: Config{AppID: 1}, wantErr: "AppKey: required with AppID"},
		{name: "negative app id", cfg: Config{AppID: -1, AppKey: []byte("k")}, wantErr: "AppID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("got %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestNewRefusesABadKeyOrURL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "key not PEM", cfg: Config{AppID: 1, AppKey: []byte("not a key")}, wantErr: "AppKey"},
		{name: "API URL not http", cfg: Config{Token: "t", APIURL: "ftp://x"}, wantErr: "APIURL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(slog.New(slog.DiscardHandler), nil, tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got %v, want an error naming %s", err, tt.wantErr)
			}
		})
	}
}
