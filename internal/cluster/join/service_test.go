package join

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/cluster/pki"
	"github.com/kici-dev/kici/internal/store"
)

// Coordinators starting at once, each with its own Service and database
// handle, create one CA between them; a later coordinator loads it. All
// of them find no CA before any stores theirs (a barrier holds them), so
// each creates one and the store keeps the first.
func TestEnsureCARace(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, open func() *store.DB, clock *testClock) {
		const n = 4
		var barrier sync.WaitGroup
		barrier.Add(n)
		svcs := make([]*Service, n)
		for i := range n {
			svcs[i] = newService(t, open(), clock)
			svcs[i].db = &lookupBarrier{tokenStore: svcs[i].db, wg: &barrier}
		}
		hashes := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i, svc := range svcs {
			wg.Go(func() {
				ca, err := svc.EnsureCA(t.Context())
				if err == nil {
					hashes[i] = ca.Hash()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("coordinator %d: %v", i, errs[i])
			}
			if hashes[i] != hashes[0] {
				t.Errorf("coordinator %d: got CA sha256:%s, coordinator 0 got sha256:%s; want one CA", i, hashes[i], hashes[0])
			}
		}
		later := newService(t, open(), clock)
		pem, err := later.CACertPEM(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		cert, err := (pki.JoinToken{CAHash: hashes[0]}).VerifyCA(pem)
		if err != nil {
			t.Fatalf("a later coordinator serves another CA: %v", err)
		}
		if !strings.HasPrefix(cert.Subject.CommonName, "kici cluster CA cluster-") {
			t.Errorf("CA subject: got %q, want kici cluster CA cluster-…", cert.Subject.CommonName)
		}
		// Its key opens too: it can sign.
		if _, _, err := later.CreateToken(t.Context(), 0, "bootstrap"); err != nil {
			t.Errorf("create a token on the later coordinator: %v", err)
		}
	})
}

// lookupBarrier holds each GetClusterCA answer until wg is done, so that
// the Services it serves all look before any of them creates.
type lookupBarrier struct {
	tokenStore
	wg   *sync.WaitGroup
	once sync.Once
}

func (b *lookupBarrier) GetClusterCA(ctx context.Context) (store.ClusterCA, error) {
	ca, err := b.tokenStore.GetClusterCA(ctx)
	b.once.Do(func() {
		b.wg.Done()
		b.wg.Wait()
	})
	return ca, err
}

// CACertPEM never creates the CA: before the first token there is none.
func TestCACertPEMBeforeAnyToken(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, open func() *store.DB, clock *testClock) {
		db := open()
		svc := newService(t, db, clock)
		if _, err := svc.CACertPEM(t.Context()); !errors.Is(err, ErrNoCA) {
			t.Fatalf("got %v, want ErrNoCA", err)
		}
		if _, err := db.GetClusterCA(t.Context()); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("CA in the database after CACertPEM: got %v, want none", err)
		}
	})
}

// TestCreateToken: the lifetime defaults to 24 h and is bounded to 30
// days; a token pins the cluster CA and only its hash is stored.
func TestCreateToken(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, open func() *store.DB, clock *testClock) {
		db := open()
		svc := newService(t, db, clock)
		tests := []struct {
			name    string
			ttl     time.Duration
			want    time.Duration
			wantErr error
		}{
			{name: "default", ttl: 0, want: 24 * time.Hour},
			{name: "an hour", ttl: time.Hour, want: time.Hour},
			{name: "thirty days", ttl: 30 * 24 * time.Hour, want: 30 * 24 * time.Hour},
			{name: "over thirty days", ttl: 30*24*time.Hour + time.Second, wantErr: ErrBadTTL},
			{name: "negative", ttl: -time.Hour, wantErr: ErrBadTTL},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				tok, expires, err := svc.CreateToken(t.Context(), tt.ttl, "tok-1")
				if tt.wantErr != nil {
					if !errors.Is(err, tt.wantErr) {
						t.Fatalf("got %v, want %v", err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := expires.Sub(clock.now()); got != tt.want {
					t.Errorf("expires in %s, want %s", got, tt.want)
				}
				ca, err := svc.EnsureCA(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if tok.CAHash != ca.Hash() {
					t.Errorf("token pins sha256:%s, want the cluster CA sha256:%s", tok.CAHash, ca.Hash())
				}
				if _, err := pki.ParseJoinToken(tok.Encode()); err != nil {
					t.Errorf("the encoded token does not parse: %v", err)
				}
				row, err := db.GetJoinToken(t.Context(), tok.ID)
				if err != nil {
					t.Fatal(err)
				}
				if row.SecretHash != pki.HashSecret(tok.Secret) || row.SecretHash == tok.Secret || row.CreatedBy != "tok-1" {
					t.Errorf("stored token: got hash %q, created by %q; want the secret's hash, tok-1", row.SecretHash, row.CreatedBy)
				}
			})
		}
	})
}

