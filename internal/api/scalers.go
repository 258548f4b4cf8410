package api

import (
	"context"
	"net/http"
	"time"

	"github.com/kici-dev/kici/internal/scaler"
)

// ScalerAdmin is what the API needs of the auto-scaler.
type ScalerAdmin interface {
	Status() []scaler.ScalerStatus
	Reload(ctx context.Context) (scaler.ReloadResult, error)
	Orphans(ctx context.Context) ([]scaler.Orphan, error)
	StopOrphans(ctx context.Context, ids []string) ([]string, error)
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

// StopOrphansRequest is POST /api/v1/scalers/orphans/stop.
type StopOrphansRequest struct {
	AgentIDs []string `json:"agent_ids"`
}

func (s *Server) scalerStopOrphans(w http.ResponseWriter, r *http.Request) {
	if !s.scalersConfigured(w) {
		return
	}
	var in StopOrphansRequest
	if !decodeJSON(w, r, &in) {
		return
	}
	if len(in.AgentIDs) == 0 {
		writeError(w, http.StatusBadRequest, "agent_ids: name the untracked agents to stop (see GET /api/v1/scalers/orphans)")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), orphanStopTimeout)
	defer cancel()
	stopped, err := s.cfg.Scalers.StopOrphans(ctx, in.AgentIDs)
	if stopped == nil {
		stopped = []string{}
	}
	if err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"stopped": stopped, "error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"stopped": stopped})
}
