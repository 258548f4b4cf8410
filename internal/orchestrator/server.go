package orchestrator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/agentws"
	"github.com/kici-dev/kici/internal/api"
	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/archivecache"
	"github.com/kici-dev/kici/internal/auth"
	"github.com/kici-dev/kici/internal/checks"
	"github.com/kici-dev/kici/internal/cluster/coordinator"
	"github.com/kici-dev/kici/internal/cluster/events"
	"github.com/kici-dev/kici/internal/cluster/join"
	"github.com/kici-dev/kici/internal/cluster/leader"
	"github.com/kici-dev/kici/internal/dispatch"
	"github.com/kici-dev/kici/internal/logs"
	"github.com/kici-dev/kici/internal/metrics"
	"github.com/kici-dev/kici/internal/pipeline"
	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/runstate"
	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scheduler"
	"github.com/kici-dev/kici/internal/schedules"
	"github.com/kici-dev/kici/internal/secrets"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/web"
	"github.com/kici-dev/kici/internal/workflow"
)

// Server is one orchestrator process.
type Server struct {
	log     *slog.Logger
	cfg     Config
	db      *store.DB
	logs    *logs.Store
	audit   *auth.AuditLog // closed, writing what is queued, before the database
	sched   *scheduler.Scheduler
	disp    *dispatch.Dispatcher
	api     *api.Server
	ws      *agentws.Handler
	metrics *metrics.Registry
	scalers *scalers
	secrets *secrets.Service
	checks  *checks.Reporter // nil when runs are not reported to GitHub
	// relay sends status events to the other coordinators and delivers
	// theirs; nil unless a coordinator.
	relay *events.Relay
	// hub serves the workers' channels; nil unless a coordinator.
	hub *coordinator.Hub
	// schedules starts the runs of schedule triggers.
	schedules *schedules.Scheduler
	// pipe turns events into runs; it keeps a git process per source.
	pipe *pipeline.Pipeline
	// storage keeps jobs' artifacts and caches (storage.go).
	storage storage
	ln      net.Listener

	// lock is the held data dir lock; self is this process in the
	// database's instance table, where it is registered (on PostgreSQL)
	// when registered is true.
	lock        *dataDirLock
	self        store.Instance
	registered  bool
	releaseOnce sync.Once
	releaseErr  error
}

// New locks the data directory, opens the store (migrating it to the
// latest schema), claims the database (see claim), builds every component
// and binds the listen address, so that Addr is known before Run. Close
// releases what New opened if Run is never called.
//
// When another orchestrator holds the data directory, New fails at once
// with a *DataDirInUseError, before opening the database; when another
// one holds the PostgreSQL database, with a *store.InstanceConflictError,
// before reading or changing any job. Either names the live orchestrator.
func New(ctx context.Context, logger *slog.Logger, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir %q: %w", cfg.DataDir, err)
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	s := &Server{log: logger, cfg: cfg, lock: lock}
	if err := s.describe(); err != nil {
		lock.release()
		return nil, err
	}
	ownerOnlyDataDir(logger, cfg.DataDir)
	if s.db, err = store.Open(ctx, store.Config{DataDir: cfg.DataDir, DatabaseURL: cfg.DatabaseURL, Logger: logger}); err != nil {
		lock.release()
		return nil, err
	}
	if err := s.build(ctx); err != nil {
		if s.ln != nil {
			s.ln.Close()
		}
		_ = s.release() // the build error is what matters
		return nil, err
	}
	return s, nil
}

