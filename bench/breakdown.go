package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// logEntry is the part of a JSON slog line the breakdown reads.
type logEntry struct {
	Time  time.Time `json:"time"`
	Msg   string    `json:"msg"`
	RunID string    `json:"run_id"`
	JobID string    `json:"job_id"`
}

// readLog returns, for each wanted message, the time of its first line per
// key (run_id for "run created", job_id otherwise).
func readLog(path string, msgs ...string) (map[string]map[string]time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]map[string]time.Time{}
	for _, m := range msgs {
		out[m] = map[string]time.Time{}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var e logEntry
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		byKey, ok := out[e.Msg]
		if !ok {
			continue
		}
		key := e.JobID
		if e.Msg == "run created" {
			key = e.RunID
		}
		if _, seen := byKey[key]; !seen {
			byKey[key] = e.Time
		}
	}
	return out, sc.Err()
}

// breakdown splits each sample's time into stages, from timestamps that
// all come from the same wall clock: the bench's own (start, response,
// SSE), the orchestrator's and the agent's JSON logs (nanoseconds), the
// job-level log lines the agent stamps ("fetching", or "using the archive
// sent with the job" for an inline archive, and "extracted") and the
// job's finished_at the orchestrator stores when it applies the final
// status (microseconds).
func breakdown(ctx context.Context, c *client, orchLog, agentLog string, samples []sample) ([]stage, error) {
	olog, err := readLog(orchLog, "run created", "job dispatched")
	if err != nil {
		return nil, err
	}
	alog, err := readLog(agentLog, "job accepted", "job ended")
	if err != nil {
		return nil, err
	}
	names := []string{
		"POST /trigger sent → run created (git resolve, read + compile workflow, insert run)",
		"run created → trigger response read by the client",
		"run created → job dispatched (commit, wake, claim, send; logged after the send)",
		"job dispatched → job accepted by the agent",
		"job accepted → archive fetch starts",
		"archive fetch + extract (orchestrator runs git archive)",
		"extracted → step output read by the agent (script, fork, exec, shell start)",
		"step output → job ended on the agent (shell exit, step report)",
		"job ended on the agent → final status applied by the orchestrator",
		"final status applied → run success read from SSE",
		"total",
	}
	d := make([]dist, len(names))
	for _, s := range samples {
		r, err := c.run(ctx, s.runID)
		if err != nil {
			return nil, err
		}
		if len(r.Jobs) != 1 || r.Jobs[0].FinishedAt == nil {
			return nil, fmt.Errorf("run %s: want one finished job, got %+v", s.runID, r.Jobs)
		}
		job := r.Jobs[0]
		lines, err := c.jobLogs(ctx, s.runID, job.Name, -1)
		if err != nil {
			return nil, err
		}
		stepLines, err := c.jobLogs(ctx, s.runID, job.Name, 0)
		if err != nil {
			return nil, err
		}
		var fetching, extracted, output time.Time
		for _, l := range stepLines {
			if l.Text == "hi" {
				output = l.TS
				break
			}
		}
		for _, l := range lines {
			switch {
			case strings.Contains(l.Text, "] fetching "), strings.Contains(l.Text, "] using the archive sent with the job"):
				fetching = l.TS
			case strings.Contains(l.Text, "] extracted "):
				extracted = l.TS
			}
		}
		created, ok1 := olog["run created"][s.runID]
		dispatched, ok2 := olog["job dispatched"][job.ID]
		accepted, ok3 := alog["job accepted"][job.ID]
		ended, ok4 := alog["job ended"][job.ID]
		if !ok1 || !ok2 || !ok3 || !ok4 || fetching.IsZero() || extracted.IsZero() || output.IsZero() {
			return nil, fmt.Errorf("run %s: a log line is missing (run created %v, job dispatched %v, job accepted %v, job ended %v, fetching %v, extracted %v, step output %v)",
				s.runID, ok1, ok2, ok3, ok4, !fetching.IsZero(), !extracted.IsZero(), !output.IsZero())
		}
		points := []time.Duration{
			created.Sub(s.start),
			s.resp.Sub(created),
			dispatched.Sub(created),
			accepted.Sub(dispatched),
			fetching.Sub(accepted),
			extracted.Sub(fetching),
			output.Sub(extracted),
			ended.Sub(output),
			job.FinishedAt.Sub(ended),
			s.end.Sub(*job.FinishedAt),
			s.end.Sub(s.start),
		}
		for i, p := range points {
			d[i] = append(d[i], p)
		}
	}
	return stages("latency", "", names, d), nil
}
