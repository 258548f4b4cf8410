package agent_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/kici-dev/kici/internal/protocol"
)

// fakeOrchestrator speaks the orchestrator's side of the agent protocol on
// 127.0.0.1, as docs/protocol.md describes it: it checks the agent token,
// answers register with registered (resuming the jobs it dispatched),
// applies each job-scoped message once by seq, acknowledges with
// job.ackseq, and records everything. It also serves source archives that
// need the job token. Tests steer it through its fields and methods.
type fakeOrchestrator struct {
	t   *testing.T
	srv *httptest.Server

	// Set before the agent connects.
	token     string        // the agent token; "" accepts any
	heartbeat time.Duration // heartbeat_interval_ms sent in registered

	mu sync.Mutex
	// refuse, when not 0, closes the next connection with this code instead
	// of answering register; refuseOnce clears it after one use.
	refuse     int
	refuseOnce bool
	// ackAfterConn stops job.ackseq on the first ackAfterConn
	// connections; resumeZero answers every resumed job with ack_seq 0, as
	// an orchestrator that lost its acks would, so that the agent replays
	// everything.
	ackAfterConn int
	resumeZero   bool
	// silent stops the fake's heartbeats.
	silent bool
	// onApply, when set (before the agent connects), is called with f.mu
	// held for each newly applied job-scoped message, before its
	// job.ackseq is sent.
	onApply func(protocol.JobScoped)
	// archiveFailures answers that many archive requests (with a valid
	// token) with 503 before serving the archive.
	archiveFailures int
	archiveRequests int             // archive requests served so far
	closes          []int           // the close code the agent ended each connection with (-1: none)
	conn            *websocket.Conn // the registered connection, if any
	conns           int             // connections registered so far
	registers       []*protocol.Register
	received        []received // every message from the agent, in order
	raw             [][]byte   // every frame from the agent
	owned           map[string]bool
	applied         map[string]uint64
	messages        map[string][]protocol.JobScoped // applied job-scoped messages
	dupes           int                             // job-scoped messages dropped as replays
	jobTokens       map[string]bool
	changed         chan struct{}
}

// received is one message and the connection (1-based) it came on.
type received struct {
	conn int
	msg  protocol.Message
}

func newFakeOrchestrator(t *testing.T) *fakeOrchestrator {
	t.Helper()
	f := &fakeOrchestrator{
		t:         t,
		token:     "kat_test",
		heartbeat: time.Second,
		owned:     map[string]bool{},
		applied:   map[string]uint64{},
		messages:  map[string][]protocol.JobScoped{},
		jobTokens: map[string]bool{},
		changed:   make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", f.serveWS)
	mux.HandleFunc("/archive/src.tar.gz", f.serveArchive)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeOrchestrator) wsURL() string {
	return "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/ws"
}

func (f *fakeOrchestrator) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// waitFor blocks until cond (called with f.mu held) is true.
func (f *fakeOrchestrator) waitFor(what string, cond func() bool) {
	f.t.Helper()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	for {
		f.mu.Lock()
		ok := cond()
		ch := f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-timeout.C:
			f.t.Fatalf("fake orchestrator: waited 20s for %s", what)
		}
	}
}

func (f *fakeOrchestrator) serveWS(w http.ResponseWriter, r *http.Request) {
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		http.Error(w, "unknown agent token", http.StatusUnauthorized)
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(protocol.MaxMessageBytes)
	ctx := r.Context()
	m, _, err := f.readMsg(ctx, c)
	if err != nil {
		return
	}
	reg, ok := m.(*protocol.Register)
	if !ok {
		c.Close(protocol.CloseUnexpectedMessage, protocol.CloseReason(protocol.CloseUnexpectedMessage))
		return
	}
	f.mu.Lock()
	f.registers = append(f.registers, reg)
	if code := f.refuse; code != 0 {
		if f.refuseOnce {
			f.refuse = 0
		}
		f.notifyLocked()
		f.mu.Unlock()
		c.Close(websocket.StatusCode(code), protocol.CloseReason(code))
		return
	}
	answer := &protocol.Registered{AgentID: reg.AgentID, HeartbeatIntervalMS: f.heartbeat.Milliseconds(), ServerVersion: "fake"}
	for _, j := range reg.InFlight {
		if f.owned[j.JobID] {
			ack := f.applied[j.JobID]
			if f.resumeZero {
				ack = 0
			}
			answer.Resume = append(answer.Resume, protocol.ResumeJob{JobID: j.JobID, AckSeq: ack})
		}
	}
	if err := f.writeLocked(ctx, c, answer); err != nil {
		f.mu.Unlock()
		return
	}
	f.conns++
	connNo := f.conns
	f.conn = c
	f.notifyLocked()
	f.mu.Unlock()

	if !f.silent {
		go f.heartbeats(ctx, c)
	}
	for {
		m, data, err := f.readMsg(ctx, c)
		if err != nil {
			f.mu.Lock()
			f.closes = append(f.closes, int(websocket.CloseStatus(err)))
			f.mu.Unlock()
			break
		}
		f.mu.Lock()
		f.received = append(f.received, received{conn: connNo, msg: m})
		f.raw = append(f.raw, data)
		if js, ok := m.(protocol.JobScoped); ok {
			f.applyLocked(ctx, c, js, connNo > f.ackAfterConn)
		}
		f.notifyLocked()
		f.mu.Unlock()
	}
	f.mu.Lock()
	if f.conn == c {
		f.conn = nil
	}
	f.notifyLocked()
	f.mu.Unlock()
}

