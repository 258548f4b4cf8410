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

// stopOrphansRequest is POST /api/v1/scalers/orphans/stop. Node, when
// set, names the cluster node the ids run on (a coordinator only).
type stopOrphansRequest struct {
	IDs  []string `json:"ids"`
	Node string   `json:"node,omitempty"`
}

// nodeOrphanList is one node's answer of GET
// /api/v1/scalers/orphans?node=ID. OK is false when the node's compute
// could not be listed, or only part of it: Error says why, Compute holds
// what was listed.
type nodeOrphanList struct {
	Node    string          `json:"node"`
	OK      bool            `json:"ok"`
	Error   string          `json:"error,omitempty"`
	Compute []scaler.Orphan `json:"compute"`
}

// allNodesOrphanList is GET /api/v1/scalers/orphans?node=all: the
// coordinator's answer first, then each connected worker's.
type allNodesOrphanList struct {
	Nodes []nodeOrphanList `json:"nodes"`
}

// nodeStopAnswer is the answer of POST /api/v1/scalers/orphans/stop with
// a node: OK is false when the node failed as a whole (Error says why;
// Outcomes is then empty).
type nodeStopAnswer struct {
	Node     string               `json:"node"`
	OK       bool                 `json:"ok"`
	Error    string               `json:"error,omitempty"`
	Outcomes []scaler.StopOutcome `json:"outcomes"`
}

// nodeAll is the --node value that asks every node of the cluster.
const nodeAll = "all"

// maxNodeIDLen bounds a --node value, as the API does.
const maxNodeIDLen = 128

// checkNodeFlag validates --node when it was given: a node id as
// "kici-admin peers list" shows it (1 to 128 letters, digits, '.', '_'
// or '-'), or "all" when all is true.
func checkNodeFlag(node string, all bool) error {
	if node == nodeAll {
		if all {
			return nil
		}
		return usagef("--node all: name one node to stop compute on (see kici-admin peers list)")
	}
	want := "a node id as kici-admin peers list shows it"
	if all {
		want += ", or all"
	}
	if node == "" || len(node) > maxNodeIDLen {
		return usagef("--node %q: want %s (1 to %d characters)", node, want, maxNodeIDLen)
	}
	for _, c := range []byte(node) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return usagef("--node %q: want %s (letters, digits, '.', '_' and '-')", node, want)
		}
	}
	return nil
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
