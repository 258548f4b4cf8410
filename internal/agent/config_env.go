package agent

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agnivade/levenshtein"

	"github.com/kici-dev/kici/internal/agent/reaper"
)

// EnvVar documents one environment variable the agent reads.
type EnvVar struct {
	// Name is the variable, e.g. KICI_LABELS.
	Name string
	// Default describes the value used when the variable is unset.
	Default string
	// Help says what the variable does, in a sentence or two.
	Help string
}

// EnvVars lists every environment variable of kici-agent, in the order
// `kici-agent --help` and docs/agent.md show them.
var EnvVars = []EnvVar{
	{"KICI_ORCHESTRATOR_URL", "(required)", "The orchestrator's agent endpoint, ws:// or wss://, e.g. ws://127.0.0.1:4000/ws; several coordinators' endpoints comma-separated (up to 16), tried in turn when a connection is lost."},
	{"KICI_AGENT_TOKEN", "(none)", "Agent token (kat_...) from `kici-admin agent-tokens create`, sent as Authorization: Bearer on the WebSocket upgrade. On Linux the agent re-executes itself at start without it in its environment."},
	{"KICI_AGENT_TOKEN_FILE", "(none)", "A file holding the agent token instead (white space around it is ignored); it must be readable by its owner only. Not with KICI_AGENT_TOKEN."},
	{"KICI_LABELS", "(none)", "Comma-separated labels. kici:os:<os> and kici:arch:<arch> are added; other labels may not start with kici:."},
	{"KICI_AGENT_ID", "kept in <workdir>/agent-id", "Stable agent id. Without it the agent generates one on its first start and keeps it in the work dir."},
	{"KICI_AGENT_WORKDIR", DefaultWorkDir, "Work dir: the agent id, a lock held while the agent runs, and one directory per running job under jobs/."},
	{"KICI_AGENT_ONE_SHOT", "false", "Run one job, then exit 0 once the orchestrator has acknowledged its messages (set by scalers)."},
	{"KICI_AGENT_CONCURRENCY", "1", "Jobs run at once (1 with one-shot)."},
	{"KICI_AGENT_SCALER", "false", "Set by a scaler: KICI_AGENT_ID is the id of the spawn that started this agent."},
	{"KICI_AGENT_CANCEL_GRACE_MS", "10000", "Time between SIGTERM and SIGKILL of a step's process group on a cancel or timeout."},
	{"KICI_AGENT_SHUTDOWN", "cancel", "On SIGTERM/SIGINT: cancel the running jobs, or finish them first (finish)."},
	{"KICI_AGENT_SHUTDOWN_TIMEOUT_MS", "30000", "On stopping, how long to wait for the orchestrator to acknowledge buffered messages."},
	{"KICI_AGENT_MAX_STEP_LOG_BYTES", "10485760", "Output cap per step; past it one marker line is sent and the rest dropped."},
	{"KICI_AGENT_KEEP_JOB_DIRS", "false", "Keep each job's directory after the job, for debugging."},
	{EnvMMDSURL, "(none)", "Read KICI_ORCHESTRATOR_URL, KICI_AGENT_ID, KICI_LABELS, the token and extra variables from a Firecracker metadata service (MMDS v2) at this http:// address first, e.g. http://169.254.169.254; a guest's init sets it."},
	{"KICI_LOG_LEVEL", "info", "The agent's own log level: debug, info, warn or error."},
	{"KICI_LOG_FORMAT", "text on a TTY, else json", "The agent's own log format: text or json."},
}

// otherVars are the KICI_ variables of kici's other components, which an
// agent sharing their environment (the demo, a test) must not warn about.
var otherVars = []string{
	"KICI_HTTP_ADDR", "KICI_PUBLIC_URL", "KICI_DATA_DIR", "KICI_DATABASE_URL", "KICI_SECRET_KEY",
	"KICI_BOOTSTRAP_ADMIN_TOKEN", "KICI_SCALER_CONFIG_PATH", "KICI_QUEUE_TIMEOUT_MS",
	"KICI_QUEUE_SWEEP_INTERVAL_MS", "KICI_DISPATCH_ACK_TIMEOUT_MS", "KICI_AGENT_RECOVERY_WINDOW_MS",
	"KICI_AGENT_AUTH", "KICI_METRICS_ADDR", "KICI_DEFAULT_JOB_TIMEOUT_MS", "KICI_CANCEL_GRACE_MS", "KICI_AUTH_FAILURE_LIMIT",
	"KICI_ARCHIVE_CACHE_ENTRIES", "KICI_MAX_JOBS_PER_RUN", "KICI_TRUSTED_PROXIES", "KICI_RUN_RETENTION_DAYS", "KICI_AUDIT_RETENTION_DAYS",
	"KICI_WEBHOOK_EVENT_RETENTION_DAYS", "KICI_RETENTION_SWEEP_INTERVAL_MS", "KICI_ADMIN_URL", "KICI_ADMIN_TOKEN", "KICI_TEST_DATABASE_URL", "KICI_TEST_REQUIRE_SERVICES",
}

