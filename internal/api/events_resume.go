package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/logs"
	"github.com/kici-dev/kici/internal/runstate"
	"github.com/kici-dev/kici/internal/store"
)

// The position of a client in a run's logs is a list of entries
// "JOB:STEP:OFFSET" joined by ",", one per job at most, sorted by JOB: the
// job's index in the run's jobs (the order GET /api/v1/runs/{id} lists
// them), a step (-1 for the setup, 0 to n-1) and the byte offset in that
// step's log up to which the client has its lines. The client has every
// line of the job's earlier steps, and none of its later ones; it has seen
// no line of a job it does not list. The provisioning section (step -2) is
// not part of a position: it comes as "scaler" events.
//
// Each "log" frame of the event stream carries, as its id, the position
// after it of every job the stream knows one of; a client resumes from it
// with the Last-Event-ID header (EventSource sends it when it reconnects),
// or from a position of its own making with the from parameter.

// maxStartPosition bounds a start position (Last-Event-ID or from), in
// bytes.
const maxStartPosition = 64 << 10

// keepAliveInterval is how often the event stream sends a comment, so that
// proxies do not close it as idle.
const keepAliveInterval = 15 * time.Second

// positionError is a start position the request got wrong; the stream
// answers it with 400 and the message.
type positionError struct {
	// source names where the position came from: "Last-Event-ID" or
	// "from".
	source string
	// entry is the entry at fault; empty when the whole value is.
	entry   string
	problem string
}

func (e *positionError) Error() string {
	if e.entry == "" {
		return e.source + ": " + e.problem
	}
	return fmt.Sprintf("%s entry %q: %s", e.source, e.entry, e.problem)
}

// logPos is a position in one job's log.
type logPos struct {
	step int
	off  int64
}

// startPosition reads the request's start position, from the Last-Event-ID
// header or else the from parameter, and checks it against the run and its
// stored logs: it returns the position by job index, nil when the request
// gives none, a *positionError when the position is not one in the run's
// logs, or the store's error.
func (s *Server) startPosition(r *http.Request, run store.Run) (map[int]logPos, error) {
	source, raw := "Last-Event-ID", r.Header.Get("Last-Event-ID")
	if raw == "" {
		var given bool
		var err error
		source = "from"
		raw, given, err = fromParam(r.URL.RawQuery)
		if err != nil || !given {
			return nil, err
		}
	}
	bad := func(entry, format string, args ...any) error {
		return &positionError{source: source, entry: entry, problem: fmt.Sprintf(format, args...)}
	}
	if len(raw) > maxStartPosition {
		return nil, bad("", "is %d bytes, more than the %d allowed", len(raw), maxStartPosition)
	}
	pos := map[int]logPos{}
	if raw == "" {
		return pos, nil // from= with no entry: the client has seen no line
	}
	for entry := range strings.SplitSeq(raw, ",") {
		if entry == "" {
			return nil, bad("", `has an empty entry: want JOB:STEP:OFFSET entries joined by ","`)
		}
		parts := strings.Split(entry, ":")
		if len(parts) != 3 {
			return nil, bad(entry, "want JOB:STEP:OFFSET (job index, step, byte offset)")
		}
		i, err1 := strconv.Atoi(parts[0])
		step, err2 := strconv.Atoi(parts[1])
		off, err3 := strconv.ParseInt(parts[2], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, bad(entry, "want JOB:STEP:OFFSET, three whole numbers")
		}
		if i < 0 || i >= len(run.Jobs) {
			return nil, bad(entry, "job index %d is out of range: the run has %d jobs", i, len(run.Jobs))
		}
		if _, dup := pos[i]; dup {
			return nil, bad(entry, "job index %d is given more than once", i)
		}
		job := run.Jobs[i]
		if step < logs.SetupStep || step >= len(job.Steps) {
			return nil, bad(entry, "step %d is out of range: job %q has steps -1 (setup) to %d", step, job.Name, len(job.Steps)-1)
		}
		if off < 0 {
			return nil, bad(entry, "offset %d is negative", off)
		}
		if off > 0 {
			key := logs.StepKey{RunID: run.ID, JobID: job.ID, Step: step}
			size, err := s.logs.Size(r.Context(), key)
			if err != nil {
				return nil, err
			}
			if off > size {
				return nil, bad(entry, "offset %d is past the end of the step's log (%d bytes)", off, size)
			}
			if off < size {
				_, _, err := s.logs.Read(r.Context(), key, off, 1)
				if errors.Is(err, logs.ErrBadCursor) {
					return nil, bad(entry, "offset %d is not at the start of a line", off)
				}
				if err != nil {
					return nil, err
				}
			}
		}
		pos[i] = logPos{step: step, off: off}
	}
	return pos, nil
}

