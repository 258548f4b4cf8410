package orchestrator

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agnivade/levenshtein"

	"github.com/kici-dev/kici/internal/cluster/leader"
	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/schedules"
	"github.com/kici-dev/kici/internal/secrets"
	"github.com/kici-dev/kici/internal/workflow"
)

// Config is everything the orchestrator reads from its environment. The
// zero value of a duration means "use the default" only through
// ConfigFromEnv; a Config built in code (tests) says what it means.
type Config struct {
	// HTTPAddr is the listen address of the API, webhooks, /ws and metrics.
	HTTPAddr string
	// PublicURL is the base URL agents and links use.
	PublicURL string
	// DataDir holds the SQLite file, logs, and the generated secret key.
	DataDir string
	// DatabaseURL selects PostgreSQL when set; empty means SQLite in DataDir.
	DatabaseURL string
	// BootstrapAdminToken is accepted as an owner token; empty disables it.
	BootstrapAdminToken string
	// SecretKey is the key secrets are sealed under: 64 hex digits. Empty
	// means the key file in DataDir, generated on first start, which only
	// SQLite allows (coordinators sharing PostgreSQL must share the key).
	SecretKey string
	// AuthFailureLimit is how many failed authentications a client address
	// may make within a minute; the next one blocks it for a minute (429).
	// 0 means DefaultAuthFailureLimit; a negative value disables the limit.
	AuthFailureLimit int
	// TrustedProxies are the reverse proxies (addresses or CIDR prefixes)
	// whose X-Forwarded-For header names the client; empty trusts none.
	TrustedProxies []netip.Prefix
	// AllowFileGitURLs lets a git source be added with a file:// URL, which
	// makes the orchestrator (and its agents) read a repository on their
	// own disk. Off by default: a repository on this host is a local
	// source (kind local), which names its path plainly.
	AllowFileGitURLs bool
	// RunRetention deletes finished runs (with their jobs, steps and logs)
	// this long after they ended; AuditRetention and
	// WebhookEventRetention delete audit entries and recorded webhook
	// deliveries this old. 0 keeps them forever.
	RunRetention          time.Duration
	AuditRetention        time.Duration
	WebhookEventRetention time.Duration
	// RetentionSweepInterval is how often retention runs.
	RetentionSweepInterval time.Duration
	// ArchiveCacheEntries is how many source archives (a tar.gz per source
	// and commit) are kept in DataDir/archive-cache for agents to download;
	// 0 turns the cache off.
	ArchiveCacheEntries int
	// QueueTimeout fails a job that waited this long in the queue; 0 never.
	QueueTimeout time.Duration
	// QueueSweepInterval is how often expired queue rows are swept.
	QueueSweepInterval time.Duration
	// DispatchAckTimeout is how long an agent has to ack a dispatch.
	DispatchAckTimeout time.Duration
	// AgentRecoveryWindow is how long a job waits for its disconnected agent.
	AgentRecoveryWindow time.Duration
	// AgentAuth is "token" (agents need a kat_ token) or "none" (loopback
	// development only).
	AgentAuth string
	// DefaultJobTimeout bounds jobs whose workflow sets no timeout.
	DefaultJobTimeout time.Duration
	// ScalerDeferBase and ScalerDeferMax bound how long a scaler waits
	// after a failed spawn: the base, doubling per failure in a row up to
	// the max.
	ScalerDeferBase, ScalerDeferMax time.Duration
	// CancelGrace is the time between SIGTERM and SIGKILL on a cancel.
	CancelGrace time.Duration
	// MaxJobsPerRun is the most jobs one run may have, matrix expansions
	// included; a workflow over it starts no run. 0 means
	// workflow.DefaultMaxJobsPerRun (1000).
	MaxJobsPerRun int
	// InstanceHeartbeat is how often an orchestrator on PostgreSQL renews
	// its row in the instance table; the row stays live for five of
	// these, and while it is live no second orchestrator starts on the
	// database. 0 means DefaultInstanceHeartbeat.
	InstanceHeartbeat time.Duration
	// ClusterRole is RoleStandalone (the default: this orchestrator owns
	// its database alone), RoleCoordinator (any number of coordinators
	// share one PostgreSQL database; see docs/operations.md) or
	// RoleWorker (no database: it joins the coordinators at
	// CoordinatorURLs).
	ClusterRole string
	// CoordinatorURLs are a worker's coordinators' base URLs
	// (KICI_CLUSTER_COORDINATOR_URLS).
	CoordinatorURLs []string
	// JoinToken is a worker's join token, needed only at its first join
	// (KICI_CLUSTER_JOIN_TOKEN).
	JoinToken string
	// CredentialFile is where a worker keeps its key and certificate
	// (KICI_CLUSTER_CREDENTIAL_FILE; default DataDir/peer-credential).
	CredentialFile string
	// WorkerIsolationLimit is how long a worker may be cut from every
	// coordinator before it stops its scalers' agents
	// (KICI_CLUSTER_WORKER_ISOLATION_LIMIT_MS; 0 means never).
	WorkerIsolationLimit time.Duration
	// LeaderLeaseTTL and LeaderLeaseRenew time the coordinators' leader
	// lease: it lasts TTL from each renewal, tried every Renew. 0 means
	// leader.DefaultTTL (10 s) and leader.DefaultRenew (2 s).
	LeaderLeaseTTL   time.Duration
	LeaderLeaseRenew time.Duration
	// ScheduleRefresh is how often every source's default branch is read
	// again for its schedule triggers (besides after each push). 0 means
	// schedules.DefaultRefresh.
	ScheduleRefresh time.Duration
	// GitHubAPIURL is GitHub's REST API base URL, of github sources and
	// of check run reports; empty means https://api.github.com.
	GitHubAPIURL string
	// GitHubToken authenticates github sources' reads, and check run
	// reports when no GitHub App is set; empty for none.
	GitHubToken string
	// GitHubAppID and GitHubAppKeyFile (the App's private key, PEM)
	// authenticate check run reports as a GitHub App; zero means none.
	// With neither an App nor a token, runs are not reported to GitHub.
	GitHubAppID      int64
	GitHubAppKeyFile string
	// ScalerConfigPath is scalers.yaml; empty means no auto-scaler.
	ScalerConfigPath string
	// LogLevel and LogFormat configure the orchestrator's own log.
	LogLevel  string
	LogFormat string
	// Storage bounds the artifacts and caches kept for jobs (storage.go).
	Storage StorageConfig
}

