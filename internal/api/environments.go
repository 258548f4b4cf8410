package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/workflow"
)

// maxEnvironmentBranches bounds the branch globs of one environment.
const maxEnvironmentBranches = 50

func environmentOut(e store.Environment) apiv1.Environment {
	return apiv1.Environment{Name: e.Name, RequireApproval: e.RequireApproval, Branches: e.Branches,
		UpdatedAt: e.UpdatedAt, UpdatedBy: e.UpdatedBy}
}

func (s *Server) listEnvironments(w http.ResponseWriter, r *http.Request) {
	list, err := s.db.ListEnvironments(r.Context())
	if err != nil {
		s.storeError(w, "list environments", err)
		return
	}
	out := apiv1.EnvironmentList{Environments: []apiv1.Environment{}}
	for _, e := range list {
		out.Environments = append(out.Environments, environmentOut(e))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) setEnvironment(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	audited(r, "environment:"+name, "")
	if !workflow.ValidEnvironment(name) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("environment %q: use up to 64 letters, digits, _, . and -, starting with a letter or digit", name))
		return
	}
	var in apiv1.EnvironmentRequest
	if !decodeJSON(w, r, &in) {
		return
	}
	if len(in.Branches) > maxEnvironmentBranches {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("branches: %d globs, over the limit of %d", len(in.Branches), maxEnvironmentBranches))
		return
	}
	for _, b := range in.Branches {
		if b == "" || len(b) > 200 || !doublestar.ValidatePattern(b) || strings.HasPrefix(b, "refs/") {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("branches: %q is not a branch glob such as main or release/* (without refs/heads/)", b))
			return
		}
	}
	e, err := s.db.PutEnvironment(r.Context(), store.Environment{Name: name, RequireApproval: in.RequireApproval,
		Branches: in.Branches, UpdatedBy: principal(r).Name})
	if err != nil {
		s.storeError(w, "set environment "+name, err)
		return
	}
	audited(r, "", fmt.Sprintf("require_approval=%t branches=%s", e.RequireApproval, strings.Join(e.Branches, ",")))
	writeJSON(w, http.StatusOK, environmentOut(e))
}

func (s *Server) deleteEnvironment(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	audited(r, "environment:"+name, "")
	if err := s.db.DeleteEnvironment(r.Context(), name); err != nil {
		s.storeError(w, fmt.Sprintf("environment %q", name), err)
		return
	}
	writeJSON(w, http.StatusOK, apiv1.Environment{Name: name, Branches: []string{}})
}

// markHeldJobs shows each job of the run held for its environment's
// approval as awaiting_approval (the store keeps it waiting).
func (s *Server) markHeldJobs(ctx context.Context, run *apiv1.Run) error {
	approvals, err := s.db.ListJobApprovals(ctx, run.ID)
	if err != nil {
		return err
	}
	for _, a := range approvals {
		if a.State != store.ApprovalPending {
			continue
		}
		for i := range run.Jobs {
			if run.Jobs[i].ID == a.JobID && run.Jobs[i].Status == string(store.JobWaiting) {
				run.Jobs[i].Status = apiv1.JobAwaitingApproval
			}
		}
	}
	return nil
}