// fromParam finds the from parameter in a raw query. Unlike url.Query,
// which drops a pair it cannot decode, it reports one that does not decode
// or is given twice.
func fromParam(rawQuery string) (value string, given bool, err error) {
	for pair := range strings.SplitSeq(rawQuery, "&") {
		rawKey, rawValue, _ := strings.Cut(pair, "=")
		if key, err := url.QueryUnescape(rawKey); err != nil || key != "from" {
			continue
		}
		if given {
			return "", false, &positionError{source: "from", problem: "given more than once, want it once"}
		}
		if value, err = url.QueryUnescape(rawValue); err != nil {
			return "", false, &positionError{source: "from", problem: fmt.Sprintf("%q does not decode", rawValue)}
		}
		given = true
	}
	return value, given, nil
}

// jobLog is what an event stream knows of the client's position in one
// job's log.
type jobLog struct {
	index    int
	id, name string
	// steps is the number of the job's steps.
	steps int
	// known is set once the position is known: from the start position,
	// or from the first lines the stream sends of the job.
	known bool
	// top is the step of the position: the last step the client has lines
	// of, or the start position's step.
	top int
	// ends holds, by step, the offset up to which the client has the
	// step's lines, for top and for each earlier step the stream has sent
	// lines of. The client has none of the steps after top beyond ends.
	ends map[int]int64
}

// start sets the position.
func (j *jobLog) start(step int, off int64) {
	j.known, j.top, j.ends = true, step, map[int]int64{step: off}
}

// end returns the offset up to which the client has the step's lines;
// false when the stream cannot know: an earlier step than the position's
// that it has sent nothing of.
func (j *jobLog) end(step int) (int64, bool) {
	if off, ok := j.ends[step]; ok {
		return off, true
	}
	return 0, step > j.top
}

// advance records that the client has the step's lines up to off.
func (j *jobLog) advance(step int, off int64) {
	j.ends[step] = off
	j.top = max(j.top, step)
}

// eventStream is one client's Server-Sent Events stream of a run. It
// serves one request and is not safe for concurrent use.
//
// A stream that starts from a position (resume) sends, after the run's and
// each job's status, every stored line past the position, then the live
// events; a live chunk the client already has is dropped, and one that
// does not follow the client's position (lines that were never published
// to this stream, or lost when it fell behind) makes the stream read the
// job's log from the store instead. Without a start position, a stream
// sends the live events only, as they come.
type eventStream struct {
	s       *Server
	ctx     context.Context
	w       http.ResponseWriter
	flusher http.Flusher
	runID   string
	events  <-chan logs.Event
	stop    func()
	// resume is set when the request gave a start position: every job's
	// position is known, and falling behind the live events is made up
	// for from the store.
	resume bool
	jobs   []*jobLog
	byID   map[string]*jobLog
}

