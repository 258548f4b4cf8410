package admincli

import (
	"errors"
	"fmt"
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

// orphanList is GET /api/v1/scalers/orphans: every live compute of the
// scalers, tracked or not. Error is set when some scaler's compute could
// not be listed (Compute is then incomplete) or when what tracks compute
// could not be read (everything then shows as tracked).
type orphanList struct {
	Compute []scaler.Orphan `json:"compute"`
	Error   string          `json:"error,omitempty"`
}

// stopOrphansRequest is POST /api/v1/scalers/orphans/stop.
type stopOrphansRequest struct {
	IDs []string `json:"ids"`
}

// stopOrphansAnswer is the answer of POST /api/v1/scalers/orphans/stop:
// one outcome per id, in the order sent.
type stopOrphansAnswer struct {
	Outcomes []scaler.StopOutcome `json:"outcomes"`
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
