package join

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/cluster/pki"
	"github.com/kici-dev/kici/internal/secrets"
	"github.com/kici-dev/kici/internal/store"
)

// caKeyPurpose is the purpose the CA key is sealed for (see the sealer).
const caKeyPurpose = secrets.PurposeClusterCAKey

// ErrNoCA means the cluster has no CA yet: no join token was ever
// created, so there is nothing a worker could join with.
var ErrNoCA = errors.New("the cluster has no CA yet (it is created with the first join token)")

// tokenStore is what the Service needs of the database (a *store.DB).
type tokenStore interface {
	InsertClusterCA(ctx context.Context, ca store.ClusterCA) (store.ClusterCA, error)
	GetClusterCA(ctx context.Context) (store.ClusterCA, error)
	CreateJoinToken(ctx context.Context, t store.JoinToken) (store.JoinToken, error)
	GetJoinToken(ctx context.Context, id string) (store.JoinToken, error)
	ListJoinTokens(ctx context.Context) ([]store.JoinToken, error)
	UseJoinToken(ctx context.Context, id, nodeID string) (store.JoinToken, error)
	RevokeJoinToken(ctx context.Context, id string) (bool, error)
}

// sealer keeps the CA key secret at rest (a *secrets.Service): what
// SealBlob seals for a purpose, OpenBlob opens for that purpose only.
type sealer interface {
	SealBlob(purpose string, plain []byte) (string, error)
	OpenBlob(purpose, sealed string) ([]byte, error)
}

// Service is the coordinator side of joining: it keeps the cluster CA,
// issues and lists join tokens, and admits a worker that presents one.
// Every coordinator of a cluster builds one on the shared database; they
// agree on the CA because it is created once, in the database. A
// *Service is safe for concurrent use.
type Service struct {
	db     tokenStore
	sealer sealer
	log    *slog.Logger
	// now is the clock of token expiry and certificate validity.
	now func() time.Time
	// certTTL is the lifetime of the client certificates Join issues.
	certTTL time.Duration

	mu sync.Mutex
	ca *pki.CA // nil until loaded or created; never changes afterwards
}

// DefaultCertTTL is the lifetime of a worker's first certificate.
const DefaultCertTTL = 24 * time.Hour

// New returns a Service on db (a *store.DB), sealing the CA key with
// sealer (the *secrets.Service). It does not touch the database: the CA
// is loaded, or created, on first use.
func New(db tokenStore, sealer sealer, log *slog.Logger) *Service {
	return &Service{db: db, sealer: sealer, log: log, now: time.Now, certTTL: DefaultCertTTL}
}

// EnsureCA returns the cluster CA, creating it when the cluster has none:
// a new CA whose key is sealed and stored. Coordinators that create one
// at the same moment all end up with the one stored first (the others'
// are dropped unused).
func (s *Service) EnsureCA(ctx context.Context) (*pki.CA, error) {
	return s.getCA(ctx, true)
}

// CACertPEM returns the cluster CA certificate as PEM, what a joining
// worker fetches and checks against its token. ErrNoCA before the first
// join token was created: it never creates the CA.
func (s *Service) CACertPEM(ctx context.Context) ([]byte, error) {
	ca, err := s.getCA(ctx, false)
	if err != nil {
		return nil, err
	}
	return ca.CertPEM(), nil
}

// getCA returns the cached CA, or loads it from the database, or (when
// create is true) creates it there.
func (s *Service) getCA(ctx context.Context, create bool) (*pki.CA, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ca != nil {
		return s.ca, nil
	}
	row, err := s.db.GetClusterCA(ctx)
	created, lost := false, false
	switch {
	case errors.Is(err, store.ErrNotFound) && !create:
		return nil, ErrNoCA
	case errors.Is(err, store.ErrNotFound):
		if row, created, err = s.createCA(ctx); err != nil {
			return nil, err
		}
		lost = !created
	case err != nil:
		return nil, fmt.Errorf("load cluster CA: %w", err)
	}
	keyPEM, err := s.sealer.OpenBlob(caKeyPurpose, row.KeySealed)
	if err != nil {
		return nil, fmt.Errorf("load cluster CA: open its key, sealed on %s (the secret key rotated or changed since?): %w",
			row.CreatedAt.UTC().Format(time.RFC3339), err)
	}
	ca, err := pki.LoadCA([]byte(row.CertPEM), keyPEM)
	if err != nil {
		return nil, err
	}
	switch {
	case created:
		s.log.Info("cluster CA created", "ca_hash", ca.Hash(), "expires_at", ca.Certificate().NotAfter)
	case lost:
		s.log.Info("cluster CA created by another coordinator at the same time; using that one", "ca_hash", ca.Hash())
	default:
		s.log.Info("cluster CA loaded", "ca_hash", ca.Hash(), "created_at", row.CreatedAt)
	}
	s.ca = ca
	return ca, nil
}

// createCA makes a CA, seals its key and stores it unless another
// coordinator stored one first. It returns the stored row and whether it
// is the one made here.
func (s *Service) createCA(ctx context.Context) (store.ClusterCA, bool, error) {
	ca, err := pki.NewCA(newClusterName(), s.now())
	if err != nil {
		return store.ClusterCA{}, false, err
	}
	keyPEM, err := ca.MarshalKey()
	if err != nil {
		return store.ClusterCA{}, false, err
	}
	sealed, err := s.sealer.SealBlob(caKeyPurpose, keyPEM)
	if err != nil {
		return store.ClusterCA{}, false, fmt.Errorf("create cluster CA: %w", err)
	}
	certPEM := string(ca.CertPEM())
	row, err := s.db.InsertClusterCA(ctx, store.ClusterCA{CertPEM: certPEM, KeySealed: sealed})
	if err != nil {
		return store.ClusterCA{}, false, fmt.Errorf("create cluster CA: %w", err)
	}
	return row, row.CertPEM == certPEM, nil
}

// newClusterName names a new CA: "cluster-" and six random hex digits.
// The name only shows in the CA certificate's subject.
func newClusterName() string {
	var b [3]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "cluster-" + hex.EncodeToString(b[:])
}