// applyLocked applies a job-scoped message once, by seq, and acknowledges.
func (f *fakeOrchestrator) applyLocked(ctx context.Context, c *websocket.Conn, m protocol.JobScoped, ack bool) {
	id, seq := m.JobSeq()
	if seq <= f.applied[id] {
		f.dupes++
	} else {
		f.applied[id] = seq
		f.messages[id] = append(f.messages[id], m)
		if f.onApply != nil {
			f.onApply(m)
		}
	}
	if ack {
		_ = f.writeLocked(ctx, c, &protocol.JobAckSeq{JobID: id, Seq: f.applied[id]})
	}
}

func (f *fakeOrchestrator) heartbeats(ctx context.Context, c *websocket.Conn) {
	t := time.NewTicker(f.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.mu.Lock()
			err := f.writeLocked(ctx, c, &protocol.Heartbeat{Time: time.Now()})
			f.mu.Unlock()
			if err != nil {
				return
			}
		}
	}
}

func (f *fakeOrchestrator) readMsg(ctx context.Context, c *websocket.Conn) (protocol.Message, []byte, error) {
	_, data, err := c.Read(ctx)
	if err != nil {
		return nil, nil, err
	}
	m, err := protocol.Decode(data)
	if err != nil {
		f.t.Errorf("fake orchestrator: agent sent an invalid message: %v", err)
		c.Close(websocket.StatusCode(protocol.DecodeCloseCode(err)), "bad message")
		return nil, nil, err
	}
	if !protocol.SentByAgent(m.Type()) {
		f.t.Errorf("fake orchestrator: agent sent %q, which only the orchestrator may send", m.Type())
	}
	return m, data, nil
}

func (f *fakeOrchestrator) writeLocked(ctx context.Context, c *websocket.Conn, m protocol.Message) error {
	data, err := protocol.Encode(m)
	if err != nil {
		f.t.Errorf("fake orchestrator: encode %s: %v", m.Type(), err)
		return err
	}
	return c.Write(ctx, websocket.MessageText, data)
}

// send writes m on the registered connection, waiting for one.
func (f *fakeOrchestrator) send(m protocol.Message) {
	f.t.Helper()
	f.waitFor("a registered connection", func() bool { return f.conn != nil })
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := m.(*protocol.JobDispatch); ok {
		f.owned[d.JobID] = true
		f.applied[d.JobID] = 0
		f.messages[d.JobID] = nil
		if d.JobToken != "" {
			f.jobTokens[d.JobToken] = true
		}
	}
	if err := f.writeLocked(context.Background(), f.conn, m); err != nil {
		f.t.Fatalf("fake orchestrator: send %s: %v", m.Type(), err)
	}
}

// dropConn ends the registered connection abruptly, as a network failure
// would.
func (f *fakeOrchestrator) dropConn() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil {
		f.conn.CloseNow()
		f.conn = nil
	}
}

// disown makes the next registered.resume leave jobID out, as if the job
// had been handed to another agent.
func (f *fakeOrchestrator) disown(jobID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.owned, jobID)
}

// jobEnded waits for the job's final job.status (or job.reject) and returns
// the job's applied messages.
func (f *fakeOrchestrator) jobEnded(jobID string) []protocol.JobScoped {
	f.t.Helper()
	var msgs []protocol.JobScoped
	f.waitFor("the end of job "+jobID, func() bool {
		msgs = append([]protocol.JobScoped(nil), f.messages[jobID]...)
		if len(msgs) == 0 {
			return false
		}
		switch last := msgs[len(msgs)-1].(type) {
		case *protocol.JobReject:
			return true
		case *protocol.JobStatus:
			return last.Status != protocol.JobRunning
		}
		return false
	})
	return msgs
}

// waitLine waits until the job's step has printed text.
func (f *fakeOrchestrator) waitLine(jobID string, step int, text string) {
	f.t.Helper()
	f.waitFor(fmt.Sprintf("line %q of job %s step %d", text, jobID, step), func() bool {
		for _, l := range linesOf(f.messages[jobID], step) {
			if l == text {
				return true
			}
		}
		return false
	})
}

// linesOf returns the text of one step's lines in msgs.
func linesOf(msgs []protocol.JobScoped, step int) []string {
	var out []string
	for _, m := range msgs {
		if c, ok := m.(*protocol.LogChunk); ok && c.Step == step {
			for _, l := range c.Lines {
				out = append(out, l.Text)
			}
		}
	}
	return out
}

// serveArchive serves a small tar.gz to requests with a known job token.
func (f *fakeOrchestrator) serveArchive(w http.ResponseWriter, r *http.Request) {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	f.mu.Lock()
	ok := f.jobTokens[token]
	fail := false
	if ok {
		f.archiveRequests++
		fail = f.archiveRequests <= f.archiveFailures
	}
	f.mu.Unlock()
	if !ok {
		http.Error(w, "job token required", http.StatusUnauthorized)
		return
	}
	if fail {
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	_, _ = w.Write(readmeArchive("hello from the archive\n"))
}

// readmeArchive returns a tar.gz holding one file, README, with body.
func readmeArchive(body string) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	_ = tw.WriteHeader(&tar.Header{Name: "README", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})
	_, _ = tw.Write([]byte(body))
	_ = tw.Close()
	_ = gz.Close()
	return buf.Bytes()
}
