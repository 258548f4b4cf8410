package checks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/store"
)

// DefaultAPIURL is GitHub's REST API.
const DefaultAPIURL = "https://api.github.com"

// Config configures a Reporter. Set Token, or AppID and AppKey.
type Config struct {
	// APIURL is the GitHub REST API's base URL; empty means
	// DefaultAPIURL. GitHub Enterprise Server's is https://HOST/api/v3.
	APIURL string
	// Token authenticates the reports (a personal access token or any
	// token with checks:write); ignored when AppID is set.
	Token string
	// AppID and AppKey (its private key, PEM) authenticate as a GitHub
	// App: each repository's installation token is fetched and cached
	// until shortly before it expires. Zero AppID means token auth.
	AppID  int64
	AppKey []byte
	// PublicURL is kici's base URL; a check run's details_url is
	// PublicURL/runs/ID. Empty leaves details_url out.
	PublicURL string
	// HTTPClient makes the API calls; nil means one with a 30 s timeout.
	HTTPClient *http.Client
	// Now is the clock of due times and back-off; nil means time.Now.
	Now func() time.Time
	// PollInterval is the longest Run waits without being woken; zero
	// means a minute.
	PollInterval time.Duration
}

// Validate reports the first invalid field of cfg.
func (cfg Config) Validate() error {
	if cfg.AppID < 0 {
		return fmt.Errorf("github checks config: AppID: got %d, want a GitHub App id", cfg.AppID)
	}
	if cfg.AppID > 0 && len(cfg.AppKey) == 0 {
		return errors.New("github checks config: AppKey: required with AppID")
	}
	if cfg.AppID == 0 && cfg.Token == "" {
		return errors.New("github checks config: Token: required without AppID")
	}
	if cfg.PollInterval < 0 {
		return fmt.Errorf("github checks config: PollInterval: got %s, want zero or more", cfg.PollInterval)
	}
	return nil
}

// reportStore is what the reporter reads and writes; *store.DB is one.
type reportStore interface {
	GetRun(ctx context.Context, id string) (store.Run, error)
	GetRunHead(ctx context.Context, id string) (store.Run, error)
	GetSource(ctx context.Context, name string) (store.Source, error)
	ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error)
	EnqueueCheckReport(ctx context.Context, runID, repo string, desired store.CheckState, now time.Time) error
	DueCheckReports(ctx context.Context, now time.Time, limit int) ([]store.CheckReport, error)
	NextCheckReportAt(ctx context.Context) (time.Time, bool, error)
	RecordCheckReport(ctx context.Context, runID string, checkRunID int64, reported store.CheckState, now time.Time) error
	FailCheckReport(ctx context.Context, runID, msg string, next time.Time, giveUp bool, now time.Time) error
}

// storeRetry is the least Run waits after the store failed.
const storeRetry = time.Second

// dueBatch is how many due reports one pass sends.
const dueBatch = 100

// maxPendingNotes bounds the run ids waiting for Run to enqueue them;
// past it, notes are dropped (the run's next change, or the next start's
// sweep, enqueues it).
const maxPendingNotes = 100_000

// Reporter reports runs to GitHub as check runs; see the package doc.
type Reporter struct {
	log     *slog.Logger
	db      reportStore
	cfg     Config
	now     func() time.Time
	clients *clients

	mu      sync.Mutex
	pending map[string]struct{}
	wake    chan struct{}
}

// New returns a reporter, or an error naming the invalid field of cfg.
func New(logger *slog.Logger, db reportStore, cfg Config) (*Reporter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	c, err := newClients(cfg, now)
	if err != nil {
		return nil, err
	}
	return &Reporter{log: logger.With("component", "github_checks"), db: db, cfg: cfg, now: now, clients: c,
		pending: map[string]struct{}{}, wake: make(chan struct{}, 1)}, nil
}

