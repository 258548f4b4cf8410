package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/scheduler"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
	"github.com/kici-dev/kici/internal/trigger"
	"github.com/kici-dev/kici/internal/workflow"
)

// recordingConn is the dispatcher's side of an agent connection: it keeps
// every message sent and the close code, as a WebSocket would carry them.
type recordingConn struct {
	mu      sync.Mutex
	sent    []protocol.Message
	closed  int
	changed chan struct{} // closed and replaced at each message sent
}

func (c *recordingConn) Send(_ context.Context, m protocol.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed != 0 {
		return errors.New("connection closed")
	}
	c.sent = append(c.sent, m)
	if c.changed != nil {
		close(c.changed)
	}
	c.changed = make(chan struct{})
	return nil
}

// waitCount waits until n sent messages satisfy want (a dispatch made in a
// run's transaction is sent in the background), failing after 10 s.
func (c *recordingConn) waitCount(t *testing.T, want func(protocol.Message) bool, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		changed := c.changed
		c.mu.Unlock()
		if c.count(want) >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("waited 10s for %d such messages, got %d", n, c.count(want))
		}
	}
}

func (c *recordingConn) Close(code int, _ string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed == 0 {
		c.closed = code
	}
}

func (c *recordingConn) messages() []protocol.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]protocol.Message(nil), c.sent...)
}

func (c *recordingConn) closeCode() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// count returns how many sent messages satisfy want.
func (c *recordingConn) count(want func(protocol.Message) bool) int {
	n := 0
	for _, m := range c.messages() {
		if want(m) {
			n++
		}
	}
	return n
}

type plainBuilder struct{}

func (plainBuilder) BuildDispatch(_ context.Context, _ store.Run, job store.Job, attempt int) (*protocol.JobDispatch, error) {
	return &protocol.JobDispatch{JobID: job.ID, RunID: job.RunID, Attempt: attempt, TimeoutMS: 60_000,
		Job: workflow.Job{Name: job.Name, Steps: []workflow.Step{{Name: "s", Run: "true"}}}}, nil
}

// sink is a LogSink that stores lines in memory, or fails with err while
// it is set. Like the log store, it skips a chunk whose (job, attempt,
// seq) is not above the last one it stored.
type sink struct {
	mu    sync.Mutex
	err   error
	lines map[string][]string
	last  map[string][2]uint64 // job → (attempt, seq) of its last chunk
}

func (s *sink) AppendLog(_ context.Context, _, jobID string, attempt, _ int, seq uint64, lines []protocol.LogLine) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if s.lines == nil {
		s.lines, s.last = map[string][]string{}, map[string][2]uint64{}
	}
	pos, last := [2]uint64{uint64(max(attempt, 1)), seq}, s.last[jobID]
	if pos[0] < last[0] || pos[0] == last[0] && pos[1] <= last[1] {
		return nil
	}
	s.last[jobID] = pos
	for _, l := range lines {
		s.lines[jobID] = append(s.lines[jobID], l.Text)
	}
	return nil
}

func (s *sink) setErr(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

func (s *sink) of(jobID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines[jobID]...)
}

type fixture struct {
	db   *store.DB
	disp *Dispatcher
	logs *sink
}

func newFixture(t *testing.T, db *store.DB) *fixture {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	f := &fixture{db: db, logs: &sink{}}
	ref := &Ref{}
	sched := scheduler.New(log, db, scheduler.Config{}, nil, ref)
	f.disp = New(log, db, sched, plainBuilder{}, f.logs, Config{
		AckTimeout: time.Minute, RecoveryWindow: time.Minute, QueueSweepInterval: time.Minute,
		DefaultJobTimeout: time.Hour, HeartbeatInterval: time.Second,
	})
	ref.D = f.disp
	return f
}

// push creates a run of one job with labels [linux] and returns the job's id.
func (f *fixture) push(t *testing.T) string {
	t.Helper()
	wf := workflow.Workflow{Name: "ci", File: ".kici/workflows/ci.yml", Jobs: []workflow.Job{{
		Name: "build", Base: "build", RunsOn: []string{"linux"}, Steps: []workflow.Step{{Name: "s", Run: "true"}},
	}}}
	run, err := f.disp.sched.CreateRun(t.Context(), scheduler.RunInput{Source: "repo", Workflow: wf,
		Event: trigger.Event{Kind: "push", Ref: "refs/heads/main", SHA: strings.Repeat("a", 40)}})
	if err != nil {
		t.Fatalf("create run: %v", err)
	}
	return run.Jobs[0].ID
}