func (s *Server) build(ctx context.Context) error {
	if err := s.db.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate database: %w", err)
	}
	if err := s.claim(ctx); err != nil {
		return err
	}
	logCfg := logs.Config{Dir: filepath.Join(s.cfg.DataDir, "logs")}
	if s.cfg.ClusterRole == RoleCoordinator {
		// Every coordinator reads and follows every log, and a log
		// outlives the coordinator that received it.
		logCfg.DB = s.db
	}
	logStore, err := logs.New(s.log, logCfg)
	if err != nil {
		return err
	}
	s.logs = logStore
	tokens, err := auth.LoadJobTokens(s.cfg.DataDir)
	if err != nil {
		return err
	}
	secretStore, err := secrets.Open(ctx, s.log, s.db, secrets.KeyConfig{
		Env: s.cfg.SecretKey, DataDir: s.cfg.DataDir, Generate: s.cfg.DatabaseURL == "",
	})
	if err != nil {
		return err
	}
	s.secrets = secretStore
	if _, err := secretStore.SealStoredWebhookSecrets(ctx); err != nil {
		return err
	}
	adminTokens := auth.NewAdminTokens(s.db, auth.AdminTokensConfig{Bootstrap: s.cfg.BootstrapAdminToken})
	if err := s.warnAboutAdminAccess(ctx); err != nil {
		return err
	}
	auditLog := auth.NewAuditLog(s.log, s.db)
	s.audit = auditLog
	limit := s.cfg.AuthFailureLimit
	if limit == 0 {
		limit = DefaultAuthFailureLimit
	}
	limiter := auth.NewFailureLimiter(auth.FailureLimiterConfig{MaxFailures: limit, Window: time.Minute})
	disp := &dispatch.Ref{}
	s.metrics = metrics.New()
	s.metrics.WatchQueue(func(ctx context.Context) ([]metrics.QueueRow, error) {
		rows, err := s.db.ListQueue(ctx)
		out := make([]metrics.QueueRow, 0, len(rows))
		for _, r := range rows {
			out = append(out, metrics.QueueRow{Status: string(r.Status), Labels: r.Labels})
		}
		return out, err
	})
	if err := s.buildChecks(); err != nil {
		return err
	}
	if s.cfg.ClusterRole == RoleCoordinator {
		s.relay = events.New(s.db, s.self.ID, s.log.With("component", "events"), store.MaxNotifyPayload,
			events.Handlers{Status: s.deliverRelayed, Log: s.deliverRelayedLog})
		s.metrics.WatchClusterEvents(func() float64 { return float64(s.relay.Dropped()) })
		s.logs.OnLog(func(ev logs.Event) {
			l := ev.Log
			s.relay.PublishLog(events.LogPointer{RunID: ev.RunID, JobID: l.JobID, Step: l.Step, Attempt: l.Attempt,
				Seq: l.Seq, Cursor: l.Cursor, Next: l.Next})
		})
	}
	s.sched = scheduler.New(s.log, s.db, scheduler.Config{QueueTimeout: s.cfg.QueueTimeout, Secrets: s.secrets}, s.publisher(), disp)
	pipe := pipeline.New(s.log, s.db, s.sched, pipeline.Config{DataDir: s.cfg.DataDir, GitHubToken: s.cfg.GitHubToken, GitHubAPIURL: s.cfg.GitHubAPIURL, MaxJobsPerRun: s.cfg.MaxJobsPerRun,
		Changed: func(source string) { s.schedules.Kick(source) }})
	s.pipe = pipe
	s.schedules = schedules.New(s.log, pipe, s.db, schedules.Config{Refresh: s.cfg.ScheduleRefresh})
	var archives *archivecache.Cache
	if n := s.cfg.ArchiveCacheEntries; n > 0 {
		if archives, err = archivecache.New(filepath.Join(s.cfg.DataDir, "archive-cache"), n, s.log); err != nil {
			return err
		}
	}
	s.disp = dispatch.New(s.log, s.db, s.sched, dispatchBuilder{tokens: tokens, secrets: secretStore, publicURL: s.cfg.PublicURL,
		archives: archives, pipe: pipe, log: s.log}, logSink{s.logs}, dispatch.Config{
		Instance:           s.self.ID,
		AckTimeout:         s.cfg.DispatchAckTimeout,
		RecoveryWindow:     s.cfg.AgentRecoveryWindow,
		QueueSweepInterval: s.cfg.QueueSweepInterval,
		DefaultJobTimeout:  s.cfg.DefaultJobTimeout,
		HeartbeatInterval:  s.cfg.HeartbeatInterval(),
		Observer:           s.metrics,
	})
	disp.D = s.disp
	if err := s.disp.LoadDrains(ctx); err != nil {
		return err
	}
	s.metrics.WatchAgents(func() map[string]int {
		n := map[string]int{}
		for _, a := range s.disp.Agents() {
			n[a.Backend]++
		}
		return n
	})
	s.metrics.WatchLogs(func() metrics.LogStats {
		st := s.logs.Stats()
		return metrics.LogStats{BytesStored: st.BytesStored, ChunksStored: st.ChunksStored}
	})
	ws := agentws.New(s.log, s.disp, s.db, auditLog, agentws.Config{NoAuth: s.cfg.AgentAuth == "none", TrustedProxies: s.cfg.TrustedProxies})
	s.ws = ws
	// Listen before the scalers start: a firecracker guest's default
	// orchestrator URL needs the port (connections wait in the backlog
	// until Serve).
	s.ln, err = net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.HTTPAddr, err)
	}
	if err := s.startScalers(ctx); err != nil {
		return err
	}
	apiCfg := api.Config{AdminTokens: adminTokens, Audit: auditLog, Limiter: limiter, Secrets: secretStore, Metrics: s.metrics, Diagnoser: s,
		TrustedProxies: s.cfg.TrustedProxies, AllowFileGitURLs: s.cfg.AllowFileGitURLs}
	apiCfg.Archives = archives
	if err := s.buildStorage(ctx, &apiCfg); err != nil {
		return err
	}
	if s.scalers != nil {
		apiCfg.Scalers = s.scalers
	}
	apiCfg.Schedules = s.schedules
	apiCfg.Peers = s
	if s.cfg.ClusterRole == RoleCoordinator {
		// Workers join a cluster through its coordinators only.
		apiCfg.Join = join.New(s.db, secretStore, s.log.With("component", "join"))
		counters := s.metrics.WatchClusterWorkers(metrics.ClusterWorkers{
			Connected:   func() int { return len(s.hub.Connected()) },
			OutboxDepth: s.workerOutboxDepths,
		})
		s.hub = coordinator.New(coordinator.Config{SelfID: s.self.ID, CA: apiCfg.Join, Workers: s.db, Joiner: apiCfg.Join,
			Agents: func(ctx context.Context, st coordinator.AgentStream, authorization, client, node string, authorized func(error)) error {
				return ws.ServeRelayed(ctx, st, authorization, client, node, authorized)
			},
			Scalers: scalerReports{s: s, counters: counters},
			Log:     s.log.With("component", "peers")})
		apiCfg.Peer = s.hub
		// Queued jobs this coordinator's scalers cannot serve go to the
		// scalers of its workers.
		var local *scaler.Manager
		if s.scalers != nil {
			local = s.scalers.manager
		}
		s.disp.SetScaler(newClusterScaler(local, s.hub, s.disp, s.log.With("component", "cluster-scaler"), counters))
		apiCfg.NodeScalers = clusterNodes{s}
	}
	s.api = api.New(s.log, s.db, pipe, s.disp, s.logs, tokens, ws, apiCfg)
	dash, err := web.New(web.Config{API: s.api, Tokens: adminTokens, Sessions: s.db, Log: s.log.With("component", "dashboard"),
		PublicURL: s.cfg.PublicURL, SecureCookie: strings.HasPrefix(s.cfg.PublicURL, "https://")})
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	s.api.Mount(web.Routes, dash)
	return nil
}

