package agent

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/protocol"
)

func chunk(job string, step int, lines ...string) *protocol.LogChunk {
	c := &protocol.LogChunk{JobID: job, Step: step}
	for _, l := range lines {
		c.Lines = append(c.Lines, protocol.LogLine{TS: time.Unix(1, 0), Text: l})
	}
	return c
}

// describe lists messages as "job:seq:type[:first line]".
func describe(msgs []protocol.JobScoped) []string {
	var out []string
	for _, m := range msgs {
		id, seq := m.JobSeq()
		s := fmt.Sprintf("%s:%d:%s", id, seq, m.Type())
		if c, ok := m.(*protocol.LogChunk); ok && len(c.Lines) > 0 {
			s += ":" + c.Lines[0].Text
		}
		out = append(out, s)
	}
	return out
}

func TestOutboxSequenceAckAndReplay(t *testing.T) {
	t.Parallel()
	o := newOutbox(slog.New(slog.DiscardHandler), 1<<20)
	a := o.open("a")
	b := o.open("b")
	o.append(a, &protocol.JobAck{JobID: "a"}, false)
	o.append(b, &protocol.JobReject{JobID: "b", Reason: protocol.RejectBusy}, true)
	o.append(a, chunk("a", 0, "one"), false)
	if diff := cmp.Diff([]string{"a:1:job.ack", "b:1:job.reject", "a:2:log.chunk:one"}, describe(o.takeUnsent())); diff != "" {
		t.Errorf("first send (-want +got):\n%s", diff)
	}
	if got := o.takeUnsent(); len(got) != 0 {
		t.Errorf("second send: got %v, want nothing new", describe(got))
	}
	if o.append(b, &protocol.JobStatus{JobID: "b", Status: protocol.JobRunning}, false) {
		t.Errorf("append after the last message: got true, want false")
	}
	o.append(a, chunk("a", 0, "two"), false)

	// The connection drops; the orchestrator applied a up to 1 and b up to 1.
	sent := o.inFlight()
	if diff := cmp.Diff([]protocol.InFlightJob{{JobID: "a", LastSeq: 3}, {JobID: "b", LastSeq: 1}}, sent); diff != "" {
		t.Errorf("in flight (-want +got):\n%s", diff)
	}
	abandoned := o.resume(sent, []protocol.ResumeJob{{JobID: "a", AckSeq: 1}, {JobID: "b", AckSeq: 1}})
	if len(abandoned) != 0 {
		t.Errorf("abandoned: got %v, want none", abandoned)
	}
	if diff := cmp.Diff([]string{"a:2:log.chunk:one", "a:3:log.chunk:two"}, describe(o.takeUnsent())); diff != "" {
		t.Errorf("replay (-want +got):\n%s", diff)
	}
	if got := o.inFlight(); len(got) != 1 || got[0].JobID != "a" {
		t.Errorf("in flight after b's last message was acked: got %v, want only a", got)
	}

	o.append(a, &protocol.JobStatus{JobID: "a", Status: protocol.JobSuccess}, true)
	o.ack("a", 4)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := o.waitEmpty(ctx); err != nil {
		t.Errorf("waitEmpty: got %v, want nil once every job's last message is acked", err)
	}
}

func TestOutboxResumeAbandons(t *testing.T) {
	t.Parallel()
	o := newOutbox(slog.New(slog.DiscardHandler), 1<<20)
	a := o.open("a")
	o.append(a, &protocol.JobAck{JobID: "a"}, false)
	o.append(a, chunk("a", 0, "x"), false)
	abandoned := o.resume(o.inFlight(), nil)
	if diff := cmp.Diff([]string{"a"}, abandoned); diff != "" {
		t.Errorf("abandoned (-want +got):\n%s", diff)
	}
	if o.append(a, chunk("a", 0, "late"), false) {
		t.Errorf("append to an abandoned job: got true, want false")
	}
	if got := o.takeUnsent(); len(got) != 0 {
		t.Errorf("unsent: got %v, want nothing of an abandoned job", describe(got))
	}
}

// TestOutboxBound fills the buffer past its limit: the oldest log chunks go,
// status messages stay, and the job's next message is preceded by a note.
func TestOutboxBound(t *testing.T) {
	t.Parallel()
	line := strings.Repeat("x", 100)
	o := newOutbox(slog.New(slog.DiscardHandler), 3*chunkSize(chunk("a", 0, "0"+line))) // room for three chunks
	a := o.open("a")
	o.append(a, &protocol.JobAck{JobID: "a"}, false)
	for i := range 5 {
		o.append(a, chunk("a", 0, fmt.Sprintf("%d%s", i, line)), false)
	}
	o.append(a, &protocol.StepStatus{JobID: "a", Step: 0, Status: protocol.StepSuccess}, false)
	got := describe(o.takeUnsent())
	for i := range got {
		got[i] = strings.TrimSuffix(got[i], line)
	}
	want := []string{
		"a:1:job.ack",
		"a:4:log.chunk:2", "a:5:log.chunk:3",
		"a:6:log.chunk:[kici] 2 log lines (2 chunks) were dropped: the agent's replay buffer was full while the orchestrator did not acknowledge them",
		"a:7:log.chunk:4",
		"a:8:step.status",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
}

// TestOutboxHoldsLazyMessages: a step status, a log chunk or a running
// status waits for the linger; an ack or a final status does not, and
// takes along what waited.
func TestOutboxHoldsLazyMessages(t *testing.T) {
	t.Parallel()
	o := newOutbox(slog.New(slog.DiscardHandler), 1<<20)
	a := o.open("a")
	const linger = 10 * time.Millisecond
	if d := o.holdFor(time.Now(), linger); d != 0 {
		t.Errorf("empty outbox: hold %s, want 0", d)
	}
	o.append(a, &protocol.JobAck{JobID: "a"}, false)
	if d := o.holdFor(time.Now(), linger); d != 0 {
		t.Errorf("unsent ack: hold %s, want 0", d)
	}
	o.takeUnsent()
	o.append(a, &protocol.JobStatus{JobID: "a", Status: protocol.JobRunning}, false)
	queued := time.Now()
	o.append(a, chunk("a", 0, "x"), false)
	o.append(a, &protocol.StepStatus{JobID: "a", Step: 0, Status: protocol.StepSuccess}, false)
	if d := o.holdFor(queued, linger); d <= 0 || d > linger {
		t.Errorf("lazy messages just queued: hold %s, want (0, %s]", d, linger)
	}
	if d := o.holdFor(queued.Add(linger+time.Millisecond), linger); d != 0 {
		t.Errorf("lazy messages past the linger: hold %s, want 0", d)
	}
	if d := o.holdFor(queued, -1); d != 0 {
		t.Errorf("no linger: hold %s, want 0", d)
	}
	o.append(a, &protocol.JobStatus{JobID: "a", Status: protocol.JobSuccess}, true)
	if d := o.holdFor(queued, linger); d != 0 {
		t.Errorf("final status queued: hold %s, want 0", d)
	}
	if diff := cmp.Diff([]string{"a:2:job.status", "a:3:log.chunk:x", "a:4:step.status", "a:5:job.status"}, describe(o.takeUnsent())); diff != "" {
		t.Errorf("sent with the final status (-want +got):\n%s", diff)
	}
}
