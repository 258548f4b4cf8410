// Package artifacts keeps the files jobs upload after their steps: it
// checks each upload (its digest, its bundle's entries, the size limits),
// stores the bundle as a blob (internal/blobs), records its manifest in
// the database, serves it to the jobs downstream and to the operator, and
// deletes it with its run or at its expiry (Sweep).
//
// The API (internal/api) calls it; it holds the rules the handlers do
// not. A *Service is safe for concurrent use.
package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/kici-dev/kici/internal/blobs"
	"github.com/kici-dev/kici/internal/bundle"
	"github.com/kici-dev/kici/internal/store"
)

// Defaults of the Config fields whose zero value means "default".
const (
	// DefaultMaxBytes bounds one job's bundle as stored: 1 GiB, room for
	// release binaries and reports of most builds, small enough that one
	// runaway pattern cannot eat the orchestrator's disk.
	DefaultMaxBytes = 1 << 30
	// DefaultMaxRunBytes bounds all the artifacts of one run: 5 GiB, so a
	// wide matrix that uploads from every job is still bounded.
	DefaultMaxRunBytes = 5 << 30
	// DefaultMaxUploads bounds the uploads the orchestrator receives at
	// once; the next gets ErrBusy and the agent tries again later.
	DefaultMaxUploads = 16
)

// orphanGrace is how old a blob must be before the sweep deletes it for
// having no row: an upload writes its blob a moment before its row.
const orphanGrace = time.Hour

// sweepBatch bounds the rows one sweep step reads.
const sweepBatch = 500

var (
	// ErrBusy is returned by Upload when DefaultMaxUploads uploads are
	// under way; the caller may try again shortly.
	ErrBusy = errors.New("too many uploads at once")
	// ErrBadBundle wraps the refusal of an upload whose bundle is
	// malformed or holds what artifacts may not (links, names that leave
	// the workspace, more than bundle.ArtifactLimits).
	ErrBadBundle = errors.New("invalid artifact bundle")
)

// LimitError is an upload refused for its size. It unwraps to
// blobs.ErrTooLarge.
type LimitError struct {
	// Name is the setting that bounds it, e.g. KICI_ARTIFACT_MAX_BYTES.
	Name string
	// Limit is the bound, in bytes; Used, for a per-run bound, is what
	// the run's other artifacts take of it.
	Limit, Used int64
}

func (e *LimitError) Error() string {
	if e.Used > 0 {
		return fmt.Sprintf("the run's artifacts would exceed %s (%s, of which other jobs use %s)", e.Name, bundle.FormatBytes(e.Limit), bundle.FormatBytes(e.Used))
	}
	return fmt.Sprintf("the bundle exceeds %s (%s)", e.Name, bundle.FormatBytes(e.Limit))
}

func (e *LimitError) Unwrap() error { return blobs.ErrTooLarge }

// Store is what the service needs of the database.
type Store interface {
	PutArtifact(ctx context.Context, a store.Artifact) (string, error)
	RunArtifactBytes(ctx context.Context, runID, exceptJob string) (int64, error)
	SweepableArtifacts(ctx context.Context, now time.Time, limit int) ([]store.Artifact, error)
	DeleteArtifact(ctx context.Context, id string) error
	ArtifactBlobKeys(ctx context.Context) (map[string]bool, error)
}

// Observer hears of what the service stores; its methods must be quick
// and safe for concurrent use.
type Observer interface {
	// ArtifactStored is called with the size of each accepted bundle.
	ArtifactStored(bytes int64)
}

// Config configures a Service.
type Config struct {
	// MaxBytes bounds one job's bundle as stored, in bytes
	// (KICI_ARTIFACT_MAX_BYTES); 0 means DefaultMaxBytes.
	MaxBytes int64
	// MaxRunBytes bounds the bundles of one run together, in bytes
	// (KICI_ARTIFACT_MAX_RUN_BYTES); 0 means DefaultMaxRunBytes.
	MaxRunBytes int64
	// Observer, when not nil, hears of stored bundles.
	Observer Observer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.MaxBytes < 0:
		return fmt.Errorf("artifacts config: MaxBytes is %d, want >= 0", c.MaxBytes)
	case c.MaxRunBytes < 0:
		return fmt.Errorf("artifacts config: MaxRunBytes is %d, want >= 0", c.MaxRunBytes)
	}
	return nil
}

// Service keeps artifacts.
type Service struct {
	log     *slog.Logger
	db      Store
	blobs   blobs.Store
	cfg     Config
	uploads chan struct{} // a slot per upload under way
}

