package agent

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/agent/reaper"
)

// Defaults of the Config fields whose zero value means "default".
const (
	DefaultWorkDir          = "./.kici-agent"
	DefaultConcurrency      = 1
	DefaultCancelGrace      = 10 * time.Second
	DefaultShutdownTimeout  = 30 * time.Second
	DefaultMaxStepLogBytes  = 10 << 20
	DefaultMaxBufferBytes   = 64 << 20
	DefaultReconnectMin     = time.Second
	DefaultReconnectMax     = 60 * time.Second
	DefaultDialTimeout      = 10 * time.Second
	DefaultRegisterTimeout  = 30 * time.Second
	DefaultLogFlushInterval = 100 * time.Millisecond
	DefaultLogFlushLines    = 50
	DefaultStatusLinger     = 10 * time.Millisecond
)

// ReservedLabelPrefix starts the labels kici sets itself (kici:os:<GOOS>,
// kici:arch:<GOARCH>); a user label may not start with it.
const ReservedLabelPrefix = "kici:"

// ShutdownMode says what the agent does with its running jobs when it is
// asked to stop.
type ShutdownMode string

// Shutdown modes.
const (
	// ShutdownCancel cancels the running jobs (SIGTERM, grace, SIGKILL) and
	// reports them cancelled with "agent shutting down".
	ShutdownCancel ShutdownMode = "cancel"
	// ShutdownFinish lets the running jobs run to their end.
	ShutdownFinish ShutdownMode = "finish"
)

// Config configures an [Agent]. [FromEnv] builds one from the environment
// variables docs/agent.md lists; tests build their own.
type Config struct {
	// OrchestratorURL is the orchestrator's agent endpoint, ws:// or wss://,
	// e.g. ws://127.0.0.1:4000/ws; required. Several, comma-separated
	// (coordinators of one cluster), are tried in turn: a lost or refused
	// connection moves to the next one. Relative archive URLs of a
	// dispatch resolve against the one connected (as http:// or https://).
	OrchestratorURL string
	// Token is the agent token, sent as "Authorization: Bearer <token>" on
	// the WebSocket upgrade; empty sends no Authorization header (an
	// orchestrator with KICI_AGENT_AUTH=none).
	Token string
	// Labels are the user's labels. kici adds kici:os:<GOOS> and
	// kici:arch:<GOARCH>; a label of the user starting with "kici:" is
	// refused. Nil means none.
	Labels []string
	// AgentID is the agent's stable id; "" means the id kept in
	// WorkDir/agent-id, generated there on the first start.
	AgentID string
	// WorkDir holds the agent's id file, its lock and the jobs'
	// directories; "" means DefaultWorkDir (./.kici-agent).
	WorkDir string
	// OneShot makes the agent take one job, and return from Run once that
	// job has ended and the orchestrator has acknowledged its messages.
	OneShot bool
	// ScalerAgent tells the orchestrator a scaler spawned the agent, whose
	// AgentID is then the spawn's id.
	ScalerAgent bool
	// Concurrency is how many jobs run at once; 0 means 1.
	Concurrency int
	// Version is the agent's build version, reported when registering.
	Version string
	// Hostname is reported when registering; "" means os.Hostname.
	Hostname string
	// CancelGrace is the time between SIGTERM and SIGKILL of a step's
	// process group on a cancel or timeout; 0 means DefaultCancelGrace.
	CancelGrace time.Duration
	// Shutdown says what happens to running jobs when Run's context ends;
	// "" means ShutdownCancel.
	Shutdown ShutdownMode
	// ShutdownTimeout bounds how long a stopping agent (or a one-shot agent
	// whose job ended) waits for the orchestrator to acknowledge the
	// buffered messages; 0 means DefaultShutdownTimeout (30 s).
	ShutdownTimeout time.Duration
	// MaxStepLogBytes caps the output of one step in bytes; 0 means
	// DefaultMaxStepLogBytes (10 MiB).
	MaxStepLogBytes int64
	// MaxBufferBytes bounds the log text held for replay, in bytes; past
	// it the oldest unacknowledged log chunks are dropped (status messages
	// never are). 0 means DefaultMaxBufferBytes (64 MiB).
	MaxBufferBytes int64
	// ReconnectMin and ReconnectMax shape the reconnect backoff: attempt n
	// waits min(ReconnectMin × 1.5^n × (1 + U[0, 0.5)), ReconnectMax); 0
	// means DefaultReconnectMin (1 s) and DefaultReconnectMax (60 s).
	ReconnectMin, ReconnectMax time.Duration
	// DialTimeout bounds the WebSocket dial and each write on the
	// connection; 0 means DefaultDialTimeout (10 s).
	DialTimeout time.Duration
	// RegisterTimeout bounds the wait for "registered" after "register";
	// 0 means DefaultRegisterTimeout.
	RegisterTimeout time.Duration
	// LogFlushInterval and LogFlushLines batch output lines into log
	// chunks: a chunk is sent LogFlushInterval after its first line or
	// once it holds LogFlushLines lines; 0 means 100 ms and 50 lines.
	LogFlushInterval time.Duration
	LogFlushLines    int
	// StatusLinger is how long a message nothing waits for (a step's
	// status, a log chunk, a job's running status) may wait to be sent
	// together with the messages queued after it; a job.ack, a job.reject
	// or a final job status is sent at once and takes along everything
	// queued before it. 0 means DefaultStatusLinger (10 ms); a negative
	// value sends every message at once.
	StatusLinger time.Duration
	// HTTPClient dials the WebSocket and fetches archives; nil means a
	// client with http.DefaultTransport.
	HTTPClient *http.Client
	// KeepJobDirs leaves each job's directory in WorkDir/jobs after the
	// job, for debugging.
	KeepJobDirs bool
	// Reaper, when not nil, is the agent's reaper (reaper.Start): every
	// process the steps start carries its scope, and Run first kills what
	// the previous agent of the work dir left (Guard.Adopt). Nil means no
	// reaper: the steps' direct children still die with the agent (their
	// parent-death signal), their own children may not. The caller closes
	// it after Run.
	Reaper *reaper.Guard
}