// privateVars are the variables kici-agent sets for itself (the token's
// pipe after HideToken, the reaper's), which are no user's to set.
var privateVars = append([]string{envTokenFD}, reaper.PrivateVars...)

// FromEnv builds a Config from the environment, read through getenv
// (os.Getenv in main). It also returns a warning for every variable of
// environ that looks like a misspelt agent variable: any unknown KICI_AGENT_*
// one, and any other KICI_* one close to a known name. Every bad value is
// reported, naming its variable.
//
// The token comes from KICI_AGENT_TOKEN, from the file KICI_AGENT_TOKEN_FILE
// names, or, after HideToken, from the pipe KICI_AGENT_TOKEN_FD names (which
// FromEnv reads and closes: call it once per process with that variable).
func FromEnv(getenv func(string) string, environ []string) (Config, []string, error) {
	var errs []error
	c := Config{
		OrchestratorURL: getenv("KICI_ORCHESTRATOR_URL"),
		AgentID:         strings.TrimSpace(getenv("KICI_AGENT_ID")),
		WorkDir:         getenv("KICI_AGENT_WORKDIR"),
		Shutdown:        ShutdownMode(getenv("KICI_AGENT_SHUTDOWN")),
	}
	token, err := readToken(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	c.Token = token
	labels, err := ParseLabels(getenv("KICI_LABELS"))
	if err != nil {
		errs = append(errs, fmt.Errorf("KICI_LABELS: %w", err))
	}
	c.Labels = labels
	boolVar := func(name string, dst *bool) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return
		}
		b, err := parseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want true or false", name, v))
		}
		*dst = b
	}
	intVar := func(name string, dst *int64) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a whole number >= 0", name, v))
			return
		}
		*dst = n
	}
	boolVar("KICI_AGENT_ONE_SHOT", &c.OneShot)
	boolVar("KICI_AGENT_SCALER", &c.ScalerAgent)
	boolVar("KICI_AGENT_KEEP_JOB_DIRS", &c.KeepJobDirs)
	var concurrency, graceMS, shutdownMS int64
	intVar("KICI_AGENT_CONCURRENCY", &concurrency)
	intVar("KICI_AGENT_CANCEL_GRACE_MS", &graceMS)
	intVar("KICI_AGENT_SHUTDOWN_TIMEOUT_MS", &shutdownMS)
	intVar("KICI_AGENT_MAX_STEP_LOG_BYTES", &c.MaxStepLogBytes)
	if getenv("KICI_AGENT_CONCURRENCY") != "" && concurrency == 0 {
		errs = append(errs, errors.New(`KICI_AGENT_CONCURRENCY="0": want at least 1`))
	}
	c.Concurrency = int(min(concurrency, 1<<16))
	c.CancelGrace = time.Duration(graceMS) * time.Millisecond
	c.ShutdownTimeout = time.Duration(shutdownMS) * time.Millisecond
	if err := errors.Join(errs...); err != nil {
		return Config{}, nil, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, nil, err
	}
	return c, unknownVars(environ), nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "yes", "on":
		return true, nil
	case "no", "off":
		return false, nil
	}
	return strconv.ParseBool(v)
}

// unknownVars warns about variables that look like misspelt agent
// variables. Other KICI_* variables (the orchestrator's, a job's KICI_EVENT_*
// when the agent runs inside a job) are none of its business.
func unknownVars(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "KICI_") || slices.Contains(otherVars, name) || slices.Contains(privateVars, name) ||
			slices.ContainsFunc(EnvVars, func(v EnvVar) bool { return v.Name == name }) {
			continue
		}
		best, dist := closestVar(name)
		if strings.HasPrefix(name, "KICI_AGENT_") || dist <= 3 {
			out = append(out, fmt.Sprintf("unknown variable %s (did you mean %s?)", name, best))
		}
	}
	slices.Sort(out)
	return out
}

func closestVar(name string) (string, int) {
	best, bestD := "", 1<<30
	for _, v := range EnvVars {
		if d := levenshtein.ComputeDistance(name, v.Name); d < bestD {
			best, bestD = v.Name, d
		}
	}
	return best, bestD
}

// NewLogger builds the agent's own logger from KICI_LOG_LEVEL and
// KICI_LOG_FORMAT (read through getenv), writing to w: text when w is a
// terminal (tty) and no format is set, else JSON.
func NewLogger(w io.Writer, getenv func(string) string, tty bool) (*slog.Logger, error) {
	var level slog.Level
	if v := getenv("KICI_LOG_LEVEL"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			return nil, fmt.Errorf("KICI_LOG_LEVEL=%q: want debug, info, warn or error", v)
		}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch format := getenv("KICI_LOG_FORMAT"); {
	case format == "json" || format == "" && !tty:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case format == "text" || format == "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("KICI_LOG_FORMAT=%q: want text or json", format)
	}
}
