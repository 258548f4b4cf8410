package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
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

// orphanStopTimeout bounds POST /api/v1/scalers/orphans/stop.
const orphanStopTimeout = 240 * time.Second

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

// StopOrphansRequest is POST /api/v1/scalers/orphans/stop: the ids (as
// GET /api/v1/scalers/orphans shows them) of the compute to stop.
type StopOrphansRequest struct {
	IDs []string `json:"ids"`
}

// scalerStopOrphans answers 200 with an outcome per id, in the order
// given, whatever the outcomes; 400 when the body or an id is refused.
func (s *Server) scalerStopOrphans(w http.ResponseWriter, r *http.Request) {
	if !s.scalersConfigured(w) {
		return
	}
	var in StopOrphansRequest
	if !decodeJSON(w, r, &in) {
		return
	}
	if err := scaler.ValidateOrphanIDs(in.IDs); err != nil {
		writeError(w, http.StatusBadRequest, err.Error()+" (see GET /api/v1/scalers/orphans)")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), orphanStopTimeout)
	defer cancel()
	outcomes, err := s.cfg.Scalers.StopOrphans(ctx, in.IDs)
	switch {
	case errors.Is(err, scaler.ErrBadOrphanIDs):
		writeError(w, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, "stop orphans: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"outcomes": outcomes})
}