// withDefaults returns c with every zero "default" field set.
func (c Config) withDefaults() Config {
	set := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	if c.WorkDir == "" {
		c.WorkDir = DefaultWorkDir
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Shutdown == "" {
		c.Shutdown = ShutdownCancel
	}
	set(&c.CancelGrace, DefaultCancelGrace)
	set(&c.ShutdownTimeout, DefaultShutdownTimeout)
	set(&c.ReconnectMin, DefaultReconnectMin)
	set(&c.ReconnectMax, DefaultReconnectMax)
	set(&c.DialTimeout, DefaultDialTimeout)
	set(&c.RegisterTimeout, DefaultRegisterTimeout)
	set(&c.LogFlushInterval, DefaultLogFlushInterval)
	set(&c.StatusLinger, DefaultStatusLinger)
	if c.MaxStepLogBytes == 0 {
		c.MaxStepLogBytes = DefaultMaxStepLogBytes
	}
	if c.MaxBufferBytes == 0 {
		c.MaxBufferBytes = DefaultMaxBufferBytes
	}
	if c.LogFlushLines == 0 {
		c.LogFlushLines = DefaultLogFlushLines
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Transport: http.DefaultTransport}
	}
	return c
}

// maxOrchestratorURLs bounds the URLs OrchestratorURL may list.
const maxOrchestratorURLs = 16

