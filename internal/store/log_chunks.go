package store

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
)

// LogChunkWrite is one log chunk to store in the database (see
// AppendLogChunks): Body holds the step log's bytes for its lines, empty
// for a chunk without lines (which only advances the job's position).
type LogChunkWrite struct {
	RunID, JobID string
	Step         int
	// Attempt (at least 1) and Seq order the chunks of a job.
	Attempt int
	Seq     uint64
	Body    []byte
}

// LogChunkStored is what AppendLogChunks made of one chunk.
type LogChunkStored struct {
	// Stored is false for a replay: a chunk not after the job's last.
	Stored bool
	// Start and End are the chunk's byte offsets in its step's log (equal
	// for a chunk without lines).
	Start, End int64
}

// LogChunk is one stored chunk of a step's log, read back.
type LogChunk struct {
	Start, End int64
	Body       []byte
}

// AppendLogChunks stores chunks in one transaction, in order. Per job, a
// chunk whose (Attempt, Seq) is not after the last one stored for the job
// (across its steps) is a replay and is skipped; a stored chunk goes at
// the end of its step's log. The job's position row is locked first, so
// two orchestrators appending to one job (an agent that moved between
// coordinators mid-flight) are serialised and never store a chunk twice.
func (db *DB) AppendLogChunks(ctx context.Context, chunks []LogChunkWrite) ([]LogChunkStored, error) {
	out := make([]LogChunkStored, len(chunks))
	for _, c := range chunks {
		if c.Seq == 0 || c.Seq > math.MaxInt64 || c.Attempt < 1 {
			return nil, fmt.Errorf("append log chunks: job %q: attempt %d, seq %d: want attempt ≥ 1 and 1 ≤ seq ≤ 2^63-1", c.JobID, c.Attempt, c.Seq)
		}
	}
	// Jobs are locked in one order, so two batches never wait on each
	// other.
	jobs := map[string]bool{}
	var order []LogChunkWrite
	for _, c := range chunks {
		if !jobs[c.JobID] {
			jobs[c.JobID] = true
			order = append(order, c)
		}
	}
	slices.SortFunc(order, func(a, b LogChunkWrite) int { return strings.Compare(a.JobID, b.JobID) })
	err := db.Tx(ctx, func(tx *Tx) error {
		clear(out)
		last := map[string][2]int64{} // job: (attempt, seq)
		for _, c := range order {
			if _, err := tx.exec(ctx,
				"INSERT INTO log_positions (job_id, run_id, attempt, seq) VALUES (?, ?, 0, 0) ON CONFLICT (job_id) DO NOTHING",
				c.JobID, c.RunID); err != nil {
				return fmt.Errorf("append log chunks of job %q: %w", c.JobID, classify(err))
			}
			var a, s int64
			if err := tx.w.QueryRowContext(ctx, tx.d.rebind("SELECT attempt, seq FROM log_positions WHERE job_id = ?"+tx.d.lockRow(false)), c.JobID).Scan(&a, &s); err != nil {
				return fmt.Errorf("append log chunks of job %q: %w", c.JobID, classify(err))
			}
			last[c.JobID] = [2]int64{a, s}
		}
		type stepKey struct {
			job  string
			step int
		}
		ends := map[stepKey]int64{}
		for i, c := range chunks {
			pos := [2]int64{int64(c.Attempt), int64(c.Seq)}
			if cmp.Or(cmp.Compare(pos[0], last[c.JobID][0]), cmp.Compare(pos[1], last[c.JobID][1])) <= 0 {
				continue // a replay
			}
			last[c.JobID] = pos
			k := stepKey{c.JobID, c.Step}
			end, ok := ends[k]
			if !ok {
				if err := tx.w.QueryRowContext(ctx, tx.d.rebind("SELECT COALESCE(MAX(end_off), 0) FROM log_chunks WHERE job_id = ? AND step = ?"),
					c.JobID, c.Step).Scan(&end); err != nil {
					return fmt.Errorf("append log chunks of job %q: %w", c.JobID, classify(err))
				}
			}
			out[i] = LogChunkStored{Stored: true, Start: end, End: end + int64(len(c.Body))}
			if len(c.Body) > 0 {
				if _, err := tx.exec(ctx,
					"INSERT INTO log_chunks (run_id, job_id, step, start_off, end_off, attempt, seq, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
					c.RunID, c.JobID, c.Step, out[i].Start, out[i].End, c.Attempt, int64(c.Seq), c.Body); err != nil {
					return fmt.Errorf("append log chunk %d of job %q: %w", c.Seq, c.JobID, classify(err))
				}
			}
			ends[k] = out[i].End
		}
		for _, c := range order {
			p := last[c.JobID]
			if _, err := tx.exec(ctx, "UPDATE log_positions SET attempt = ?, seq = ? WHERE job_id = ?", p[0], p[1], c.JobID); err != nil {
				return fmt.Errorf("append log chunks of job %q: %w", c.JobID, classify(err))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadLogChunks returns up to limit chunks of a step's log that end after
// offset from, in order.
func (q *queries) ReadLogChunks(ctx context.Context, runID, jobID string, step int, from int64, limit int) ([]LogChunk, error) {
	rows, err := q.query(ctx,
		"SELECT start_off, end_off, body FROM log_chunks WHERE job_id = ? AND step = ? AND run_id = ? AND end_off > ? ORDER BY start_off LIMIT ?",
		jobID, step, runID, from, limit)
	if err != nil {
		return nil, fmt.Errorf("read log chunks of job %q step %d: %w", jobID, step, classify(err))
	}
	defer rows.Close()
	var out []LogChunk
	for rows.Next() {
		var c LogChunk
		if err := rows.Scan(&c.Start, &c.End, &c.Body); err != nil {
			return nil, fmt.Errorf("read log chunks of job %q step %d: %w", jobID, step, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read log chunks of job %q step %d: %w", jobID, step, classify(err))
	}
	return out, nil
}

// LogSize is the size of a step's log in the database: the end of its
// last chunk, 0 without one.
func (q *queries) LogSize(ctx context.Context, runID, jobID string, step int) (int64, error) {
	var n int64
	err := q.r.QueryRowContext(ctx, q.d.rebind("SELECT COALESCE(MAX(end_off), 0) FROM log_chunks WHERE job_id = ? AND step = ? AND run_id = ?"),
		jobID, step, runID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("size of log of job %q step %d: %w", jobID, step, classify(err))
	}
	return n, nil
}

// DeleteRunLogs removes every stored log chunk and position of a run (its
// rows go with the run anyway; this is for a run kept while its logs go).
func (db *DB) DeleteRunLogs(ctx context.Context, runID string) error {
	return db.Tx(ctx, func(tx *Tx) error {
		for _, table := range []string{"log_chunks", "log_positions"} {
			if _, err := tx.exec(ctx, "DELETE FROM "+table+" WHERE run_id = ?", runID); err != nil {
				return fmt.Errorf("delete logs of run %q: %w", runID, classify(err))
			}
		}
		return nil
	})
}