// setJobs takes the run's jobs, at the start position when there is one
// (a job it does not list starts at the beginning of its log).
func (st *eventStream) setJobs(run store.Run, start map[int]logPos) {
	st.resume = start != nil
	st.byID = make(map[string]*jobLog, len(run.Jobs))
	for i, job := range run.Jobs {
		j := &jobLog{index: i, id: job.ID, name: job.Name, steps: len(job.Steps)}
		if st.resume {
			p, ok := start[i]
			if !ok {
				p = logPos{step: logs.SetupStep}
			}
			j.start(p.step, p.off)
		}
		st.jobs = append(st.jobs, j)
		st.byID[job.ID] = j
	}
}

// serve writes the stream until the run ends, the client goes away or the
// stream cannot go on.
func (st *eventStream) serve(run store.Run) {
	if st.resume {
		if !st.resync(run) {
			return
		}
	} else {
		st.send("", apiv1.Event{Kind: "run", RunID: run.ID, Status: string(run.Status), Error: run.Error})
		if runstate.RunTerminal(run.Status) {
			return
		}
	}
	keepAlive := time.NewTicker(keepAliveInterval)
	defer keepAlive.Stop()
	for {
		select {
		case <-st.ctx.Done():
			return
		case <-keepAlive.C:
			fmt.Fprint(st.w, ": ping\n\n")
			st.flusher.Flush()
		case ev, ok := <-st.events:
			if !ok || !st.handle(ev) {
				return
			}
		}
	}
}

// handle forwards one live event; it reports whether the stream goes on.
func (st *eventStream) handle(ev logs.Event) bool {
	switch ev.Kind {
	case logs.EventLog:
		return st.live(ev.Log)
	case logs.EventStatus:
		var out apiv1.Event
		if json.Unmarshal(ev.Data, &out) != nil {
			return true
		}
		if out.Kind == "run" && runstate.RunTerminal(store.RunStatus(out.Status)) {
			// The final status is the stream's last frame: a resuming
			// client gets every stored line before it.
			if st.resume && !st.catchUpAll() {
				return false
			}
			st.send("", out)
			return false
		}
		st.send("", out)
	case logs.EventLagged:
		if !st.resume {
			st.send("", apiv1.Event{Kind: "lagged", RunID: st.runID, Error: "events were dropped; reload the run and its logs"})
			return false
		}
		return st.recover()
	}
	return true
}

// live forwards a live chunk of lines, unless the client has it already;
// one that does not follow the client's position is read from the store
// instead, with whatever else the job's log holds past the position. It
// reports whether the stream goes on.
func (st *eventStream) live(le *logs.LogEvent) bool {
	j := st.byID[le.JobID]
	if j == nil || le.Step < logs.SetupStep || le.Step >= j.steps {
		// Not a position the stream can keep: pass the lines on.
		st.sendLog(j, le.JobID, le.Step, liveLines(le))
		return true
	}
	if !j.known {
		j.start(le.Step, le.Next)
		st.sendLog(j, j.id, le.Step, liveLines(le))
		return true
	}
	end, ok := j.end(le.Step)
	switch {
	case !ok:
		// Output added to a step before the position's (an agent's note
		// to the setup's log, a new attempt of the job): the stream has
		// sent none of it, and the client cannot have seen it live.
		j.ends[le.Step] = le.Next
		st.sendLog(j, j.id, le.Step, liveLines(le))
	case le.Next <= end:
		// Sent already, by a read of the store.
	case le.Cursor == end && le.Step <= j.top:
		j.advance(le.Step, le.Next)
		st.sendLog(j, j.id, le.Step, liveLines(le))
	default:
		// A gap, an overlap or a later step: the store holds at least
		// this chunk, and what came before it in order.
		return st.catchUp(j)
	}
	return true
}

// recover follows a stream that fell behind the live events: it subscribes
// again, and resends the statuses and what the store holds past each
// job's position. It reports whether the stream goes on.
func (st *eventStream) recover() bool {
	st.stop()
	st.events, st.stop = st.s.logs.Subscribe(st.runID)
	run, err := st.s.db.GetRun(st.ctx, st.runID)
	if err != nil {
		st.fail("read the run", err)
		return false
	}
	return st.resync(run)
}

