package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/scaler"
)

// ScalerAdmin is what the API needs of the auto-scaler.
type ScalerAdmin interface {
	Status() []scaler.ScalerStatus
	Reload(ctx context.Context) (scaler.ReloadResult, error)
	// Orphans lists every live compute of the scalers, tracked or not;
	// the error says what could not be listed (the rest is returned).
	Orphans(ctx context.Context) ([]scaler.Orphan, error)
	// StopOrphans stops the named untracked compute and answers an
	// outcome per id; an error wrapping scaler.ErrBadOrphanIDs refuses
	// the ids (400), any other is the server's (500).
	StopOrphans(ctx context.Context, ids []string) ([]scaler.StopOutcome, error)
	// Retry lifts a scaler's deferral after failed spawns; an error
	// wrapping scaler.ErrUnknownScaler means no scaler has the name.
	Retry(name string) error
}

// ErrUnknownNode is wrapped by NodeScalers' errors for a node id that is neither this
// coordinator nor a worker connected to it.
var ErrUnknownNode = errors.New("unknown node")

// NodeScalers reaches the scalers of every node of a cluster, from a coordinator.
type NodeScalers interface {
	// Self is this coordinator's node id.
	Self() string
	// Nodes are the ids of the workers connected to this coordinator, sorted.
	Nodes() []string
	// NodeOrphans lists a worker's scaler compute (as Orphans does locally); a worker without scalers answers an empty list.
	NodeOrphans(ctx context.Context, node string) ([]scaler.Orphan, error)
	// NodeStopOrphans stops named untracked compute on a worker.
	NodeStopOrphans(ctx context.Context, node string, ids []string) ([]scaler.StopOutcome, error)
}

// orphanStopTimeout bounds POST /api/v1/scalers/orphans/stop.
const orphanStopTimeout = 240 * time.Second

// nodeOrphansTimeout bounds GET /api/v1/scalers/orphans?node=, all the
// nodes of node=all together.
const nodeOrphansTimeout = 240 * time.Second

// nodeAll is the node parameter that asks every node of the cluster.
const nodeAll = "all"

// maxNodeQueries bounds the nodes node=all asks at once.
const maxNodeQueries = 8

// maxNodeIDLen bounds a node id of the node parameter.
const maxNodeIDLen = 128

func (s *Server) scalersConfigured(w http.ResponseWriter) bool {
	if s.cfg.Scalers == nil {
		writeError(w, http.StatusConflict, "no auto-scaler is configured (set KICI_SCALER_CONFIG_PATH and restart)")
		return false
	}
	return true
}

func (s *Server) scalerStatus(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Scalers == nil {
		writeJSON(w, http.StatusOK, map[string]any{"configured": false, "scalers": []scaler.ScalerStatus{}})
		return
	}
	st := s.cfg.Scalers.Status()
	if st == nil {
		st = []scaler.ScalerStatus{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"configured": true, "scalers": st})
}

func (s *Server) scalerReload(w http.ResponseWriter, r *http.Request) {
	if !s.scalersConfigured(w) {
		return
	}
	res, err := s.cfg.Scalers.Reload(r.Context())
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, "reload rejected; the running configuration is unchanged: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"result": "applied", "plan": res})
}

// scalerRetry lifts a scaler's deferral, so that the jobs waiting for it
// are offered to it at once (after the operator fixed the host).
func (s *Server) scalerRetry(w http.ResponseWriter, r *http.Request) {
	if !s.scalersConfigured(w) {
		return
	}
	name := r.PathValue("name")
	if err := s.cfg.Scalers.Retry(name); err != nil {
		if errors.Is(err, scaler.ErrUnknownScaler) {
			writeError(w, http.StatusNotFound, "no scaler named "+strconv.Quote(name)+" (see GET /api/v1/scalers)")
			return
		}
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"scaler": name, "result": "deferral lifted"})
}

func (s *Server) scalerOrphans(w http.ResponseWriter, r *http.Request) {
	if node := r.URL.Query().Get("node"); node != "" {
		s.nodeScalerOrphans(w, r, node)
		return
	}
	if !s.scalersConfigured(w) {
		return
	}
	list, err := s.cfg.Scalers.Orphans(r.Context())
	if list == nil {
		list = []scaler.Orphan{}
	}
	out := map[string]any{"compute": list}
	if err != nil {
		out["error"] = err.Error()
	}
	writeJSON(w, http.StatusOK, out)
}

// nodeOrphans is one node's answer to GET /api/v1/scalers/orphans?node=.
// OK is false when the node's compute could not be listed, or only part
// of it (Error says why; Compute holds what was listed, often nothing).
type nodeOrphans struct {
	Node    string          `json:"node"`
	OK      bool            `json:"ok"`
	Error   string          `json:"error,omitempty"`
	Compute []scaler.Orphan `json:"compute"`
}

// nodeStopOutcomes is a node's answer to POST
// /api/v1/scalers/orphans/stop with a node: OK is false when the node
// could not be asked or failed as a whole (Error says why).
type nodeStopOutcomes struct {
	Node     string               `json:"node"`
	OK       bool                 `json:"ok"`
	Error    string               `json:"error,omitempty"`
	Outcomes []scaler.StopOutcome `json:"outcomes"`
}

// checkNode refuses a node parameter that is not a plausible node id (or
// "all", when all is allowed), or that names a node of an orchestrator
// that is not a coordinator; it answers 400 itself.
func (s *Server) checkNode(w http.ResponseWriter, node string, all bool) bool {
	if node == nodeAll && !all {
		writeError(w, http.StatusBadRequest, `node "all": name one node to stop compute on (see kici-admin peers list)`)
		return false
	}
	if err := validNodeID(node); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return false
	}
	if s.cfg.NodeScalers == nil {
		writeError(w, http.StatusBadRequest, "this orchestrator is not a cluster coordinator; --node is for clusters")
		return false
	}
	return true
}