// connect registers agent id with credential cred.
func (f *fixture) connect(t *testing.T, id, cred string, inFlight ...protocol.InFlightJob) (*Agent, *recordingConn, error) {
	t.Helper()
	c := &recordingConn{}
	a := NewAgent(&protocol.Register{AgentID: id, Labels: []string{"linux"}, Concurrency: 1, InFlight: inFlight}, c, "static", time.Now())
	a.Credential = cred
	_, err := f.disp.Register(t.Context(), a, inFlight, "")
	return a, c, err
}

// dispatchTo connects id and dispatches the queued job to it.
func (f *fixture) dispatchTo(t *testing.T, id, cred string) (*Agent, *recordingConn) {
	t.Helper()
	a, c, err := f.connect(t, id, cred)
	if err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
	if sent, err := f.disp.dispatchOne(t.Context(), a); err != nil || !sent {
		t.Fatalf("dispatch to %s: (%v, %v), want a job sent", id, sent, err)
	}
	return a, c
}

func (f *fixture) jobStatus(t *testing.T, jobID string) store.Job {
	t.Helper()
	j, err := f.db.GetJobHead(t.Context(), jobID)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestRegisterBindsAgentIDToCredential(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		jobID := f.push(t)
		owner, ownerConn := f.dispatchTo(t, "host", "token:a")

		_, thiefConn, err := f.connect(t, "host", "token:b", protocol.InFlightJob{JobID: jobID})
		var refused *RefusedError
		if !errors.As(err, &refused) || refused.Code != protocol.CloseIdentityTaken {
			t.Fatalf("register under another token: got %v, want a RefusedError with code %d", err, protocol.CloseIdentityTaken)
		}
		if ownerConn.closeCode() != 0 || thiefConn.closeCode() != 0 {
			t.Errorf("close codes: owner %d, thief %d; want neither closed by Register", ownerConn.closeCode(), thiefConn.closeCode())
		}
		if got := f.disp.reg.get("host"); got != owner {
			t.Errorf("registry holds %p for host, want the owner's connection %p", got, owner)
		}
		// The same token may replace its own connection (a reconnect).
		again, _, err := f.connect(t, "host", "token:a", protocol.InFlightJob{JobID: jobID})
		if err != nil {
			t.Fatalf("reconnect under the same token: %v", err)
		}
		if !again.holds(jobID) || ownerConn.closeCode() != protocol.CloseReplaced {
			t.Errorf("reconnect: holds job %v, old connection closed %d; want true and %d", again.holds(jobID), ownerConn.closeCode(), protocol.CloseReplaced)
		}
	})
}

func TestApplyRefusesMessagesOfAJobNotOnTheConnection(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		jobID := f.push(t)
		owner, _ := f.dispatchTo(t, "owner", "token:a")
		other, _, err := f.connect(t, "other", "token:b")
		if err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name string
			from *Agent
			msg  protocol.Message
		}{
			{name: "status from another agent", from: other, msg: &protocol.JobStatus{JobID: jobID, Seq: 1, Status: "success"}},
			{name: "log from another agent", from: other, msg: &protocol.LogChunk{JobID: jobID, Seq: 2, Lines: []protocol.LogLine{{TS: time.Now(), Text: "x"}}}},
		}
		for _, tt := range tests {
			seq, err := f.disp.Apply(t.Context(), tt.from, tt.msg)
			if !errors.Is(err, ErrNotOwner) || seq != 0 {
				t.Errorf("%s: got (%d, %v), want (0, ErrNotOwner)", tt.name, seq, err)
			}
		}
		if got := f.jobStatus(t, jobID).Status; got != store.JobDispatched {
			t.Errorf("job after foreign messages: %s, want dispatched", got)
		}
		if lines := f.logs.of(jobID); len(lines) != 0 {
			t.Errorf("stored lines %q, want none", lines)
		}
		if seq, err := f.disp.Apply(t.Context(), owner, &protocol.JobAck{JobID: jobID, Seq: 1}); err != nil || seq != 1 {
			t.Errorf("the owner's ack: got (%d, %v), want (1, nil)", seq, err)
		}
	})
}