// resync sends the run's status and each job's, then what the store holds
// past every job's position. It reports false when the stream is over: the
// run has ended (its status, sent last, ends the stream) or a read failed.
func (st *eventStream) resync(run store.Run) bool {
	ended := runstate.RunTerminal(run.Status)
	runStatus := apiv1.Event{Kind: "run", RunID: run.ID, Status: string(run.Status), Error: run.Error}
	if !ended {
		st.send("", runStatus)
	}
	for _, job := range run.Jobs {
		st.send("", apiv1.Event{Kind: "job", RunID: run.ID, Job: job.Name, JobID: job.ID, Status: string(job.Status), Error: job.Error})
	}
	if !st.catchUpAll() {
		return false
	}
	if ended {
		st.send("", runStatus)
		return false
	}
	return true
}

// catchUpAll catches up every job whose position is known; it reports
// false when a read failed.
func (st *eventStream) catchUpAll() bool {
	for _, j := range st.jobs {
		if j.known && !st.catchUp(j) {
			return false
		}
	}
	return true
}

// catchUp sends, step by step, the lines the store holds past the client's
// position in the job, one page of at most logs.MaxReadLimit lines at a
// time. It reports false when a read failed.
func (st *eventStream) catchUp(j *jobLog) bool {
	for step := logs.SetupStep; step < j.steps; step++ {
		off, ok := j.end(step)
		if !ok {
			continue
		}
		key := logs.StepKey{RunID: st.runID, JobID: j.id, Step: step}
		for {
			stored, next, err := st.s.logs.Read(st.ctx, key, off, logs.MaxReadLimit)
			if err != nil {
				st.fail("read logs", err)
				return false
			}
			if len(stored) == 0 {
				break
			}
			lines := make([]apiv1.LogLine, 0, len(stored))
			for _, l := range stored {
				lines = append(lines, apiv1.LogLine{Step: step, TS: l.TS, Text: l.Text})
			}
			j.advance(step, next)
			st.sendLog(j, j.id, step, lines)
			off = next
		}
	}
	return true
}

// liveLines are the lines of a live chunk.
func liveLines(le *logs.LogEvent) []apiv1.LogLine {
	out := make([]apiv1.LogLine, 0, len(le.Lines))
	for _, l := range le.Lines {
		out = append(out, apiv1.LogLine{Step: le.Step, TS: l.TS, Text: l.Text})
	}
	return out
}

// sendLog sends lines of a job's step as a "log" frame whose id is the
// position after it. j is nil for a job the stream does not know.
func (st *eventStream) sendLog(j *jobLog, jobID string, step int, lines []apiv1.LogLine) {
	ev := apiv1.Event{Kind: "log", RunID: st.runID, JobID: jobID, Step: &step, Lines: lines}
	if j != nil {
		ev.Job = j.name
	}
	st.send(st.position(), ev)
}

// position renders the client's position in every job whose position is
// known; "" when none is.
func (st *eventStream) position() string {
	var b strings.Builder
	for _, j := range st.jobs {
		if !j.known {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d:%d:%d", j.index, j.top, j.ends[j.top])
	}
	return b.String()
}

// send writes one frame, with an id line when id is not empty, in one
// write, and flushes it.
func (st *eventStream) send(id string, ev apiv1.Event) {
	data, _ := json.Marshal(ev)
	if id != "" {
		fmt.Fprintf(st.w, "id: %s\nevent: %s\ndata: %s\n\n", id, ev.Kind, data)
	} else {
		fmt.Fprintf(st.w, "event: %s\ndata: %s\n\n", ev.Kind, data)
	}
	st.flusher.Flush()
}

// fail records why the stream ends before the run does; the client
// reconnects from its last id. A client that went away is no failure.
func (st *eventStream) fail(what string, err error) {
	if st.ctx.Err() != nil {
		return
	}
	st.s.log.Warn("run event stream ended early", "run_id", st.runID, "operation", what, "error", err)
}