// warnAboutAdminAccess says how to get in when no admin token can work,
// and warns about a weak bootstrap token.
func (s *Server) warnAboutAdminAccess(ctx context.Context) error {
	if b := s.cfg.BootstrapAdminToken; b != "" {
		if len(b) < 16 {
			s.log.Warn("KICI_BOOTSTRAP_ADMIN_TOKEN is short; use at least 16 random characters (e.g. `openssl rand -hex 32`)")
		}
		return nil
	}
	list, err := s.db.ListAdminTokens(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	for _, t := range list {
		if t.RevokedAt == nil && (t.ExpiresAt == nil || t.ExpiresAt.After(now)) {
			return nil
		}
	}
	s.log.Warn("no admin token can use the API: set KICI_BOOTSTRAP_ADMIN_TOKEN, restart, and create named tokens with `kici-admin tokens create` (see docs/operations.md)")
	return nil
}

// HeartbeatInterval is what agents are told to use: a third of the
// recovery window or 30 s, whichever is smaller, so a lost agent is noticed
// well within the window.
func (c *Config) HeartbeatInterval() time.Duration {
	return max(min(protocol.DefaultHeartbeatInterval, c.AgentRecoveryWindow/3), 50*time.Millisecond)
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close releases the listener, the store, the instance registration and
// the data dir lock; Run does this itself.
func (s *Server) Close() error {
	s.ln.Close()
	if s.scalers != nil {
		_ = s.scalers.manager.Close(context.Background())
	}
	return s.release()
}

// Run recovers the previous process's state and serves until ctx ends.
// It returns early with an error if another orchestrator takes the
// database over (see keepInstance).
func (s *Server) Run(ctx context.Context) error {
	defer s.release()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 3)
	if s.registered {
		// The heartbeat starts before recovery, which may take longer
		// than the instance's TTL.
		hbCtx, stopHeartbeat := context.WithCancel(ctx)
		hbDone := make(chan struct{})
		go func() {
			defer close(hbDone)
			if err := s.keepInstance(hbCtx); err != nil {
				errc <- err
			}
		}()
		defer func() { stopHeartbeat(); <-hbDone }()
	}
	if err := s.recover(ctx); err != nil {
		s.ln.Close()
		return fmt.Errorf("recover state: %w", err)
	}
	srv := &http.Server{Handler: s.api, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	// Every background goroutine is waited for before Run returns (and the
	// deferred Close of the database runs): one still running would use a
	// closed database, and log after its caller has gone.
	var bg sync.WaitGroup
	duty, err := s.singletonDuties(ctx, &bg)
	if err != nil {
		s.ln.Close()
		return err
	}
	bg.Go(func() { errc <- s.disp.Run(ctx) })
	bg.Go(func() { s.sched.RunConcurrency(ctx) }) // every instance settles the groups its changes touch
	bg.Go(func() { duty(s.disp.RunSingletonSweeps) })
	if s.relay != nil {
		bg.Go(func() { _ = s.relay.Run(ctx) }) // it logs its own failures
	}
	bg.Go(func() { duty(s.purgeDeliveries) })
	bg.Go(func() { duty(s.retain) })
	bg.Go(func() { s.sweepStorage(ctx) })      // every instance (see sweepStorage)
	bg.Go(func() { _ = s.schedules.Run(ctx) }) // it logs its own failures
	if s.checks != nil {
		// Every coordinator reports: each one's reporter is told of the
		// changes it makes (the runs its agents advance), which the
		// leader's would not hear of.
		bg.Go(func() { _ = s.checks.Run(ctx) }) // it logs its own failures
	}
	if s.scalers != nil {
		bg.Go(func() { s.scalers.reloadOnSIGHUP(ctx) })
		bg.Go(func() { _ = s.scalers.manager.Run(ctx) })
		defer func() {
			closeCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer stop()
			s.scalers.waitReaps(closeCtx)
			if err := s.scalers.manager.Close(closeCtx); err != nil {
				s.log.Warn("scaler shutdown", "error", err)
			}
			s.scalers.stopBG()
		}()
	}
	go func() {
		err := srv.Serve(s.ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		errc <- err
	}()
	s.log.Info("orchestrator listening", "addr", s.ln.Addr().String(), "public_url", s.cfg.PublicURL, "database", s.db.Dialect())
	var first error
	select {
	case <-ctx.Done():
	case first = <-errc:
		cancel()
	}
	shutdownCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer stop()
	err = srv.Shutdown(shutdownCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close() // long-lived SSE connections
	}
	// Shutdown neither closes nor waits for WebSocket connections.
	if werr := s.ws.Close(shutdownCtx); werr != nil {
		s.log.Warn("closing agent connections", "error", werr)
	}
	if s.hub != nil {
		s.hub.Close(shutdownCtx)
	}
	cancel()
	bg.Wait()
	return errors.Join(first, err)
}

// purgeDeliveries deletes expired webhook delivery ids every hour, so a
// redelivery after the 24 h dedup window is processed again.
func (s *Server) purgeDeliveries(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		n, err := s.db.PurgeExpiredDeliveries(ctx, time.Now())
		if ctx.Err() == nil {
			s.metrics.JobRan(metrics.JobCleanup, time.Now(), err)
		}
		if err != nil && ctx.Err() == nil {
			s.log.Error("purge expired deliveries failed", "error", err)
		} else if n > 0 {
			s.log.Info("expired deliveries purged", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// singletonDuties returns how this process runs a duty that one
// orchestrator of the database must run at a time. Standalone, it runs
// the duty until ctx ends. As a coordinator it starts the leader
// election (stopped with ctx, waited for by bg) and runs the duty each
// time this process leads, with a context that ends when it stops leading
// and whose transactions are fenced by the lease: a leader deposed
// without noticing writes nothing.
func (s *Server) singletonDuties(ctx context.Context, bg *sync.WaitGroup) (func(func(context.Context)), error) {
	if s.cfg.ClusterRole != RoleCoordinator {
		s.metrics.ClusterLeader.Set(1)
		return func(duty func(context.Context)) { duty(ctx) }, nil
	}
	e, err := leader.New(leader.Config{
		Leases: s.db, Holder: s.self.ID, TTL: s.cfg.LeaderLeaseTTL, Renew: s.cfg.LeaderLeaseRenew,
		Log: s.log.With("component", "leader"),
	})
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	bg.Go(func() { e.Run(ctx) })
	bg.Go(func() {
		e.WhileLeader(ctx, func(ctx context.Context) {
			term, _ := e.Acting()
			s.metrics.ClusterLeader.Set(1)
			s.metrics.ClusterLeaderTerm.Set(float64(term))
			<-ctx.Done()
			s.metrics.ClusterLeader.Set(0)
			s.metrics.ClusterLeaderTerm.Set(0)
		})
	})
	return func(duty func(context.Context)) {
		e.WhileLeader(ctx, func(ctx context.Context) { duty(store.WithFence(ctx, e.Fence)) })
	}, nil
}

// retainBatch is how many runs one retention transaction deletes.
const retainBatch = 500

// retain applies the retention settings now and then every
// RetentionSweepInterval, until ctx ends.
func (s *Server) retain(ctx context.Context) {
	if s.cfg.RunRetention <= 0 && s.cfg.AuditRetention <= 0 && s.cfg.WebhookEventRetention <= 0 {
		return
	}
	interval := s.cfg.RetentionSweepInterval
	if interval <= 0 {
		interval = DefaultRetentionSweep
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.retainOnce(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// retainOnce deletes what the retention settings say is too old at now:
// finished runs in batches (each batch's rows first, in one transaction,
// then its log files), audit entries and webhook events.
func (s *Server) retainOnce(ctx context.Context, now time.Time) {
	count := func(kind string, n int) {
		if s.metrics != nil && n > 0 {
			s.metrics.RetentionDeleted.WithLabelValues(kind).Add(float64(n))
		}
	}
	var failed error // the tick's first failure, for kici_orch_job_runs_total
	defer func() {
		if ctx.Err() == nil {
			s.metrics.JobRan(metrics.JobRetention, time.Now(), failed)
		}
	}()
	if keep := s.cfg.RunRetention; keep > 0 {
		total := 0
		for ctx.Err() == nil {
			ids, err := s.db.DeleteRunsFinishedBefore(ctx, now.Add(-keep), retainBatch)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Error("retention: delete finished runs failed", "error", err)
					failed = cmp.Or(failed, err)
				}
				break
			}
			for _, id := range ids {
				if err := s.logs.RemoveRun(ctx, id); err != nil {
					s.log.Warn("retention: remove a deleted run's logs failed", "run_id", id, "error", err)
				}
			}
			total += len(ids)
			count("runs", len(ids))
			if len(ids) < retainBatch {
				break
			}
		}
		if total > 0 {
			s.log.Info("retention: finished runs deleted", "count", total, "ended_before", now.Add(-keep).UTC().Format(time.RFC3339))
		}
	}
	for _, r := range []struct {
		kind string
		keep time.Duration
		del  func(context.Context, time.Time) (int64, error)
	}{
		{"audit_entries", s.cfg.AuditRetention, s.db.DeleteAuditBefore},
		{"webhook_events", s.cfg.WebhookEventRetention, s.db.DeleteWebhookEventsBefore},
	} {
		if r.keep <= 0 {
			continue
		}
		n, err := r.del(ctx, now.Add(-r.keep))
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("retention: delete failed", "kind", r.kind, "error", err)
				failed = cmp.Or(failed, err)
			}
			continue
		}
		count(r.kind, int(n))
		if n > 0 {
			s.log.Info("retention: deleted", "kind", r.kind, "count", n, "older_than", now.Add(-r.keep).UTC().Format(time.RFC3339))
		}
	}
}

// recover picks up where a previous process stopped. A standalone
// orchestrator owns its database alone, so every job a previous process
// had handed to agents (acknowledged or not) is now its own, and waits the
// recovery window for its agent to come back. A coordinator leaves that
// to the leader, which takes over the dispatches of departed coordinators
// only (RunSingletonSweeps). Then every unfinished run is advanced
// (upstreams may have finished while no orchestrator was watching).
func (s *Server) recover(ctx context.Context) error {
	if s.cfg.ClusterRole != RoleCoordinator {
		if _, err := s.disp.TakeOverOrphans(ctx); err != nil {
			return err
		}
	}
	for _, st := range []store.RunStatus{store.RunPending, store.RunRunning} {
		runs, err := s.db.ListRuns(ctx, store.RunFilter{Status: st, Limit: 100000})
		if err != nil {
			return err
		}
		for _, r := range runs {
			if err := s.sched.Advance(ctx, r.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// hubPublisher sends status events to the live event hub, counts the
// runs and jobs that end, and tells the GitHub check run reporter (when
// there is one) of every run's change.
type hubPublisher struct {
	logs    *logs.Store
	metrics *metrics.Registry
	checks  *checks.Reporter
	relay   *events.Relay // nil unless a coordinator
}

// publisher is the hubPublisher of this server.
func (s *Server) publisher() hubPublisher {
	return hubPublisher{logs: s.logs, metrics: s.metrics, checks: s.checks, relay: s.relay}
}

// deliverRelayed publishes, to this coordinator's followers, an event that
// another coordinator published: it was counted and reported there.
func (s *Server) deliverRelayed(ev apiv1.Event) {
	data, err := json.Marshal(ev)
	if err != nil {
		return
	}
	s.logs.Publish(logs.Event{RunID: ev.RunID, Kind: logs.EventStatus, Data: data})
}

// deliverRelayedLog publishes, to this coordinator's followers, the lines
// of a log chunk another coordinator stored, read from the shared store.
func (s *Server) deliverRelayedLog(p events.LogPointer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := logs.StepKey{RunID: p.RunID, JobID: p.JobID, Step: p.Step, Attempt: p.Attempt}
	if err := s.logs.PublishStored(ctx, key, p.Seq, p.Cursor, p.Next); err != nil {
		// The followers see a gap in the cursors and read it from the API.
		s.log.Debug("relayed log chunk not published", "run_id", p.RunID, "job_id", p.JobID, "error", err)
	}
}

func (p hubPublisher) Publish(ev apiv1.Event) {
	if p.relay != nil {
		p.relay.Publish(ev)
	}
	if ev.Kind == "run" && p.checks != nil {
		p.checks.Notify(ev.RunID)
	}
	switch {
	case ev.Kind == "run" && runstate.RunTerminal(store.RunStatus(ev.Status)):
		p.metrics.RunEnded(ev.Status)
	case ev.Kind == "job" && runstate.JobTerminal(store.JobStatus(ev.Status)):
		p.metrics.JobEnded(ev.Status)
	case ev.Kind == "step" && runstate.StepTerminal(store.StepStatus(ev.Status)):
		p.metrics.StepEnded(ev.Status)
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return
	}
	p.logs.Publish(logs.Event{RunID: ev.RunID, Kind: logs.EventStatus, Data: data})
}

// logSink stores agents' log chunks.
type logSink struct{ logs *logs.Store }

func (l logSink) AppendLog(ctx context.Context, runID, jobID string, attempt, step int, seq uint64, lines []protocol.LogLine) error {
	_, err := l.logs.Append(ctx, logs.StepKey{RunID: runID, JobID: jobID, Step: step, Attempt: attempt}, seq, lines)
	return err
}

// WriteLogs writes several chunks at once and returns the function that
// syncs them all (see logs.Store.WriteAll).
func (l logSink) WriteLogs(ctx context.Context, chunks []dispatch.LogAppend) func() []error {
	in := make([]logs.Chunk, len(chunks))
	for i, c := range chunks {
		in[i] = logs.Chunk{Key: logs.StepKey{RunID: c.RunID, JobID: c.JobID, Step: c.Step, Attempt: c.Attempt}, Seq: c.Seq, Lines: c.Lines}
	}
	p := l.logs.WriteAll(ctx, in)
	return func() []error {
		res := p.Sync()
		errs := make([]error, len(res))
		for i, r := range res {
			errs[i] = r.Err
		}
		return errs
	}
}

func (l logSink) PrepareLog(ctx context.Context, runID, jobID string) error {
	return l.logs.Prepare(ctx, runID, jobID)
}

// resolveSecrets returns the values of the secrets job declares (workflow
// `secrets:`), and only those of its source or of every source. A run whose
// secrets are withheld (a fork's pull request under the fork policy "run")
// gets each declared secret as the empty string, never its value, and never
// an error for one that is not set.
func (b dispatchBuilder) resolveSecrets(ctx context.Context, run store.Run, rec scheduler.Record, job store.Job) (map[string]string, error) {
	if rec.SecretsWithheld {
		if len(job.Spec.Secrets) == 0 {
			return nil, nil
		}
		out := make(map[string]string, len(job.Spec.Secrets))
		for _, name := range job.Spec.Secrets {
			out[name] = ""
		}
		return out, nil
	}
	values, err := b.secrets.Resolve(ctx, run.Source, job.Spec.Environment, job.Spec.Secrets)
	var missing *secrets.MissingError
	if errors.As(err, &missing) {
		return nil, &dispatch.UnrunnableError{Reason: missing.Error()}
	}
	return values, err
}

// inlineArchiveWait bounds how long building a dispatch waits for its
// source archive to be produced for inlining; the produce call goes on
// after that, for the agent's download to share. It is short: dispatches
// are sent one after another, and an archive that takes longer to make is
// rarely small enough to inline anyway.
const inlineArchiveWait = 100 * time.Millisecond

// dispatchBuilder fills in a dispatch: the source archive to fetch with
// the job token (or the archive itself, when small), run metadata, and the
// secrets the job declares.
type dispatchBuilder struct {
	tokens    *auth.JobTokens
	secrets   *secrets.Service
	publicURL string
	// archives, if not nil, is the archive cache the API serves archives
	// from; the builder inlines small ones from it.
	archives *archivecache.Cache
	pipe     *pipeline.Pipeline
	log      *slog.Logger
}

func (b dispatchBuilder) BuildDispatch(ctx context.Context, run store.Run, job store.Job, attempt int) (*protocol.JobDispatch, error) {
	rec, err := scheduler.DecodeRecord(run.Event)
	if err != nil {
		return nil, err
	}
	vars, inputs := rec.Vars(), rec.ResolvedInputs
	values, err := b.resolveSecrets(ctx, run, rec, job)
	if err != nil {
		return nil, err
	}
	d := &protocol.JobDispatch{
		Event: &vars, Inputs: inputs, EventEnv: workflow.RuntimeEnv(vars, inputs),
		JobID: job.ID, RunID: run.ID, Attempt: attempt, Job: job.Spec,
		Source: protocol.Source{
			Kind:       protocol.SourceArchive,
			ArchiveURL: fmt.Sprintf("/api/v1/sources/%s/archive/%s", run.Source, run.SHA),
			SHA:        run.SHA, Ref: run.Ref,
		},
		Env: map[string]string{
			"KICI_RUN_ID": run.ID, "KICI_JOB_ID": job.ID, "KICI_JOB_NAME": job.Name,
			"KICI_WORKFLOW": run.Workflow, "KICI_SOURCE": run.Source, "KICI_SHA": run.SHA,
			"KICI_URL": b.publicURL, "CI": "true",
		},
		JobToken:  b.tokens.Mint(job.ID, attempt),
		TimeoutMS: job.Spec.TimeoutMS,
		Secrets:   values,
		Masks:     secrets.Masks(values),
	}
	if b.archives != nil && dispatch.AgentSupports(ctx, protocol.FeatureArchiveInline) {
		b.inlineArchive(ctx, run, d)
	}
	return d, nil
}

// inlineArchive puts the run's source archive in d if the archive cache has
// it or produces it within inlineArchiveWait and it is small enough
// (protocol.MaxInlineArchiveBytes); otherwise d keeps only its ArchiveURL,
// which the agent fetches. It reads through the cache, so the dispatches
// and downloads of one commit share one produce call.
func (b dispatchBuilder) inlineArchive(ctx context.Context, run store.Run, d *protocol.JobDispatch) {
	ctx, cancel := context.WithTimeout(ctx, inlineArchiveWait)
	defer cancel()
	produce := func(ctx context.Context, w io.Writer) error {
		_, src, err := b.pipe.Source(ctx, run.Source)
		if err != nil {
			return err
		}
		return src.Archive(ctx, run.SHA, w)
	}
	data, ok, err := b.archives.Bytes(ctx, run.Source, run.SHA, protocol.MaxInlineArchiveBytes, produce)
	switch {
	case err != nil:
		b.log.Debug("archive not inlined", "job_id", d.JobID, "source", run.Source, "sha", run.SHA, "error", err)
	case !ok:
		b.log.Debug("archive not inlined: too large", "job_id", d.JobID, "source", run.Source, "sha", run.SHA)
	case !d.InlineArchive(data):
		b.log.Debug("archive not inlined: the dispatch would be too large", "job_id", d.JobID, "bytes", len(data))
	}
}
