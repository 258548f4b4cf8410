package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// ScheduleFire is a schedule tick that started a run: the workflow of the
// source whose schedule trigger (spec Cron) ticked at Tick.
type ScheduleFire struct {
	Source   string
	Workflow string
	// Tick is the tick, in UTC: at most one run per (Source, Workflow,
	// Tick), whatever the number of specs or orchestrators.
	Tick    time.Time
	Cron    string
	RunID   string
	FiredAt time.Time
	// RunStatus is the run's status when read back with the fire; empty
	// when the run was deleted since.
	RunStatus RunStatus
}

// ClaimScheduleTick records that fire's tick started fire's run. It
// reports false, changing nothing, when the tick of that source and
// workflow was claimed before (by this or another orchestrator): the caller
// must then not create the run. Called in the transaction that creates the
// run, so a claim never outlives a run that failed to be created, and of
// two orchestrators claiming one tick exactly one gets true.
func (q *queries) ClaimScheduleTick(ctx context.Context, fire ScheduleFire) (bool, error) {
	ok, err := q.execChanged(ctx,
		"INSERT INTO schedule_fires (source, workflow, tick, cron, run_id, fired_at) VALUES (?, ?, ?, ?, ?, ?) "+
			"ON CONFLICT (source, workflow, tick) DO NOTHING",
		fire.Source, fire.Workflow, timeArg(fire.Tick), fire.Cron, fire.RunID, timeArg(fire.FiredAt))
	if err != nil {
		return false, fmt.Errorf("claim schedule tick %s of workflow %q of source %q: %w",
			fire.Tick.UTC().Format(time.RFC3339), fire.Workflow, fire.Source, err)
	}
	return ok, nil
}

// LastScheduleFires returns the newest fire of every (source, workflow)
// that has one, with its run's status, sorted by source and workflow.
func (q *queries) LastScheduleFires(ctx context.Context) ([]ScheduleFire, error) {
	rows, err := q.query(ctx,
		"SELECT f.source, f.workflow, f.tick, f.cron, f.run_id, f.fired_at, r.status "+
			"FROM schedule_fires f LEFT JOIN runs r ON r.id = f.run_id "+
			"WHERE f.tick = (SELECT MAX(g.tick) FROM schedule_fires g WHERE g.source = f.source AND g.workflow = f.workflow) "+
			"ORDER BY f.source, f.workflow")
	if err != nil {
		return nil, fmt.Errorf("list last schedule fires: %w", err)
	}
	defer rows.Close()
	var out []ScheduleFire
	for rows.Next() {
		var f ScheduleFire
		var status sql.NullString
		if err := rows.Scan(&f.Source, &f.Workflow, timeCol{&f.Tick}, &f.Cron, &f.RunID, timeCol{&f.FiredAt}, &status); err != nil {
			return nil, fmt.Errorf("list last schedule fires: %w", err)
		}
		f.RunStatus = RunStatus(status.String)
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list last schedule fires: %w", err)
	}
	return out, nil
}

// PruneScheduleFires deletes the fires whose tick is before before, except
// the newest of each (source, workflow), and returns how many it deleted.
// A tick that old is never claimed again: a scheduler only starts ticks
// after it started itself, and the caller keeps before well in the past.
func (q *queries) PruneScheduleFires(ctx context.Context, before time.Time) (int64, error) {
	res, err := q.exec(ctx,
		"DELETE FROM schedule_fires WHERE tick < ? AND tick < "+
			"(SELECT MAX(g.tick) FROM schedule_fires g WHERE g.source = schedule_fires.source AND g.workflow = schedule_fires.workflow)",
		timeArg(before))
	if err != nil {
		return 0, fmt.Errorf("prune schedule fires: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune schedule fires: count rows: %w", err)
	}
	return n, nil
}
