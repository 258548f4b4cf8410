package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kici-dev/kici/internal/store"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

const envHelp = `Environment (defaults in brackets):
  KICI_HTTP_ADDR                 listen address [:4000]
  KICI_PUBLIC_URL                base URL agents and links use [http://127.0.0.1:4000]
  KICI_DATA_DIR                  SQLite file, logs, keys [./.kici-data]
  KICI_DATABASE_URL              postgres://... to use PostgreSQL [empty: SQLite in the data dir]
  KICI_SECRET_KEY                64 hex digits sealing secrets [generated into the data dir; required with PostgreSQL]
  KICI_BOOTSTRAP_ADMIN_TOKEN     accepted as an owner token, for first set-up [unset]
  KICI_AUTH_FAILURE_LIMIT        failed authentications per client address per minute before 429s [20; <0 = none]
  KICI_QUEUE_TIMEOUT_MS          fail a queued job after this wait; 0 = never [3600000]
  KICI_QUEUE_SWEEP_INTERVAL_MS   how often expired queue rows are swept [60000]
  KICI_DISPATCH_ACK_TIMEOUT_MS   an agent must ack a dispatch within this [10000]
  KICI_AGENT_RECOVERY_WINDOW_MS  how long a job waits for its disconnected agent [120000]
  KICI_AGENT_AUTH                token, or none (loopback only) [token]
  KICI_DEFAULT_JOB_TIMEOUT_MS    limit of jobs whose workflow sets none [21600000]
  KICI_CANCEL_GRACE_MS           SIGTERM-to-SIGKILL grace on cancel [10000]
  KICI_INSTANCE_HEARTBEAT_MS     PostgreSQL: how often this orchestrator renews its instance row; it counts as live for 5 of these [2000]
  KICI_CLUSTER_ROLE              standalone (owns its database alone) or coordinator (shares PostgreSQL with other coordinators) [standalone]
  KICI_SCHEDULE_REFRESH_MS       how often sources' default branches are read again for schedule triggers, besides after pushes [300000]
  KICI_RUN_RETENTION_DAYS        delete finished runs, their jobs and logs this many days after they ended; 0 = keep [0]
  KICI_AUDIT_RETENTION_DAYS      delete audit entries this many days old; 0 = keep [0]
  KICI_WEBHOOK_EVENT_RETENTION_DAYS  delete recorded webhook deliveries this many days old; 0 = keep [0]
  KICI_RETENTION_SWEEP_INTERVAL_MS   how often retention runs [3600000]
  KICI_TRUSTED_PROXIES           reverse proxies (IPs, CIDRs) whose X-Forwarded-For names the client [none]
  KICI_GIT_ALLOW_FILE_URLS       let git sources use file:// URLs (read this host's disk) [false]
  KICI_ARCHIVE_CACHE_ENTRIES     source archives (per source and commit) kept for agents to download; 0 = none [8]
  KICI_MAX_JOBS_PER_RUN          most jobs one run may have, matrix included; a workflow over it starts no run [1000]
  KICI_GITHUB_TOKEN, KICI_GITHUB_API_URL   credentials and API base of github sources, and of check run reports [API: https://api.github.com]
  KICI_GITHUB_APP_ID, KICI_GITHUB_APP_KEY_FILE  report check runs as this GitHub App, with its private key (PEM) [unset: KICI_GITHUB_TOKEN]
  KICI_LOG_LEVEL, KICI_LOG_FORMAT          debug|info|warn|error [info]; text|json [text on a TTY, else json]`

// Main runs the kici-orchestrator command and returns its exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:   "kici-orchestrator",
		Short: "The kici server: API, webhooks, scheduler, dispatcher and agent endpoint",
		Long: `kici-orchestrator runs kici's server. Without a subcommand it serves
(the same as "serve").

` + envHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE:          func(cmd *cobra.Command, args []string) error { return serve(cmd.Context(), stderr) },
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(&cobra.Command{
		Use:   "serve",
		Short: "Serve the API, webhooks and agents until SIGINT or SIGTERM",
		Long:  "Serve the API, webhooks and agents until SIGINT or SIGTERM.\n\n" + envHelp,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return serve(cmd.Context(), stderr) },
	}, &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending database migrations and exit",
		Long:  "Apply pending database migrations to the configured database (SQLite in KICI_DATA_DIR, or KICI_DATABASE_URL) and exit.\nWith SQLite it refuses to run while an orchestrator uses the data directory.",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return migrate(cmd.Context(), stdout, stderr) },
	}, newDemoCmd(stdout, stderr))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "kici-orchestrator: %v\n", err)
		if strings.Contains(err.Error(), "unknown command") || strings.Contains(err.Error(), "unknown flag") {
			return 2
		}
		return 1
	}
	return 0
}

// newLogger builds the process logger from KICI_LOG_LEVEL/KICI_LOG_FORMAT.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("KICI_LOG_LEVEL=%q: want debug, info, warn or error", level)
	}
	if format == "" {
		format = "json"
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			format = "text"
		}
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("KICI_LOG_FORMAT=%q: want text or json", format)
}

func loadConfig(stderr io.Writer) (Config, *slog.Logger, error) {
	cfg, warnings, err := ConfigFromEnv(os.Getenv, os.Environ())
	if err != nil {
		return Config{}, nil, err
	}
	logger, err := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		return Config{}, nil, err
	}
	for _, w := range warnings {
		logger.Warn(w)
	}
	return cfg, logger, nil
}

func serve(ctx context.Context, stderr io.Writer) error {
	cfg, logger, err := loadConfig(stderr)
	if err != nil {
		return err
	}
	if cfg.ClusterRole == RoleWorker {
		err := runWorker(ctx, logger, cfg)
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		return err
	}
	srv, err := New(ctx, logger, cfg)
	if err != nil {
		return err
	}
	err = srv.Run(ctx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

func migrate(ctx context.Context, stdout, stderr io.Writer) error {
	cfg, logger, err := loadConfig(stderr)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir %q: %w", cfg.DataDir, err)
	}
	if cfg.DatabaseURL == "" {
		// A live orchestrator owns the SQLite file: do not change its
		// schema under it.
		lock, err := lockDataDir(cfg.DataDir)
		if err != nil {
			return err
		}
		defer lock.release()
		host, _ := os.Hostname()
		if err := lock.record(lockHolder{Command: "kici-orchestrator migrate", PID: os.Getpid(), Hostname: host, StartedAt: time.Now().UTC()}); err != nil {
			return err
		}
	}
	db, err := store.Open(ctx, store.Config{DataDir: cfg.DataDir, DatabaseURL: cfg.DatabaseURL, Logger: logger})
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		return err
	}
	st, err := db.MigrationStatus(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "database (%s) at migration %d of %d\n", db.Dialect(), st.Current, st.Head)
	return nil
}