// Defaults of the contract (CONTRACT.md, "Orchestrator environment").
const (
	DefaultHTTPAddr            = ":4000"
	DefaultPublicURL           = "http://127.0.0.1:4000"
	DefaultDataDir             = "./.kici-data"
	DefaultQueueTimeout        = time.Hour
	DefaultQueueSweepInterval  = time.Minute
	DefaultDispatchAckTimeout  = 10 * time.Second
	DefaultAgentRecoveryWindow = 120 * time.Second
	// DefaultWorkerIsolationLimit exceeds the default recovery window, so
	// that the coordinators have failed a cut-off worker's jobs before it
	// stops them.
	DefaultWorkerIsolationLimit = 5 * time.Minute
	DefaultJobTimeout           = 6 * time.Hour
	DefaultCancelGrace          = 10 * time.Second
	DefaultAuthFailureLimit     = 20
	DefaultArchiveCacheEntries  = 8
	DefaultRetentionSweep       = time.Hour
	DefaultInstanceHeartbeat    = 2 * time.Second
	DefaultScheduleRefresh      = schedules.DefaultRefresh
)

// The cluster roles (KICI_CLUSTER_ROLE).
const (
	RoleStandalone  = "standalone"
	RoleCoordinator = "coordinator"
	RoleWorker      = "worker"
)