func TestSweepAcksWaitsForALiveConnection(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		now := time.Now()
		f.disp.cfg.Now = func() time.Time { return now }
		jobID := f.push(t)
		slow, conn := f.dispatchTo(t, "slow", "token:a")
		spare, spareConn, err := f.connect(t, "spare", "token:a")
		if err != nil {
			t.Fatal(err)
		}
		now = now.Add(2 * time.Minute) // past the ack deadline
		f.disp.sweepAcks(t.Context())
		if conn.closeCode() != protocol.CloseAckTimeout {
			t.Errorf("slow connection: closed with %d, want %d", conn.closeCode(), protocol.CloseAckTimeout)
		}
		f.disp.Unregister(t.Context(), slow) // what the closed connection's handler does
		if sent, err := f.disp.dispatchOne(t.Context(), spare); err != nil || sent {
			t.Fatalf("dispatch to the spare agent: (%v, %v), want nothing sent", sent, err)
		}
		if n := spareConn.count(func(m protocol.Message) bool { _, ok := m.(*protocol.JobDispatch); return ok }); n != 0 {
			t.Errorf("the spare agent got %d dispatches, want 0", n)
		}
		e, err := f.db.GetQueueEntry(t.Context(), jobID)
		if err != nil || e.RecoveryAgentID != "slow" {
			t.Fatalf("queue row: %+v (%v), want it waiting for slow", e, err)
		}
	})
}

func TestStorageFullFailsTheJobOnceAndMarksTheGap(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		jobID := f.push(t)
		a, conn := f.dispatchTo(t, "host", "token:a")
		for i, m := range []protocol.Message{
			&protocol.JobAck{JobID: jobID, Seq: 1},
			&protocol.JobStatus{JobID: jobID, Seq: 2, Status: "running"},
		} {
			if _, err := f.disp.Apply(t.Context(), a, m); err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
		full := fmt.Errorf("append log: %w", &fs.PathError{Op: "write", Path: "step-0.log", Err: syscall.ENOSPC})
		f.logs.setErr(full)
		// The marker cannot be written while the log volume is full either.
		for seq := uint64(3); seq <= 5; seq++ {
			got, err := f.disp.Apply(t.Context(), a, &protocol.LogChunk{JobID: jobID, Seq: seq, Lines: []protocol.LogLine{{TS: time.Now(), Text: "l1"}, {TS: time.Now(), Text: "l2"}}})
			if err != nil || got != 0 {
				t.Fatalf("chunk %d on a full disk: got (%d, %v), want (0, nil): not acknowledged, connection kept", seq, got, err)
			}
		}
		if got, err := f.disp.Apply(t.Context(), a, &protocol.JobStatus{JobID: jobID, Seq: 6, Status: "cancelled"}); err != nil || got != 0 {
			t.Fatalf("status after the failure: got (%d, %v), want (0, nil)", got, err)
		}
		cancels := conn.count(func(m protocol.Message) bool { _, ok := m.(*protocol.JobCancel); return ok })
		if cancels != 1 || conn.closeCode() != 0 {
			t.Errorf("agent got %d cancels and close %d, want 1 cancel and no close", cancels, conn.closeCode())
		}
		j := f.jobStatus(t, jobID)
		if j.Status != store.JobFailure || !strings.Contains(j.Error, "no space left") {
			t.Errorf("job: %s (%q), want failure naming the lack of space", j.Status, j.Error)
		}
		if acks := conn.count(func(m protocol.Message) bool { a, ok := m.(*protocol.JobAckSeq); return ok && a.Seq >= 3 }); acks != 0 {
			t.Errorf("got %d acks of unstored messages, want none before the gap is marked", acks)
		}
		// Space is back: the gap is marked and what the agent sent is settled.
		f.logs.setErr(nil)
		f.disp.retryUnstored(t.Context())
		lines := f.logs.of(jobID)
		if len(lines) != 1 || !strings.Contains(lines[0], "not stored (at least 6 log lines lost)") {
			t.Errorf("log: %q, want one marker line counting 6 lost lines", lines)
		}
		if acks := conn.count(func(m protocol.Message) bool { a, ok := m.(*protocol.JobAckSeq); return ok && a.Seq == 6 }); acks != 1 {
			t.Errorf("got %d acks up to seq 6 after the marker, want 1", acks)
		}
		if a.holds(jobID) {
			t.Errorf("the agent still holds the settled job")
		}
	})
}