// orchestratorURLs splits OrchestratorURL at its commas, without spaces
// and empty entries.
func (c Config) orchestratorURLs() []string {
	var out []string
	for _, s := range strings.Split(c.OrchestratorURL, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Validate names the first bad field. Zero values that mean "default" are
// fine.
func (c Config) Validate() error {
	urls := c.orchestratorURLs()
	if len(urls) == 0 {
		return errors.New("agent config: OrchestratorURL (KICI_ORCHESTRATOR_URL) is required, e.g. ws://127.0.0.1:4000/ws")
	}
	if len(urls) > maxOrchestratorURLs {
		return fmt.Errorf("agent config: OrchestratorURL (KICI_ORCHESTRATOR_URL) lists %d URLs, at most %d", len(urls), maxOrchestratorURLs)
	}
	for _, raw := range urls {
		if u, err := url.Parse(raw); err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
			return fmt.Errorf("agent config: OrchestratorURL (KICI_ORCHESTRATOR_URL) %q: want a ws:// or wss:// URL such as ws://127.0.0.1:4000/ws (several may be listed, comma-separated)", raw)
		}
	}
	if err := checkLabels(c.Labels); err != nil {
		return fmt.Errorf("agent config: Labels (KICI_LABELS): %w", err)
	}
	if strings.ContainsAny(c.AgentID, " \t\r\n/") {
		return fmt.Errorf("agent config: AgentID (KICI_AGENT_ID) %q: must not contain white space or '/'", c.AgentID)
	}
	switch {
	case c.Concurrency < 0:
		return fmt.Errorf("agent config: Concurrency (KICI_AGENT_CONCURRENCY) is %d, want >= 1", c.Concurrency)
	case c.OneShot && c.Concurrency > 1:
		return fmt.Errorf("agent config: Concurrency (KICI_AGENT_CONCURRENCY) is %d, want 1 with OneShot (KICI_AGENT_ONE_SHOT): a one-shot agent runs one job", c.Concurrency)
	}
	switch c.Shutdown {
	case "", ShutdownCancel, ShutdownFinish:
	default:
		return fmt.Errorf("agent config: Shutdown (KICI_AGENT_SHUTDOWN) %q: want %q or %q", c.Shutdown, ShutdownCancel, ShutdownFinish)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"CancelGrace (KICI_AGENT_CANCEL_GRACE_MS)", c.CancelGrace},
		{"ShutdownTimeout (KICI_AGENT_SHUTDOWN_TIMEOUT_MS)", c.ShutdownTimeout},
		{"ReconnectMin", c.ReconnectMin},
		{"ReconnectMax", c.ReconnectMax},
		{"DialTimeout", c.DialTimeout},
		{"RegisterTimeout", c.RegisterTimeout},
		{"LogFlushInterval", c.LogFlushInterval},
	} {
		if f.d < 0 {
			return fmt.Errorf("agent config: %s is %s, want >= 0", f.name, f.d)
		}
	}
	switch {
	case c.MaxStepLogBytes < 0:
		return fmt.Errorf("agent config: MaxStepLogBytes (KICI_AGENT_MAX_STEP_LOG_BYTES) is %d, want >= 0", c.MaxStepLogBytes)
	case c.MaxBufferBytes < 0:
		return fmt.Errorf("agent config: MaxBufferBytes is %d, want >= 0", c.MaxBufferBytes)
	case c.LogFlushLines < 0 || c.LogFlushLines > 1000:
		return fmt.Errorf("agent config: LogFlushLines is %d, want 0 to 1000", c.LogFlushLines)
	}
	return nil
}

// ParseLabels splits a comma-separated label list (KICI_LABELS), trimming
// blanks around each label and dropping empty ones and repeats. It refuses
// labels that use the reserved "kici:" prefix or hold white space.
func ParseLabels(list string) ([]string, error) {
	var labels []string
	for l := range strings.SplitSeq(list, ",") {
		l = strings.TrimSpace(l)
		if l != "" && !slices.Contains(labels, l) {
			labels = append(labels, l)
		}
	}
	if err := checkLabels(labels); err != nil {
		return nil, err
	}
	return labels, nil
}

func checkLabels(labels []string) error {
	for _, l := range labels {
		switch {
		case l == "":
			return errors.New("empty label")
		case strings.HasPrefix(l, ReservedLabelPrefix):
			return fmt.Errorf("label %q: the %q prefix is reserved; kici adds %s and %s itself", l, ReservedLabelPrefix, osLabel(), archLabel())
		case strings.ContainsAny(l, " \t\r\n,"):
			return fmt.Errorf("label %q: must not contain white space or commas", l)
		}
	}
	return nil
}

func osLabel() string   { return ReservedLabelPrefix + "os:" + runtime.GOOS }
func archLabel() string { return ReservedLabelPrefix + "arch:" + runtime.GOARCH }

// effectiveLabels returns the labels the agent registers with: the user's,
// without repeats, then kici:os:<GOOS> and kici:arch:<GOARCH>.
func effectiveLabels(user []string) []string {
	var out []string
	for _, l := range user {
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return append(out, osLabel(), archLabel())
}
