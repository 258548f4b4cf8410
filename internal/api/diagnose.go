package api

import (
	"context"
	"net/http"

	"github.com/kici-dev/kici/internal/apiv1"
)

// Diagnoser is what the API needs to answer GET /api/v1/diagnose: the
// orchestrator checks itself where its data lives.
type Diagnoser interface {
	Diagnose(ctx context.Context) []apiv1.DiagnoseCheck
}

// diagnose answers 200 with every check, passed or failed: a failed check
// is a finding, not an error of the request.
func (s *Server) diagnose(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Diagnoser == nil {
		writeError(w, http.StatusServiceUnavailable, "diagnose is not available on this server")
		return
	}
	checks := s.cfg.Diagnoser.Diagnose(r.Context())
	if checks == nil {
		checks = []apiv1.DiagnoseCheck{}
	}
	writeJSON(w, http.StatusOK, apiv1.Diagnosis{Checks: checks})
}