// knownVars are every KICI_ variable some kici component reads, so that a
// shared environment (the demo, a test) does not warn about its neighbours'.
var knownVars = []string{
	"KICI_HTTP_ADDR", "KICI_PUBLIC_URL", "KICI_DATA_DIR", "KICI_DATABASE_URL", "KICI_SECRET_KEY",
	"KICI_BOOTSTRAP_ADMIN_TOKEN", "KICI_SCALER_CONFIG_PATH", "KICI_QUEUE_TIMEOUT_MS",
	"KICI_QUEUE_SWEEP_INTERVAL_MS", "KICI_DISPATCH_ACK_TIMEOUT_MS", "KICI_AGENT_RECOVERY_WINDOW_MS",
	"KICI_AGENT_AUTH", "KICI_LOG_LEVEL", "KICI_LOG_FORMAT", "KICI_METRICS_ADDR", "KICI_DEFAULT_JOB_TIMEOUT_MS",
	"KICI_CANCEL_GRACE_MS", "KICI_AUTH_FAILURE_LIMIT", "KICI_ARCHIVE_CACHE_ENTRIES",
	"KICI_MAX_JOBS_PER_RUN", "KICI_TRUSTED_PROXIES", "KICI_RUN_RETENTION_DAYS", "KICI_AUDIT_RETENTION_DAYS",
	"KICI_WEBHOOK_EVENT_RETENTION_DAYS", "KICI_RETENTION_SWEEP_INTERVAL_MS", "KICI_INSTANCE_HEARTBEAT_MS",
	"KICI_GIT_ALLOW_FILE_URLS", "KICI_CLUSTER_ROLE", "KICI_SCHEDULE_REFRESH_MS",
	"KICI_CLUSTER_LEASE_TTL_MS", "KICI_CLUSTER_LEASE_RENEW_MS",
	"KICI_CLUSTER_COORDINATOR_URLS", "KICI_CLUSTER_JOIN_TOKEN", "KICI_CLUSTER_CREDENTIAL_FILE",
	"KICI_CLUSTER_WORKER_ISOLATION_LIMIT_MS",
	"KICI_ARTIFACT_MAX_BYTES", "KICI_ARTIFACT_MAX_RUN_BYTES", "KICI_CACHE_MAX_BYTES", "KICI_CACHE_MAX_ENTRY_BYTES",
	"KICI_CACHE_MAX_UNUSED_DAYS", "KICI_CACHE_DEFAULT_BRANCH",
	"KICI_BLOB_STORE", "KICI_S3_ENDPOINT", "KICI_S3_REGION", "KICI_S3_ACCESS_KEY_ID", "KICI_S3_SECRET_ACCESS_KEY",
	// agent
	"KICI_ORCHESTRATOR_URL", "KICI_AGENT_TOKEN", "KICI_AGENT_TOKEN_FILE", "KICI_LABELS", "KICI_AGENT_ID", "KICI_AGENT_WORKDIR",
	"KICI_AGENT_TOKEN_FD", "KICI_AGENT_SCOPE", "KICI_AGENT_REAPER_FD", "KICI_AGENT_REAPER_SCOPE", // private to the agent and its reaper
	"KICI_AGENT_ONE_SHOT", "KICI_AGENT_CONCURRENCY", "KICI_AGENT_SCALER", "KICI_AGENT_CANCEL_GRACE_MS",
	"KICI_AGENT_SHUTDOWN", "KICI_AGENT_SHUTDOWN_TIMEOUT_MS", "KICI_AGENT_MAX_STEP_LOG_BYTES", "KICI_AGENT_KEEP_JOB_DIRS", "KICI_AGENT_MMDS_URL",
	"KICI_SCALER_DEFER_BASE_MS", "KICI_SCALER_DEFER_MAX_MS",
	"KICI_GITHUB_TOKEN", "KICI_GITHUB_API_URL", "KICI_GITHUB_APP_ID", "KICI_GITHUB_APP_KEY_FILE",
	// admin CLI
	"KICI_ADMIN_URL", "KICI_ADMIN_TOKEN",
	// tests
	"KICI_TEST_DATABASE_URL", "KICI_TEST_REQUIRE_SERVICES", "KICI_TEST_CHROMIUM",
}