// Notify tells the reporter that runID changed state. It never blocks:
// the run is looked at by Run's goroutine.
func (r *Reporter) Notify(runID string) {
	r.mu.Lock()
	if len(r.pending) < maxPendingNotes {
		r.pending[runID] = struct{}{}
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run reports until ctx ends. It first enqueues every unfinished run (a
// change made while no reporter ran is not lost), then enqueues what
// Notify was told and sends what is due, whenever woken or a report falls
// due. Errors of the store or of GitHub are logged, never returned: Run
// returns nil when ctx ends.
func (r *Reporter) Run(ctx context.Context) error {
	for _, st := range []store.RunStatus{store.RunAwaitingApproval, store.RunPending, store.RunRunning} {
		runs, err := r.db.ListRuns(ctx, store.RunFilter{Status: st, Limit: 1000})
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("list unfinished runs to report", "error", err)
			}
			break
		}
		for _, run := range runs {
			r.Notify(run.ID)
		}
	}
	poll := r.cfg.PollInterval
	if poll == 0 {
		poll = time.Minute
	}
	for {
		r.EnqueueNoted(ctx)
		wait := poll
		_, err := r.ReportDue(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("report due check runs", "error", err)
		}
		if at, ok, nerr := r.db.NextCheckReportAt(ctx); nerr == nil && ok {
			wait = min(wait, max(at.Sub(r.now()), 0))
		}
		if err != nil {
			wait = max(wait, storeRetry) // a failing store is not asked again at once
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-r.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// EnqueueNoted writes the desired state of every run Notify was told
// about since the last call.
func (r *Reporter) EnqueueNoted(ctx context.Context) {
	r.mu.Lock()
	ids := make([]string, 0, len(r.pending))
	for id := range r.pending {
		ids = append(ids, id)
	}
	clear(r.pending)
	r.mu.Unlock()
	for _, id := range ids {
		if err := r.enqueue(ctx, id); err != nil && ctx.Err() == nil {
			r.log.Warn("enqueue check run report", "run_id", id, "error", err)
		}
	}
}

// enqueue writes runID's desired state, if its source is tied to a GitHub
// repository.
func (r *Reporter) enqueue(ctx context.Context, runID string) error {
	run, err := r.db.GetRunHead(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	src, err := r.db.GetSource(ctx, run.Source)
	if errors.Is(err, store.ErrNotFound) {
		return nil // removed: its runs are not reported
	}
	if err != nil {
		return err
	}
	repo := src.GitHubRepository()
	if repo == "" || !commitSHA(run.SHA) {
		return nil
	}
	return r.db.EnqueueCheckReport(ctx, run.ID, repo, stateOf(run.Status), r.now())
}

// commitSHA reports whether s is a full SHA-1 commit name, the only kind
// GitHub's check runs take.
func commitSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	return strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}

// stateOf is the check run state a run's status asks for.
func stateOf(s store.RunStatus) store.CheckState {
	switch s {
	case store.RunAwaitingApproval:
		return store.CheckActionRequired
	case store.RunRunning:
		return store.CheckInProgress
	case store.RunSuccess, store.RunFailure, store.RunCancelled:
		return store.CheckCompleted
	}
	return store.CheckQueued
}

// ReportDue sends every report due now, and returns how many succeeded.
// A failed report is rescheduled; the error returned is the store's only.
func (r *Reporter) ReportDue(ctx context.Context) (int, error) {
	due, err := r.db.DueCheckReports(ctx, r.now(), dueBatch)
	if err != nil {
		return 0, err
	}
	sent := 0
	for _, row := range due {
		if ctx.Err() != nil {
			return sent, nil
		}
		err := r.report(ctx, row)
		if err == nil {
			sent++
			continue
		}
		if ctx.Err() != nil {
			return sent, nil
		}
		now := r.now()
		next, permanent := retryAfter(err, now, row.Attempts+1)
		giveUp := row.Attempts+1 >= maxAttempts || (permanent && row.Attempts+1 >= maxPermanentAttempts)
		log := r.log.With("run_id", row.RunID, "repo", row.Repo, "attempts", row.Attempts+1, "error", err)
		if giveUp {
			log.Warn("check run report given up")
		} else {
			log.Info("check run report failed; will retry", "retry_at", next.UTC().Format(time.RFC3339))
		}
		if err := r.db.FailCheckReport(ctx, row.RunID, bound(err.Error(), maxErrorLen), next, giveUp, now); err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// maxErrorLen bounds a stored report error.
const maxErrorLen = 1000

// bound cuts s to at most n bytes, on a rune boundary, marking the cut.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
