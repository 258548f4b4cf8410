package admincli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/kici-dev/kici/internal/scaler"
)

// The auto-scaler's endpoints. Their JSON is written by the api package
// with the types of package scaler (ScalerStatus, ReloadResult, Orphan),
// which is why the scaler commands read those rather than apiv1 types.
const (
	scalersPath      = "/api/v1/scalers"
	scalerReloadPath = "/api/v1/scalers/reload"
	orphansPath      = "/api/v1/scalers/orphans"
	orphansStopPath  = "/api/v1/scalers/orphans/stop"
)

// errNoScaler is what the scaler commands say when the orchestrator
// answers 409: it runs without an auto-scaler.
var errNoScaler = errors.New("no auto-scaler is configured on this orchestrator (KICI_SCALER_CONFIG_PATH)")

// scalerList is GET /api/v1/scalers.
type scalerList struct {
	// Configured is false when the orchestrator runs without an
	// auto-scaler; Scalers is then empty.
	Configured bool                  `json:"configured"`
	Scalers    []scaler.ScalerStatus `json:"scalers"`
}

// reloadAnswer is a 200 answer of POST /api/v1/scalers/reload.
type reloadAnswer struct {
	// Result is "applied".
	Result string              `json:"result"`
	Plan   scaler.ReloadResult `json:"plan"`
}

// orphanList is GET /api/v1/scalers/orphans. Error is set when some
// scaler's compute could not be listed: Compute is then incomplete.
type orphanList struct {
	Compute []scaler.Orphan `json:"compute"`
	Error   string          `json:"error,omitempty"`
}

// stopOrphansRequest is POST /api/v1/scalers/orphans/stop.
type stopOrphansRequest struct {
	AgentIDs []string `json:"agent_ids"`
}

// stopOrphansAnswer is the answer of POST /api/v1/scalers/orphans/stop:
// on 200 without Error, on 422 with it (Stopped may still hold the
// agents stopped before the server refused the rest).
type stopOrphansAnswer struct {
	Stopped []string `json:"stopped"`
	Error   string   `json:"error,omitempty"`
}

// scalerError names a failed call of a scaler endpoint: a 409 means the
// orchestrator has no auto-scaler, said in one line; anything else is
// "<what>: <why>".
func scalerError(what string, err error) error {
	var ae *apiError
	if errors.As(err, &ae) && ae.StatusCode == http.StatusConflict {
		return errNoScaler
	}
	return fmt.Errorf("%s: %w", what, err)
}

// refusal is an error the server explained over several lines: the first
// goes after "kici-admin: ", the others are printed indented below it.
type refusal struct {
	msg   string
	lines []string
}

func (e *refusal) Error() string     { return e.msg }
func (e *refusal) details() []string { return e.lines }

// newRefusal is msg followed by the non-empty lines of reason.
func newRefusal(msg, reason string) *refusal {
	e := &refusal{msg: msg}
	for line := range strings.Lines(reason) {
		if line = strings.TrimRight(line, "\r\n"); strings.TrimSpace(line) != "" {
			e.lines = append(e.lines, line)
		}
	}
	return e
}

// stopOrphans sends POST /api/v1/scalers/orphans/stop. Unlike do, it
// decodes the body of a 422 too: the server then still says which agents
// it stopped before it refused the rest. The 422 comes back as the answer
// with its Error set and a nil error; any other failure is an error.
func (c *client) stopOrphans(ctx context.Context, ids []string) (stopOrphansAnswer, error) {
	var ans stopOrphansAnswer
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	body, err := json.Marshal(stopOrphansRequest{AgentIDs: ids})
	if err != nil {
		return ans, fmt.Errorf("encode request body: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+orphansStopPath, bytes.NewReader(body))
	if err != nil {
		return ans, fmt.Errorf("build request POST %s: %w", orphansStopPath, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "kici-admin")
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return ans, c.transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusUnprocessableEntity {
		return ans, c.readError(resp)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return ans, c.transportError(ctx, fmt.Errorf("read answer of POST %s: %w", orphansStopPath, err))
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		if resp.StatusCode/100 != 2 {
			return ans, &apiError{StatusCode: resp.StatusCode, Message: firstLine(raw)}
		}
		return ans, fmt.Errorf("decode answer of POST %s: %w", orphansStopPath, err)
	}
	if resp.StatusCode/100 != 2 && ans.Error == "" {
		// A 422 from something that is not the orchestrator's handler.
		return ans, &apiError{StatusCode: resp.StatusCode, Message: firstLine(raw)}
	}
	return ans, nil
}