// ConfigFromEnv reads the configuration from environment variables through
// getenv (os.Getenv in main), applying the contract's defaults. It returns
// the config and one warning per unknown KICI_ variable in environ.
func ConfigFromEnv(getenv func(string) string, environ []string) (Config, []string, error) {
	c := Config{
		HTTPAddr:            or(getenv("KICI_HTTP_ADDR"), DefaultHTTPAddr),
		PublicURL:           or(getenv("KICI_PUBLIC_URL"), DefaultPublicURL),
		DataDir:             or(getenv("KICI_DATA_DIR"), DefaultDataDir),
		DatabaseURL:         getenv("KICI_DATABASE_URL"),
		BootstrapAdminToken: getenv("KICI_BOOTSTRAP_ADMIN_TOKEN"),
		SecretKey:           getenv("KICI_SECRET_KEY"),
		AgentAuth:           or(getenv("KICI_AGENT_AUTH"), "token"),
		ScalerConfigPath:    getenv("KICI_SCALER_CONFIG_PATH"),
		LogLevel:            or(getenv("KICI_LOG_LEVEL"), "info"),
		LogFormat:           getenv("KICI_LOG_FORMAT"),
		GitHubAPIURL:        getenv("KICI_GITHUB_API_URL"),
		GitHubToken:         getenv("KICI_GITHUB_TOKEN"),
		GitHubAppKeyFile:    getenv("KICI_GITHUB_APP_KEY_FILE"),
		ClusterRole:         or(getenv("KICI_CLUSTER_ROLE"), RoleStandalone),
		JoinToken:           getenv("KICI_CLUSTER_JOIN_TOKEN"),
		CredentialFile:      getenv("KICI_CLUSTER_CREDENTIAL_FILE"),
	}
	for u := range strings.SplitSeq(getenv("KICI_CLUSTER_COORDINATOR_URLS"), ",") {
		if u = strings.TrimSpace(u); u != "" {
			c.CoordinatorURLs = append(c.CoordinatorURLs, u)
		}
	}
	if c.CredentialFile == "" {
		c.CredentialFile = filepath.Join(c.DataDir, "peer-credential")
	}
	var errs []error
	ms := func(name string, def time.Duration, dst *time.Duration) {
		v := getenv(name)
		if v == "" {
			*dst = def
			return
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a whole number of milliseconds >= 0", name, v))
			return
		}
		*dst = time.Duration(n) * time.Millisecond
	}
	ms("KICI_QUEUE_TIMEOUT_MS", DefaultQueueTimeout, &c.QueueTimeout)
	ms("KICI_QUEUE_SWEEP_INTERVAL_MS", DefaultQueueSweepInterval, &c.QueueSweepInterval)
	ms("KICI_DISPATCH_ACK_TIMEOUT_MS", DefaultDispatchAckTimeout, &c.DispatchAckTimeout)
	ms("KICI_AGENT_RECOVERY_WINDOW_MS", DefaultAgentRecoveryWindow, &c.AgentRecoveryWindow)
	ms("KICI_DEFAULT_JOB_TIMEOUT_MS", DefaultJobTimeout, &c.DefaultJobTimeout)
	ms("KICI_SCALER_DEFER_BASE_MS", scaler.DefaultDeferBase, &c.ScalerDeferBase)
	ms("KICI_SCALER_DEFER_MAX_MS", scaler.DefaultDeferMax, &c.ScalerDeferMax)
	ms("KICI_CANCEL_GRACE_MS", DefaultCancelGrace, &c.CancelGrace)
	ms("KICI_INSTANCE_HEARTBEAT_MS", DefaultInstanceHeartbeat, &c.InstanceHeartbeat)
	ms("KICI_SCHEDULE_REFRESH_MS", DefaultScheduleRefresh, &c.ScheduleRefresh)
	ms("KICI_CLUSTER_LEASE_TTL_MS", leader.DefaultTTL, &c.LeaderLeaseTTL)
	ms("KICI_CLUSTER_LEASE_RENEW_MS", leader.DefaultRenew, &c.LeaderLeaseRenew)
	ms("KICI_CLUSTER_WORKER_ISOLATION_LIMIT_MS", DefaultWorkerIsolationLimit, &c.WorkerIsolationLimit)
	if v := getenv("KICI_AUTH_FAILURE_LIMIT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("KICI_AUTH_FAILURE_LIMIT=%q: want a whole number (0 = default, below 0 = no limit)", v))
		}
		c.AuthFailureLimit = n
	}
	ms("KICI_RETENTION_SWEEP_INTERVAL_MS", DefaultRetentionSweep, &c.RetentionSweepInterval)
	days := func(name string, dst *time.Duration) {
		v := getenv(name)
		if v == "" {
			return
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a whole number of days >= 0 (0 = keep forever)", name, v))
			return
		}
		*dst = time.Duration(n) * 24 * time.Hour
	}
	days("KICI_RUN_RETENTION_DAYS", &c.RunRetention)
	days("KICI_AUDIT_RETENTION_DAYS", &c.AuditRetention)
	days("KICI_WEBHOOK_EVENT_RETENTION_DAYS", &c.WebhookEventRetention)
	if v := getenv("KICI_TRUSTED_PROXIES"); v != "" {
		p, err := ParseTrustedProxies(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("KICI_TRUSTED_PROXIES=%q: %w", v, err))
		}
		c.TrustedProxies = p
	}
	if v := getenv("KICI_GIT_ALLOW_FILE_URLS"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("KICI_GIT_ALLOW_FILE_URLS=%q: want true or false", v))
		}
		c.AllowFileGitURLs = on
	}
	if v := getenv("KICI_GITHUB_APP_ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("KICI_GITHUB_APP_ID=%q: want the GitHub App's numeric id", v))
		}
		c.GitHubAppID = n
	}
	c.ArchiveCacheEntries = DefaultArchiveCacheEntries
	if v := getenv("KICI_ARCHIVE_CACHE_ENTRIES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("KICI_ARCHIVE_CACHE_ENTRIES=%q: want a whole number >= 0 (0 = no cache)", v))
		}
		c.ArchiveCacheEntries = n
	}
	c.MaxJobsPerRun = workflow.DefaultMaxJobsPerRun
	if v := getenv("KICI_MAX_JOBS_PER_RUN"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("KICI_MAX_JOBS_PER_RUN=%q: want a whole number >= 1", v))
		}
		c.MaxJobsPerRun = n
	}
	storage, storageErrs := storageFromEnv(getenv)
	c.Storage, errs = storage, append(errs, storageErrs...)
	if err := errors.Join(errs...); err != nil {
		return Config{}, nil, err
	}
	return c, unknownVars(environ), c.Validate()
}