// TestJoin walks the refusals and the success of Service.Join over real
// HTTP, with JoinCluster as the worker.
func TestJoin(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, open func() *store.DB, clock *testClock) {
		ctx := t.Context()
		svc := newService(t, open(), clock)
		coord := startCoordinator(t, svc)
		tok, _, err := svc.CreateToken(ctx, time.Hour, "bootstrap")
		if err != nil {
			t.Fatal(err)
		}
		ca, err := svc.EnsureCA(ctx)
		if err != nil {
			t.Fatal(err)
		}
		const node = "worker-7f3a"

		cred, err := JoinCluster(ctx, coord.srv.Client(), coord.srv.URL+"/", tok, node)
		if err != nil {
			t.Fatalf("join: %v", err)
		}
		if cred.NodeID() != node {
			t.Errorf("credential of node %q, want %q", cred.NodeID(), node)
		}
		leaf := cred.Current().Leaf
		pool := x509.NewCertPool()
		pool.AddCert(ca.Certificate())
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: clock.now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("the certificate does not verify against the cluster CA: %v", err)
		}
		if id, err := pki.NodeIDOf(leaf); err != nil || id != node {
			t.Errorf("NodeIDOf: got (%q, %v), want %q", id, err, node)
		}
		if got, want := leaf.NotAfter.Sub(clock.now()), DefaultCertTTL; got < want-time.Minute || got > want {
			t.Errorf("certificate valid for %s, want %s", got, want)
		}
		list, err := svc.ListTokens(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].State != apiv1.JoinTokenUsed || list[0].UsedBy != node {
			t.Errorf("listing after the join: got %+v, want one token used by %s", list, node)
		}

		// The same token again, even for the same node: single use.
		_, err = JoinCluster(ctx, coord.srv.Client(), coord.srv.URL, tok, node)
		var refused *RefusedError
		if !errors.As(err, &refused) || refused.Status != 409 || !Permanent(err) {
			t.Errorf("second join with the token: got %v, want a permanent 409 refusal", err)
		}
		if _, err := svc.Join(ctx, joinRequest(t, tok, "worker-other")); !errors.Is(err, ErrTokenUsed) {
			t.Errorf("second join, service: got %v, want ErrTokenUsed", err)
		}
	})
}

// An unknown token id and a wrong secret are refused alike, over HTTP
// and by the service; neither message holds the secret.
func TestJoinUnknownAndWrongSecretLookAlike(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, open func() *store.DB, clock *testClock) {
		ctx := t.Context()
		svc := newService(t, open(), clock)
		coord := startCoordinator(t, svc)
		tok, _, err := svc.CreateToken(ctx, time.Hour, "bootstrap")
		if err != nil {
			t.Fatal(err)
		}
		other, err := pki.NewJoinToken(tok.CAHash)
		if err != nil {
			t.Fatal(err)
		}
		wrongSecret := tok
		wrongSecret.Secret = other.Secret
		unknownID := other // same CA, an id the coordinator never issued

		var messages []string
		for _, bad := range []pki.JoinToken{wrongSecret, unknownID} {
			_, err := svc.Join(ctx, joinRequest(t, bad, "worker-1"))
			if !errors.Is(err, ErrTokenInvalid) {
				t.Errorf("service: got %v, want ErrTokenInvalid", err)
			}
			_, err = JoinCluster(ctx, coord.srv.Client(), coord.srv.URL, bad, "worker-1")
			var refused *RefusedError
			if !errors.As(err, &refused) || refused.Status != 401 {
				t.Fatalf("http: got %v, want a 401 refusal", err)
			}
			if strings.Contains(err.Error(), bad.Secret) || strings.Contains(err.Error(), bad.ID) {
				t.Errorf("refusal %q names the secret or the token id", err)
			}
			messages = append(messages, refused.Message)
		}
		if messages[0] != messages[1] {
			t.Errorf("wrong secret answered %q, unknown id %q: want the same", messages[0], messages[1])
		}
		// The right token still works: the failures did not spend it.
		if _, err := JoinCluster(ctx, coord.srv.Client(), coord.srv.URL, tok, "worker-1"); err != nil {
			t.Errorf("join with the right token after the failures: %v", err)
		}
	})
}

