package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/fcguest"
)

// EnvMMDSURL names the Firecracker metadata service (MMDS) a guest's
// kici-agent reads its configuration from.
const EnvMMDSURL = "KICI_AGENT_MMDS_URL"

// MMDS keys under latest/meta-data, as the firecracker backend writes
// them, and the variable each one sets.
var mmdsKeys = map[string]string{
	"kici-orchestrator-url": "KICI_ORCHESTRATOR_URL",
	"kici-agent-id":         "KICI_AGENT_ID",
	"kici-labels":           "KICI_LABELS",
	"kici-agent-token":      "KICI_AGENT_TOKEN",
}

// mmdsEnvKey holds the agent's extra environment (the label set's env and
// the forwarded KICI_AGENT_ENV_* values), a map of strings.
const mmdsEnvKey = "kici-env"

// mmdsManagedKey is "1" for an agent a scaler spawned: it runs one job.
const mmdsManagedKey = "kici-scaler-managed"

// Bounds on what the metadata service may hand the agent.
const (
	maxMMDSBytes   = 64 << 10
	mmdsWait       = 30 * time.Second
	mmdsRetryEvery = 100 * time.Millisecond
	mmdsTokenTTL   = "60"
	// templatePoll is how often a template VM's agent looks for its
	// identity: after a restore it is the first thing the guest does.
	templatePoll = 10 * time.Millisecond
	// templateFetchTimeout is short: a request the snapshot caught in
	// flight is dead after the restore (the VMM's TCP state is gone).
	templateFetchTimeout = 250 * time.Millisecond
)

var posixName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ApplyMMDS configures the agent from the metadata service when
// KICI_AGENT_MMDS_URL is set (a Firecracker guest's init sets it): it
// fetches latest/meta-data with the MMDS version 2 session token flow,
// sets the variables those keys stand for in this process's environment,
// and unsets KICI_AGENT_MMDS_URL, so that the rest of start-up (the token
// hiding re-exec included) sees an ordinary configuration. The guest's
// network may come up after the agent starts, so the fetch is retried for
// up to 30 s. Without the variable it does nothing.
//
// In a warm-start template VM (meta-data with only kici-warm-template) it
// prints the ready marker on stdout, the serial console, and waits for an
// identity without a deadline: the host snapshots the VM there, and each
// restore continues in that wait. A restore's meta-data also says which
// address the guest has now (kici-network); the interface is moved to it
// before anything dials.
func ApplyMMDS(ctx context.Context) error { return applyMMDS(ctx, os.Stdout) }

func applyMMDS(ctx context.Context, serial io.Writer) error {
	base := os.Getenv(EnvMMDSURL)
	if base == "" {
		return nil
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%s=%q: want http://<address>, such as http://169.254.169.254", EnvMMDSURL, base)
	}
	base = strings.TrimSuffix(base, "/")
	wctx, cancel := context.WithTimeout(ctx, mmdsWait)
	md, err := pollMMDS(wctx, base, mmdsRetryEvery, 2*time.Second, func(map[string]any) bool { return true })
	cancel()
	if err != nil {
		return err
	}
	if isTemplate(md) {
		fmt.Fprintln(serial, fcguest.ReadyMarker)
		md, err = pollMMDS(ctx, base, templatePoll, templateFetchTimeout, func(md map[string]any) bool { return md["kici-orchestrator-url"] != nil })
		if err != nil {
			return err
		}
	}
	vars, err := mmdsVars(md)
	if err != nil {
		return fmt.Errorf("MMDS at %s: %w", base, err)
	}
	if raw, ok := md[fcguest.NetworkKey]; ok {
		n, err := guestNetwork(raw)
		if err != nil {
			return fmt.Errorf("MMDS at %s: %w", base, err)
		}
		if err := fcguest.Configure(n); err != nil {
			return fmt.Errorf("move %s to %s as MMDS says: %w", n.Interface, n.Address, err)
		}
	}
	for k, v := range vars {
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("set %s from MMDS: %w", k, err)
		}
	}
	return os.Unsetenv(EnvMMDSURL)
}

// isTemplate reports whether md is a warm-start template's: the marker
// key and no identity.
func isTemplate(md map[string]any) bool {
	return md[fcguest.TemplateKey] == "1" && md["kici-orchestrator-url"] == nil
}

