package api

import (
	"context"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/store"
)

// addPreviousAttempts fills the PreviousAttempts of the jobs of out (the
// API form of run) that were retried. A run none of whose jobs was
// retried costs no read.
func (s *Server) addPreviousAttempts(ctx context.Context, run store.Run, out *apiv1.Run) error {
	retried := false
	for _, j := range run.Jobs {
		retried = retried || j.Retries > 0
	}
	if !retried {
		return nil
	}
	byJob, err := s.db.ListRunAttempts(ctx, run.ID)
	if err != nil {
		return err
	}
	for i := range out.Jobs {
		for _, a := range byJob[out.Jobs[i].ID] {
			out.Jobs[i].PreviousAttempts = append(out.Jobs[i].PreviousAttempts, apiv1.JobAttempt{
				Attempt: a.Attempt, Cause: a.Cause, Error: a.Error, AgentID: a.AgentID, StartedAt: a.StartedAt, EndedAt: a.EndedAt})
		}
	}
	return nil
}