// ParseTrustedProxies reads a comma-separated list of addresses (a
// single host) and CIDR prefixes, naming the first entry that is neither.
func ParseTrustedProxies(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for e := range strings.SplitSeq(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if strings.Contains(e, "/") {
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, fmt.Errorf("%q is not an address or a CIDR prefix (like 10.0.0.0/8)", e)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(e)
		if err != nil {
			return nil, fmt.Errorf("%q is not an address or a CIDR prefix (like 10.0.0.0/8)", e)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// Validate names the first bad field.
func (c *Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		return fmt.Errorf("KICI_HTTP_ADDR=%q: want host:port: %w", c.HTTPAddr, err)
	}
	u, err := url.Parse(c.PublicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("KICI_PUBLIC_URL=%q: want an http:// or https:// URL", c.PublicURL)
	}
	if c.DatabaseURL != "" && !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		return fmt.Errorf("KICI_DATABASE_URL: want a postgres:// URL (leave it empty for SQLite in KICI_DATA_DIR)")
	}
	if c.DataDir == "" {
		return errors.New("KICI_DATA_DIR: must not be empty")
	}
	if c.SecretKey != "" {
		if _, err := secrets.ParseKey(c.SecretKey); err != nil {
			return fmt.Errorf("KICI_SECRET_KEY: %w", err)
		}
	} else if c.DatabaseURL != "" {
		return errors.New("KICI_SECRET_KEY: required with PostgreSQL (64 hex digits, e.g. from `openssl rand -hex 32`; every coordinator needs the same key)")
	}
	switch c.ClusterRole {
	case "", RoleStandalone:
	case RoleCoordinator:
		if c.DatabaseURL == "" {
			return errors.New("KICI_CLUSTER_ROLE=coordinator needs PostgreSQL (KICI_DATABASE_URL): coordinators share one database")
		}
		if ttl, renew := c.LeaderLeaseTTL, c.LeaderLeaseRenew; ttl > 0 && renew > 0 && ttl < 3*renew {
			return fmt.Errorf("KICI_CLUSTER_LEASE_TTL_MS=%d must be at least 3 times KICI_CLUSTER_LEASE_RENEW_MS=%d, so that a leader survives a missed renewal", ttl.Milliseconds(), renew.Milliseconds())
		}
	case RoleWorker:
		if c.DatabaseURL != "" {
			return errors.New("KICI_CLUSTER_ROLE=worker: a worker has no database; unset KICI_DATABASE_URL")
		}
		if c.Storage.S3 != nil {
			return errors.New("KICI_BLOB_STORE: a worker keeps no artifacts or caches (it passes its agents' transfers on to a coordinator); unset it and the KICI_S3_ variables")
		}
		if len(c.CoordinatorURLs) == 0 {
			return errors.New("KICI_CLUSTER_ROLE=worker needs KICI_CLUSTER_COORDINATOR_URLS: the coordinators' base URLs, comma-separated")
		}
		for _, u := range c.CoordinatorURLs {
			if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
				return fmt.Errorf("KICI_CLUSTER_COORDINATOR_URLS: %q: want an http:// or https:// base URL", u)
			}
		}
	default:
		return fmt.Errorf("KICI_CLUSTER_ROLE=%q: want standalone, coordinator or worker", c.ClusterRole)
	}
	if c.GitHubAppID != 0 && c.GitHubAppKeyFile == "" {
		return errors.New("KICI_GITHUB_APP_KEY_FILE: required with KICI_GITHUB_APP_ID (the path of the App's private key, PEM)")
	}
	if c.GitHubAppID == 0 && c.GitHubAppKeyFile != "" {
		return errors.New("KICI_GITHUB_APP_ID: required with KICI_GITHUB_APP_KEY_FILE")
	}
	if c.GitHubAPIURL != "" {
		if u, err := url.Parse(c.GitHubAPIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("KICI_GITHUB_API_URL=%q: want an http:// or https:// URL", c.GitHubAPIURL)
		}
	}
	switch c.AgentAuth {
	case "token":
	case "none":
		if !loopbackOnly(c.HTTPAddr) {
			return fmt.Errorf("KICI_AGENT_AUTH=none is only allowed when KICI_HTTP_ADDR listens on loopback, not %q", c.HTTPAddr)
		}
	default:
		return fmt.Errorf("KICI_AGENT_AUTH=%q: want token or none", c.AgentAuth)
	}
	for name, d := range map[string]time.Duration{
		"KICI_QUEUE_SWEEP_INTERVAL_MS":  c.QueueSweepInterval,
		"KICI_DISPATCH_ACK_TIMEOUT_MS":  c.DispatchAckTimeout,
		"KICI_AGENT_RECOVERY_WINDOW_MS": c.AgentRecoveryWindow,
	} {
		if d <= 0 {
			return fmt.Errorf("%s: must be greater than 0", name)
		}
	}
	return nil
}

// loopbackOnly reports whether addr binds only loopback interfaces.
func loopbackOnly(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// jobVariable reports whether name is one the agent sets for a job's
// steps (an orchestrator started inside a kici job sees them).
func jobVariable(name string) bool {
	switch name {
	case "KICI_RUN_ID", "KICI_JOB_ID", "KICI_JOB_NAME", "KICI_WORKFLOW", "KICI_SOURCE", "KICI_SHA", "KICI_URL", "KICI_WORKSPACE":
		return true
	}
	return strings.HasPrefix(name, "KICI_EVENT_") || strings.HasPrefix(name, "KICI_INPUT_") ||
		strings.HasPrefix(name, "KICI_SERVICE_") // a job's services' hosts (docs/workflows.md)
}

// unknownVars returns a warning per KICI_ variable no component reads.
func unknownVars(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "KICI_") || jobVariable(name) {
			continue
		}
		known := false
		for _, k := range knownVars {
			known = known || k == name
		}
		if known {
			continue
		}
		best, bestD := "", 1<<30
		for _, k := range knownVars {
			if d := levenshtein.ComputeDistance(name, k); d < bestD {
				best, bestD = k, d
			}
		}
		msg := fmt.Sprintf("unknown variable %s", name)
		if bestD <= 4 {
			msg += fmt.Sprintf(" (did you mean %s?)", best)
		}
		out = append(out, msg)
	}
	sort.Strings(out)
	return out
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