// New returns a Service after validating cfg.
func New(logger *slog.Logger, db Store, bs blobs.Store, cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.MaxRunBytes == 0 {
		cfg.MaxRunBytes = DefaultMaxRunBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{log: logger, db: db, blobs: bs, cfg: cfg, uploads: make(chan struct{}, DefaultMaxUploads)}, nil
}

// Upload is one job's bundle being received.
type Upload struct {
	RunID   string
	JobID   string
	JobName string
	// SHA256 is the digest the agent computed (lowercase hex); required.
	SHA256 string
	// Size is the body's declared length, or -1 when not known.
	Size int64
	// Expire is how long the artifacts are kept; 0 keeps them as long as
	// the run.
	Expire time.Duration
}

// Upload stores the bundle body of up, replacing the job's earlier one.
// It refuses, storing nothing: a bundle over a size limit (*LimitError),
// one whose bytes do not have up.SHA256 (blobs.ErrDigestMismatch), one
// that is not a valid artifact bundle (ErrBadBundle), and any upload
// while DefaultMaxUploads are under way (ErrBusy).
func (s *Service) Upload(ctx context.Context, up Upload, body io.Reader) (store.Artifact, error) {
	select {
	case s.uploads <- struct{}{}:
		defer func() { <-s.uploads }()
	default:
		return store.Artifact{}, ErrBusy
	}
	used, err := s.db.RunArtifactBytes(ctx, up.RunID, up.JobName)
	if err != nil {
		return store.Artifact{}, err
	}
	bound, limit := s.cfg.MaxBytes, &LimitError{Name: "KICI_ARTIFACT_MAX_BYTES", Limit: s.cfg.MaxBytes}
	if room := s.cfg.MaxRunBytes - used; room < bound {
		bound, limit = room, &LimitError{Name: "KICI_ARTIFACT_MAX_RUN_BYTES", Limit: s.cfg.MaxRunBytes, Used: used}
	}
	if bound <= 0 || up.Size > bound {
		return store.Artifact{}, limit
	}
	id := store.NewID()
	key := fmt.Sprintf("artifacts/%s/%s.tgz", up.RunID, id)
	files, info, err := s.put(ctx, key, body, bound, up.SHA256)
	if err != nil {
		if errors.Is(err, blobs.ErrTooLarge) {
			return store.Artifact{}, limit
		}
		return store.Artifact{}, err
	}
	a := store.Artifact{ID: id, RunID: up.RunID, JobID: up.JobID, JobName: up.JobName, BlobKey: key,
		Size: info.Size, SHA256: info.SHA256, CreatedAt: s.cfg.Now()}
	for _, f := range files {
		a.Files = append(a.Files, store.ArtifactFile{Path: f.Path, Size: f.Size})
		a.ContentBytes += f.Size
	}
	a.FileCount = len(a.Files)
	if up.Expire > 0 {
		exp := a.CreatedAt.Add(up.Expire)
		a.ExpiresAt = &exp
	}
	replaced, err := s.db.PutArtifact(ctx, a)
	if err != nil {
		s.deleteBlob(key)
		return store.Artifact{}, err
	}
	if replaced != "" {
		s.deleteBlob(replaced)
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.ArtifactStored(info.Size)
	}
	return a, nil
}

// put stores body under key while listing its bundle: both read the same
// bytes once. A bundle that is not a valid artifact bundle is not kept.
func (s *Service) put(ctx context.Context, key string, body io.Reader, limit int64, sha string) ([]bundle.File, blobs.Info, error) {
	pr, pw := io.Pipe()
	type listed struct {
		files []bundle.File
		err   error
	}
	done := make(chan listed, 1)
	go func() {
		files, _, err := bundle.List(pr, bundle.ArtifactLimits, false)
		if err != nil {
			pr.CloseWithError(fmt.Errorf("%w: %w", ErrBadBundle, err))
		} else {
			_, _ = io.Copy(io.Discard, pr) // anything after the bundle still counts for the digest
		}
		done <- listed{files, err}
	}()
	info, err := s.blobs.Put(ctx, key, io.TeeReader(body, pw), limit, sha)
	pw.CloseWithError(err)
	l := <-done
	switch {
	case l.err != nil:
		if err == nil {
			s.deleteBlob(key)
		}
		return nil, blobs.Info{}, fmt.Errorf("%w: %w", ErrBadBundle, l.err)
	case err != nil:
		return nil, blobs.Info{}, err
	}
	return l.files, info, nil
}

// Open returns a reader of a's bundle that fails at its end if the bytes
// read are not the ones uploaded (blobs.ErrDigestMismatch).
func (s *Service) Open(ctx context.Context, a store.Artifact) (io.ReadCloser, error) {
	rc, _, err := s.blobs.Open(ctx, a.BlobKey)
	if err != nil {
		return nil, err
	}
	return blobs.Verify(rc, a.SHA256), nil
}

// deleteBlob deletes a blob no row names; a failure leaves it to the
// sweep's orphan collection.
func (s *Service) deleteBlob(key string) {
	if err := s.blobs.Delete(context.Background(), key); err != nil {
		s.log.Warn("delete artifact blob", "key", key, "error", err)
	}
}

// SweepStats count what a sweep deleted.
type SweepStats struct {
	// Artifacts are the rows (with their blobs) of expired artifacts and
	// of artifacts of deleted runs.
	Artifacts int
	// Orphans are blobs without a row.
	Orphans int
}

// Sweep deletes the artifacts that expired before now and those whose
// run no longer exists, each row before its blob, then the artifact blobs
// older than an hour that no row names (left by a crash between a blob's
// write and its row's, or by a failed delete).
func (s *Service) Sweep(ctx context.Context, now time.Time) (SweepStats, error) {
	var st SweepStats
	for {
		list, err := s.db.SweepableArtifacts(ctx, now, sweepBatch)
		if err != nil {
			return st, err
		}
		for _, a := range list {
			if err := s.db.DeleteArtifact(ctx, a.ID); err != nil {
				return st, err
			}
			if err := s.blobs.Delete(ctx, a.BlobKey); err != nil {
				return st, err
			}
			st.Artifacts++
		}
		if len(list) < sweepBatch {
			break
		}
	}
	n, err := blobs.CollectOrphans(ctx, s.blobs, "artifacts/", now.Add(-orphanGrace), s.db.ArtifactBlobKeys)
	st.Orphans = n
	return st, err
}