// Expired and revoked tokens are refused, and so is a request the CA will
// not sign (the token is not spent then).
func TestJoinRefusals(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, open func() *store.DB, clock *testClock) {
		ctx := t.Context()
		svc := newService(t, open(), clock)
		coord := startCoordinator(t, svc)
		expiring, _, err := svc.CreateToken(ctx, time.Hour, "bootstrap")
		if err != nil {
			t.Fatal(err)
		}
		revoked, _, err := svc.CreateToken(ctx, 2*time.Hour, "bootstrap")
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.RevokeToken(ctx, revoked.ID); err != nil {
			t.Fatal(err)
		}
		fresh, _, err := svc.CreateToken(ctx, 2*time.Hour, "bootstrap")
		if err != nil {
			t.Fatal(err)
		}

		// A CSR for another node than the one asked for: 400, not spent.
		req := joinRequest(t, fresh, "worker-a")
		req.NodeID = "worker-b"
		if _, err := svc.Join(ctx, req); !errors.Is(err, ErrBadRequest) {
			t.Errorf("mismatched CSR: got %v, want ErrBadRequest", err)
		}
		if _, err := svc.Join(ctx, JoinRequest{TokenID: fresh.ID, Secret: fresh.Secret, NodeID: "worker-a", CSRPEM: []byte("not a CSR")}); !errors.Is(err, ErrBadRequest) {
			t.Errorf("garbage CSR: got %v, want ErrBadRequest", err)
		}

		clock.advance(time.Hour)
		tests := []struct {
			name       string
			tok        pki.JoinToken
			wantErr    error
			wantStatus int
		}{
			{name: "expired", tok: expiring, wantErr: ErrTokenExpired, wantStatus: 403},
			{name: "revoked", tok: revoked, wantErr: ErrTokenRevoked, wantStatus: 403},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if _, err := svc.Join(ctx, joinRequest(t, tt.tok, "worker-x")); !errors.Is(err, tt.wantErr) {
					t.Errorf("service: got %v, want %v", err, tt.wantErr)
				}
				_, err := JoinCluster(ctx, coord.srv.Client(), coord.srv.URL, tt.tok, "worker-x")
				var refused *RefusedError
				if !errors.As(err, &refused) || refused.Status != tt.wantStatus {
					t.Errorf("http: got %v, want a %d refusal", err, tt.wantStatus)
				}
			})
		}
		if _, err := JoinCluster(ctx, coord.srv.Client(), coord.srv.URL, fresh, "worker-a"); err != nil {
			t.Errorf("join with the token the bad requests did not spend: %v", err)
		}

		list, err := svc.ListTokens(ctx)
		if err != nil {
			t.Fatal(err)
		}
		states := map[string]string{}
		for _, ti := range list {
			states[ti.ID] = ti.State
		}
		want := map[string]string{expiring.ID: apiv1.JoinTokenExpired, revoked.ID: apiv1.JoinTokenRevoked, fresh.ID: apiv1.JoinTokenUsed}
		if diff := cmp.Diff(want, states); diff != "" {
			t.Errorf("token states (-want +got):\n%s", diff)
		}
	})
}

// A worker whose token pins another CA than the coordinator's stops
// before it sends the secret: the join route is never reached.
func TestJoinClusterRefusesAnotherCA(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, open func() *store.DB, clock *testClock) {
		ctx := t.Context()
		svc := newService(t, open(), clock)
		coord := startCoordinator(t, svc)
		real, _, err := svc.CreateToken(ctx, time.Hour, "bootstrap")
		if err != nil {
			t.Fatal(err)
		}
		otherCA, err := pki.NewCA("elsewhere", clock.now())
		if err != nil {
			t.Fatal(err)
		}
		// The real id and secret, pinned to another cluster's CA: what a
		// worker holds when it is pointed at the wrong coordinator, or
		// when something in between serves its own CA.
		pinned := real
		pinned.CAHash = otherCA.Hash()
		_, err = JoinCluster(ctx, coord.srv.Client(), coord.srv.URL, pinned, "worker-1")
		if !errors.Is(err, pki.ErrCAMismatch) {
			t.Fatalf("got %v, want pki.ErrCAMismatch", err)
		}
		if Permanent(err) {
			t.Errorf("Permanent(%v): got true, want false (not a refusal)", err)
		}
		if n := coord.joins.Load(); n != 0 {
			t.Errorf("the join route was called %d times, want 0: the secret left the worker", n)
		}
		if strings.Contains(err.Error(), real.Secret) {
			t.Errorf("error %q holds the secret", err)
		}
		// The token is still good at the right coordinator.
		if _, err := JoinCluster(ctx, coord.srv.Client(), coord.srv.URL, real, "worker-1"); err != nil {
			t.Errorf("join with the right pin: %v", err)
		}
		if n := coord.joins.Load(); n != 1 {
			t.Errorf("join route calls: got %d, want 1", n)
		}
	})
}

// joinRequest makes a fresh key and CSR for node and the request that
// presents tok with it.
func joinRequest(t *testing.T, tok pki.JoinToken, node string) JoinRequest {
	t.Helper()
	key, err := pki.NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := pki.NewCSR(key, node)
	if err != nil {
		t.Fatal(err)
	}
	return JoinRequest{TokenID: tok.ID, Secret: tok.Secret, NodeID: node, CSRPEM: csr}
}

func TestPermanent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "unrecognised token", err: &RefusedError{Status: 401}, want: true},
		{name: "expired token", err: &RefusedError{Status: 403}, want: true},
		{name: "used token", err: &RefusedError{Status: 409}, want: true},
		{name: "bad request, wrapped", err: errors.Join(errors.New("join"), &RefusedError{Status: 400}), want: true},
		{name: "rate limited", err: &RefusedError{Status: 429}},
		{name: "request timeout", err: &RefusedError{Status: 408}},
		{name: "server error", err: &RefusedError{Status: 503}},
		{name: "CA mismatch", err: pki.ErrCAMismatch},
		{name: "network", err: errors.New("connection refused")},
		{name: "nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Permanent(tt.err); got != tt.want {
				t.Errorf("Permanent(%v): got %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
