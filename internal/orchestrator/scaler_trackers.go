package orchestrator

import "context"

// trackers is the auto-scaler's Config.Trackers: what holds scaler
// compute besides the manager's own spawns. registered are the agents
// connected to this orchestrator; boundJob those a job not ended is
// dispatched to or waits for (the dispatch queue). The connected agents
// are read first: one that leaves meanwhile still has its job's row. A
// store error fails the whole reading, and the manager then counts every
// compute as tracked.
func (sc *scalers) trackers(ctx context.Context) (registered, boundJob map[string]bool, err error) {
	registered = map[string]bool{}
	for _, a := range sc.s.disp.Agents() {
		registered[a.ID] = true
	}
	boundJob, err = sc.s.db.BoundAgents(ctx)
	if err != nil {
		return nil, nil, err
	}
	return registered, boundJob, nil
}