// pollMMDS fetches the meta-data every `every` until done accepts it. An
// answer retrying cannot change ends it at once; any other failure (no
// network yet, no data yet) is retried until ctx ends. timeout bounds
// each request.
func pollMMDS(ctx context.Context, base string, every, timeout time.Duration, done func(map[string]any) bool) (map[string]any, error) {
	for {
		md, err := fetchMMDS(ctx, base, timeout)
		if err == nil && done(md) {
			return md, nil
		}
		var perm *mmdsError
		if errors.As(err, &perm) {
			return nil, err
		}
		if err == nil {
			err = errors.New("no identity yet")
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("read the configuration from MMDS at %s: %w", base, err)
		case <-time.After(every):
		}
	}
}

// guestNetwork reads and checks the kici-network value.
func guestNetwork(raw any) (fcguest.Network, error) {
	var n fcguest.Network
	b, err := json.Marshal(raw)
	if err == nil {
		err = json.Unmarshal(b, &n)
	}
	if err != nil {
		return n, &mmdsError{fmt.Sprintf("meta-data key %q is not an object of strings: %v", fcguest.NetworkKey, err)}
	}
	if err := n.Validate(); err != nil {
		return n, &mmdsError{fmt.Sprintf("meta-data %s: %v", fcguest.NetworkKey, err)}
	}
	return n, nil
}

// mmdsError is an answer of the metadata service that retrying will not
// change (a malformed document, a refused session).
type mmdsError struct{ msg string }

func (e *mmdsError) Error() string { return e.msg }

// fetchMMDS reads latest/meta-data as JSON through a v2 session token.
func fetchMMDS(ctx context.Context, base string, timeout time.Duration) (map[string]any, error) {
	client := &http.Client{Timeout: timeout}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/latest/api/token", nil)
	if err != nil {
		return nil, &mmdsError{err.Error()}
	}
	req.Header.Set("X-metadata-token-ttl-seconds", mmdsTokenTTL)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	tok, err := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &mmdsError{fmt.Sprintf("MMDS refused a session token: %s", resp.Status)}
	}
	req, err = http.NewRequestWithContext(ctx, http.MethodGet, base+"/latest/meta-data", nil)
	if err != nil {
		return nil, &mmdsError{err.Error()}
	}
	req.Header.Set("X-metadata-token", strings.TrimSpace(string(tok)))
	req.Header.Set("Accept", "application/json")
	resp, err = client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMMDSBytes+1))
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		// Not filled in yet: the orchestrator writes MMDS before boot, so
		// this is a restore whose data is still on its way.
		return nil, fmt.Errorf("no meta-data yet")
	case resp.StatusCode != http.StatusOK:
		return nil, &mmdsError{fmt.Sprintf("MMDS GET latest/meta-data: %s", resp.Status)}
	case len(body) > maxMMDSBytes:
		return nil, &mmdsError{fmt.Sprintf("MMDS meta-data is larger than %d bytes", maxMMDSBytes)}
	}
	var md map[string]any
	if err := json.Unmarshal(body, &md); err != nil {
		return nil, &mmdsError{fmt.Sprintf("MMDS meta-data is not a JSON object: %v", err)}
	}
	return md, nil
}

// mmdsVars maps the meta-data document to environment variables.
func mmdsVars(md map[string]any) (map[string]string, error) {
	str := func(key string) (string, bool, error) {
		v, ok := md[key]
		if !ok {
			return "", false, nil
		}
		s, ok := v.(string)
		if !ok || strings.ContainsRune(s, 0) {
			return "", false, &mmdsError{fmt.Sprintf("meta-data key %q is not a string", key)}
		}
		return s, true, nil
	}
	out := map[string]string{}
	if env, ok := md[mmdsEnvKey]; ok {
		m, ok := env.(map[string]any)
		if !ok {
			return nil, &mmdsError{fmt.Sprintf("meta-data key %q is not an object", mmdsEnvKey)}
		}
		for k, v := range m {
			s, ok := v.(string)
			if !ok || !posixName.MatchString(k) || strings.ContainsRune(s, 0) {
				return nil, &mmdsError{fmt.Sprintf("meta-data %s entry %q is not a variable name with a string value", mmdsEnvKey, k)}
			}
			out[k] = s
		}
	}
	// The identity keys come after kici-env, so that env cannot override
	// them.
	for key, name := range mmdsKeys {
		s, ok, err := str(key)
		if err != nil {
			return nil, err
		}
		if ok {
			out[name] = s
		}
	}
	if out["KICI_ORCHESTRATOR_URL"] == "" {
		return nil, &mmdsError{"meta-data has no kici-orchestrator-url"}
	}
	managed, _, err := str(mmdsManagedKey)
	if err != nil {
		return nil, err
	}
	if managed == "1" {
		out["KICI_AGENT_SCALER"] = "true"
		out["KICI_AGENT_ONE_SHOT"] = "true"
	}
	return out, nil
}