// validNodeID checks a node id: 1 to maxNodeIDLen characters of
// [A-Za-z0-9._-].
func validNodeID(node string) error {
	if node == "" || len(node) > maxNodeIDLen {
		return fmt.Errorf("node %q: want a node id of 1 to %d characters (see kici-admin peers list)", clip(node, maxNodeIDLen), maxNodeIDLen)
	}
	for _, c := range []byte(node) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return fmt.Errorf("node %q: want a node id of letters, digits, '.', '_' and '-' (see kici-admin peers list)", node)
		}
	}
	return nil
}

// unknownNode answers 404 for a node that is neither this coordinator
// nor a worker connected to it.
func unknownNode(w http.ResponseWriter, node string) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("node %q is neither this coordinator nor a worker connected to it (see kici-admin peers list)", node))
}

// nodeScalerOrphans answers GET /api/v1/scalers/orphans?node=: one node's
// answer, or every node's under "nodes" for node=all. A node's failure is
// its answer's (ok false), not the request's.
func (s *Server) nodeScalerOrphans(w http.ResponseWriter, r *http.Request, node string) {
	if !s.checkNode(w, node, true) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), nodeOrphansTimeout)
	defer cancel()
	if node != nodeAll {
		ans, err := s.orphansOf(ctx, node)
		if errors.Is(err, ErrUnknownNode) {
			unknownNode(w, node)
			return
		}
		writeJSON(w, http.StatusOK, ans)
		return
	}
	self := s.cfg.NodeScalers.Self()
	nodes := []string{self}
	for _, n := range s.cfg.NodeScalers.Nodes() {
		if n != self {
			nodes = append(nodes, n)
		}
	}
	answers := make([]nodeOrphans, len(nodes))
	sem := make(chan struct{}, maxNodeQueries)
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
				answers[i], _ = s.orphansOf(ctx, n)
			case <-ctx.Done():
				answers[i] = nodeOrphans{Node: n, Error: ctx.Err().Error(), Compute: []scaler.Orphan{}}
			}
		}()
	}
	wg.Wait()
	writeJSON(w, http.StatusOK, map[string]any{"nodes": answers})
}

// orphansOf is node's answer: this coordinator's own scalers (an empty
// list when it has none) or a worker's. The error is the failure the
// answer carries, for the caller to tell ErrUnknownNode.
func (s *Server) orphansOf(ctx context.Context, node string) (nodeOrphans, error) {
	var list []scaler.Orphan
	var err error
	switch {
	case node != s.cfg.NodeScalers.Self():
		list, err = s.cfg.NodeScalers.NodeOrphans(ctx, node)
	case s.cfg.Scalers != nil:
		list, err = s.cfg.Scalers.Orphans(ctx)
	}
	ans := nodeOrphans{Node: node, OK: err == nil, Compute: list}
	if ans.Compute == nil {
		ans.Compute = []scaler.Orphan{}
	}
	if err != nil {
		ans.Error = err.Error()
	}
	return ans, err
}

// StopOrphansRequest is POST /api/v1/scalers/orphans/stop: the ids (as
// GET /api/v1/scalers/orphans shows them) of the compute to stop, and the
// node of the cluster they run on (empty: this orchestrator; a
// coordinator only).
type StopOrphansRequest struct {
	IDs  []string `json:"ids"`
	Node string   `json:"node,omitempty"`
}

// scalerStopOrphans answers 200 with an outcome per id, in the order
// given, whatever the outcomes; 400 when the body or an id is refused.
// With a node, the answer is that node's, ok false when it failed as a
// whole; 404 for a node that is not in the cluster.
func (s *Server) scalerStopOrphans(w http.ResponseWriter, r *http.Request) {
	var in StopOrphansRequest
	if !decodeJSON(w, r, &in) {
		return
	}
	if in.Node != "" {
		if !s.checkNode(w, in.Node, false) {
			return
		}
		audited(r, "node:"+in.Node, "")
	}
	if (in.Node == "" || in.Node == s.cfg.NodeScalers.Self()) && !s.scalersConfigured(w) {
		return
	}
	if err := scaler.ValidateOrphanIDs(in.IDs); err != nil {
		writeError(w, http.StatusBadRequest, err.Error()+" (see GET /api/v1/scalers/orphans)")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), orphanStopTimeout)
	defer cancel()
	var outcomes []scaler.StopOutcome
	var err error
	if in.Node == "" || in.Node == s.cfg.NodeScalers.Self() {
		outcomes, err = s.cfg.Scalers.StopOrphans(ctx, in.IDs)
	} else {
		outcomes, err = s.cfg.NodeScalers.NodeStopOrphans(ctx, in.Node, in.IDs)
	}
	switch {
	case errors.Is(err, scaler.ErrBadOrphanIDs):
		writeError(w, http.StatusBadRequest, err.Error())
		return
	case errors.Is(err, ErrUnknownNode):
		unknownNode(w, in.Node)
		return
	case err != nil && in.Node == "":
		writeError(w, http.StatusInternalServerError, "stop orphans: "+err.Error())
		return
	}
	if outcomes == nil {
		outcomes = []scaler.StopOutcome{}
	}
	if in.Node == "" {
		writeJSON(w, http.StatusOK, map[string]any{"outcomes": outcomes})
		return
	}
	ans := nodeStopOutcomes{Node: in.Node, OK: err == nil, Outcomes: outcomes}
	if err != nil {
		ans.Error = err.Error()
		ans.Outcomes = []scaler.StopOutcome{}
	}
	writeJSON(w, http.StatusOK, ans)
}
