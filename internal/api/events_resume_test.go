package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/logs"
	"github.com/kici-dev/kici/internal/runstate"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
	"github.com/kici-dev/kici/internal/workflow"
)

// The tests of the event stream's positions serve runEvents on a real HTTP
// server over a real store and log store: on each database engine, with
// the logs in files and in the database.

// forEachLogStore runs fn on each database engine, once with each kind of
// log store; cfg is the log store's configuration (Dir is set by the
// fixture).
func forEachLogStore(t *testing.T, fn func(t *testing.T, db *store.DB, cfg logs.Config)) {
	t.Helper()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		t.Run("files", func(t *testing.T) {
			t.Parallel()
			fn(t, db, logs.Config{})
		})
		t.Run("database", func(t *testing.T) {
			t.Parallel()
			fn(t, db, logs.Config{DB: db})
		})
	})
}

// eventsFixture is one run of two jobs, build (one step) and test (two),
// and a server of its event stream.
type eventsFixture struct {
	db     *store.DB
	logs   *logs.Store
	cfg    logs.Config // the log store's, Dir set
	logger *slog.Logger
	run    store.Run
	index  map[string]int // job index by name, in the run's order
	base   string
	client *http.Client
	gate   *frameGate // nil: no frame is held

	mu    sync.Mutex
	seq   map[string]uint64 // last seq appended, by job name
	count map[string]int    // lines appended, by job name
}

func newEventsFixture(t *testing.T, db *store.DB, cfg logs.Config, status store.RunStatus, gate *frameGate) *eventsFixture {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	cfg.Dir = t.TempDir()
	st, err := logs.New(logger, cfg)
	if err != nil {
		t.Fatalf("open log store: %v", err)
	}
	jobStatus := store.JobRunning
	if runstate.RunTerminal(status) {
		jobStatus = store.JobSuccess
	}
	var jobs []store.NewJob
	for _, spec := range []workflow.Job{
		{Name: "build", Base: "build", Steps: []workflow.Step{{Name: "compile", Run: "make"}}},
		{Name: "test", Base: "test", Steps: []workflow.Step{{Name: "unit", Run: "make test"}, {Name: "integration", Run: "make it"}}},
	} {
		jobs = append(jobs, store.NewJob{Spec: spec, Status: jobStatus})
	}
	created, err := db.CreateRun(t.Context(), store.NewRun{Source: "repo", Workflow: "ci", WorkflowFile: ".kici/workflows/ci.yml",
		Event: json.RawMessage(`{}`), EventKind: "push", Ref: "refs/heads/main", SHA: "0123456789abcdef0123456789abcdef01234567",
		Status: status, Plan: workflow.Workflow{Name: "ci"}, Jobs: jobs})
	if err != nil {
		t.Fatalf("create run: %v", err)
	}
	run, err := db.GetRun(t.Context(), created.ID)
	if err != nil {
		t.Fatalf("read run: %v", err)
	}
	f := &eventsFixture{db: db, logs: st, cfg: cfg, logger: logger, run: run, index: map[string]int{}, gate: gate,
		seq: map[string]uint64{}, count: map[string]int{}}
	for i, j := range run.Jobs {
		f.index[j.Name] = i
	}
	s := &Server{log: logger, db: db, logs: st}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /runs/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		if gate != nil {
			w = &gatedWriter{ResponseWriter: w, gate: gate}
		}
		s.runEvents(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	if gate != nil {
		t.Cleanup(gate.open) // before the server closes: a held stream must end
	}
	f.base = srv.URL
	f.client = srv.Client()
	return f
}

// job returns the run's job of that name.
func (f *eventsFixture) job(name string) store.Job {
	return f.run.Jobs[f.index[name]]
}

// appendLines stores n new lines of the job's step through st as one
// chunk, and returns their texts.
func (f *eventsFixture) appendLines(t *testing.T, st *logs.Store, name string, step, n int) []string {
	t.Helper()
	f.mu.Lock()
	f.seq[name]++
	seq := f.seq[name]
	var lines []logs.Line
	var texts []string
	for range n {
		f.count[name]++
		text := fmt.Sprintf("%s line %d (step %d)", name, f.count[name], step)
		lines = append(lines, logs.Line{TS: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Text: text})
		texts = append(texts, text)
	}
	f.mu.Unlock()
	stored, err := st.Append(t.Context(), logs.StepKey{RunID: f.run.ID, JobID: f.job(name).ID, Step: step}, seq, lines)
	if err != nil || !stored {
		t.Fatalf("append to %s step %d: stored %v, %v", name, step, stored, err)
	}
	return texts
}

// add is appendLines through the server's log store.
func (f *eventsFixture) add(t *testing.T, name string, step, n int) []string {
	t.Helper()
	return f.appendLines(t, f.logs, name, step, n)
}

// finish ends the run as the scheduler does: it stores the final status,
// then publishes it, which ends the run's streams.
func (f *eventsFixture) finish(t *testing.T) {
	t.Helper()
	changed, err := f.db.UpdateRunStatus(t.Context(), store.RunTransition{ID: f.run.ID, From: []store.RunStatus{store.RunRunning}, To: store.RunSuccess})
	if err != nil || !changed {
		t.Fatalf("finish the run: changed %v, %v", changed, err)
	}
	data, err := json.Marshal(apiv1.Event{Kind: "run", RunID: f.run.ID, Status: string(store.RunSuccess)})
	if err != nil {
		t.Fatal(err)
	}
	f.logs.Publish(logs.Event{RunID: f.run.ID, Kind: logs.EventStatus, Data: data})
}

// entry renders a job's entry of a position at the end of the step's
// stored log.
func (f *eventsFixture) entry(t *testing.T, name string, step int) string {
	t.Helper()
	size, err := f.logs.Size(t.Context(), logs.StepKey{RunID: f.run.ID, JobID: f.job(name).ID, Step: step})
	if err != nil {
		t.Fatalf("size of %s step %d: %v", name, step, err)
	}
	return fmt.Sprintf("%d:%d:%d", f.index[name], step, size)
}

// position joins entries in the order of their job index.
func position(entries ...string) string {
	slices.Sort(entries) // the runs of these tests have fewer than 10 jobs
	return strings.Join(entries, ",")
}

// get sends a request for the event stream with the Last-Event-ID header
// (unless empty) and the raw query, and reads the whole answer.
func (f *eventsFixture) get(t *testing.T, lastEventID, query string) (int, string, []byte) {
	t.Helper()
	resp := f.request(t, t.Context(), lastEventID, query)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}

func (f *eventsFixture) request(t *testing.T, ctx context.Context, lastEventID, query string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.base+"/runs/"+f.run.ID+"/events?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatalf("open the event stream: %v", err)
	}
	return resp
}

// open opens the event stream, failing the test unless it answers 200.
// The stream is closed when the test ends, if not before.
func (f *eventsFixture) open(t *testing.T, lastEventID, query string) *sseStream {
	t.Helper()
	// A deadline, so that a stream that never ends fails the test.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	resp := f.request(t, ctx, lastEventID, query)
	s := &sseStream{body: resp.Body, r: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(s.close)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("open the event stream: got status %d (%s), want 200", resp.StatusCode, body)
	}
	return s
}

// sseFrame is one frame of the event stream.
type sseFrame struct {
	id    string
	event string
	data  apiv1.Event
}

// sseStream reads an open event stream.
type sseStream struct {
	body   io.ReadCloser
	r      *bufio.Reader
	cancel context.CancelFunc
}

func (s *sseStream) close() {
	s.cancel()
	s.body.Close()
}

// next reads the next frame; false when the stream has ended.
func (s *sseStream) next(t *testing.T) (sseFrame, bool) {
	t.Helper()
	var fr sseFrame
	for {
		line, err := s.r.ReadString('\n')
		if errors.Is(err, io.EOF) && line == "" {
			return sseFrame{}, false
		}
		if err != nil {
			t.Fatalf("read the event stream: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		field, value, _ := strings.Cut(line, ": ")
		switch {
		case line == "":
			return fr, true
		case strings.HasPrefix(line, ":"): // a keep-alive
		case field == "id":
			fr.id = value
		case field == "event":
			fr.event = value
		case field == "data":
			if err := json.Unmarshal([]byte(value), &fr.data); err != nil {
				t.Fatalf("decode frame data %q: %v", value, err)
			}
		default:
			t.Fatalf("got line %q in the event stream, want id, event, data or a comment", line)
		}
	}
}

// until reads frames up to the first log frame holding the line text.
func (s *sseStream) until(t *testing.T, text string) []sseFrame {
	t.Helper()
	var out []sseFrame
	for {
		fr, ok := s.next(t)
		if !ok {
			t.Fatalf("the event stream ended before line %q", text)
		}
		out = append(out, fr)
		for _, l := range fr.data.Lines {
			if l.Text == text {
				return out
			}
		}
	}
}

// readUntil reads frames until done holds for all the frames read.
func (s *sseStream) readUntil(t *testing.T, what string, done func([]sseFrame) bool) []sseFrame {
	t.Helper()
	var out []sseFrame
	for !done(out) {
		fr, ok := s.next(t)
		if !ok {
			t.Fatalf("the event stream ended before %s", what)
		}
		out = append(out, fr)
	}
	return out
}

// rest reads frames until the stream ends.
func (s *sseStream) rest(t *testing.T) []sseFrame {
	t.Helper()
	var out []sseFrame
	for {
		fr, ok := s.next(t)
		if !ok {
			return out
		}
		out = append(out, fr)
	}
}

// linesByJob gathers the texts of the log frames' lines by job name.
func linesByJob(frames []sseFrame) map[string][]string {
	out := map[string][]string{}
	for _, fr := range frames {
		if fr.event != "log" {
			continue
		}
		for _, l := range fr.data.Lines {
			out[fr.data.Job] = append(out[fr.data.Job], l.Text)
		}
	}
	return out
}

// statusFrames lists the frames that are not log lines, as "event status".
func statusFrames(frames []sseFrame) []string {
	var out []string
	for _, fr := range frames {
		if fr.event != "log" {
			out = append(out, fr.event+" "+fr.data.Status)
		}
	}
	return out
}

// frameGate holds a stream at the first frame that matches, until it is
// opened: the test can then publish while the stream reads nothing.
type frameGate struct {
	match    func(frame string) bool
	armed    atomic.Bool
	held     chan struct{}
	released chan struct{}
	once     sync.Once
}

func newFrameGate(match func(frame string) bool) *frameGate {
	g := &frameGate{match: match, held: make(chan struct{}), released: make(chan struct{})}
	g.armed.Store(true)
	return g
}

// wait returns once a stream is held.
func (g *frameGate) wait(t *testing.T) {
	t.Helper()
	select {
	case <-g.held:
	case <-time.After(time.Minute): // a deadline, not a pause: held comes first
		t.Fatal("no frame was held")
	}
}

// open lets the held stream go on.
func (g *frameGate) open() { g.once.Do(func() { close(g.released) }) }

// gatedWriter is a stream's ResponseWriter whose writes a frameGate holds.
type gatedWriter struct {
	http.ResponseWriter
	gate *frameGate
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	if g := w.gate; g.match(string(p)) && g.armed.CompareAndSwap(true, false) {
		close(g.held)
		<-g.released
	}
	return w.ResponseWriter.Write(p)
}

// WriteHeader sends the header at once, so that the client's request
// returns even while the first frame is held.
func (w *gatedWriter) WriteHeader(code int) {
	w.ResponseWriter.WriteHeader(code)
	w.Flush()
}

func (w *gatedWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

// TestEventStreamResumesFromLastEventID: a stream reopened with the id of
// the last frame read gets exactly the lines stored after it, once each,
// in order, then the live ones; each log frame's id is the position of
// every job the stream has sent lines of.
func TestEventStreamResumesFromLastEventID(t *testing.T) {
	t.Parallel()
	forEachLogStore(t, func(t *testing.T, db *store.DB, cfg logs.Config) {
		f := newEventsFixture(t, db, cfg, store.RunRunning, nil)
		f.add(t, "build", logs.SetupStep, 2) // before the stream: not sent
		first := f.open(t, "", "")
		f.add(t, "build", logs.SetupStep, 1)
		f.add(t, "build", 0, 3)
		last := f.add(t, "test", logs.SetupStep, 2)
		frames := first.until(t, last[1])
		if got := statusFrames(frames); !slices.Equal(got, []string{"run running"}) {
			t.Errorf("got frames %q besides the lines, want only the run's status", got)
		}
		id := frames[len(frames)-1].id
		if want := position(f.entry(t, "build", 0), f.entry(t, "test", logs.SetupStep)); id != want {
			t.Errorf("got id %q, want %q", id, want)
		}
		first.close()

		// Stored while no stream is open.
		want := map[string][]string{}
		want["build"] = f.add(t, "build", 0, 2)
		want["test"] = append(f.add(t, "test", 0, 2), f.add(t, "test", 1, 1)...)

		second := f.open(t, id, "")
		want["test"] = append(want["test"], f.add(t, "test", 1, 2)...)
		f.finish(t)
		frames = second.rest(t)
		if diff := cmp.Diff(want, linesByJob(frames)); diff != "" {
			t.Errorf("lines of the resumed stream mismatch (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"run running", "job running", "job running", "run success"}, statusFrames(frames)); diff != "" {
			t.Errorf("status frames mismatch (-want +got):\n%s", diff)
		}
	})
}

// TestEventStreamFromParameter: from= starts the stream as Last-Event-ID
// does; a job it does not list gets all its lines; the header wins over
// the parameter; and a finished run's stream sends the stored lines before
// its final status, then ends.
func TestEventStreamFromParameter(t *testing.T) {
	t.Parallel()
	forEachLogStore(t, func(t *testing.T, db *store.DB, cfg logs.Config) {
		f := newEventsFixture(t, db, cfg, store.RunSuccess, nil)
		f.add(t, "build", logs.SetupStep, 2)
		f.add(t, "build", 0, 3)
		from := f.entry(t, "build", 0)
		want := map[string][]string{"build": f.add(t, "build", 0, 3)}
		want["test"] = append(append(f.add(t, "test", logs.SetupStep, 1), f.add(t, "test", 0, 2)...), f.add(t, "test", 1, 2)...)
		end := position(f.entry(t, "build", 0), f.entry(t, "test", 1))

		for _, tc := range []struct {
			name, lastEventID, query string
		}{
			{name: "from", query: "from=" + url.QueryEscape(from)},
			{name: "from, not escaped", query: "from=" + from},
			{name: "header over from", lastEventID: from, query: "from=junk"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				frames := f.open(t, tc.lastEventID, tc.query).rest(t)
				if diff := cmp.Diff(want, linesByJob(frames)); diff != "" {
					t.Errorf("lines mismatch (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([]string{"job success", "job success", "run success"}, statusFrames(frames)); diff != "" {
					t.Errorf("status frames mismatch (-want +got):\n%s", diff)
				}
				if last := frames[len(frames)-1]; last.event != "run" {
					t.Errorf("got last frame %q, want the run's status", last.event)
				}
				var lastID string
				for _, fr := range frames {
					if fr.event == "log" {
						if fr.id == "" {
							t.Errorf("got a log frame of %s step %d without an id", fr.data.Job, *fr.data.Step)
						}
						lastID = fr.id
					}
				}
				if lastID != end {
					t.Errorf("got last id %q, want %q", lastID, end)
				}
			})
		}
	})
}

// TestEventStreamSendsEachLineOnce: a chunk published after the stream
// subscribed and read by its catch-up (an overlap) is not sent again, and
// a chunk whose predecessor was never published to the stream (a gap) is
// sent after that predecessor, read from the store.
func TestEventStreamSendsEachLineOnce(t *testing.T) {
	t.Parallel()
	forEachLogStore(t, func(t *testing.T, db *store.DB, cfg logs.Config) {
		// Held at its first frame, the stream has subscribed but not read
		// the store yet.
		gate := newFrameGate(func(frame string) bool { return strings.HasPrefix(frame, "event: run\n") })
		f := newEventsFixture(t, db, cfg, store.RunRunning, gate)
		want := f.add(t, "build", logs.SetupStep, 2)
		s := f.open(t, "", "from=")
		gate.wait(t)
		overlap := f.add(t, "build", logs.SetupStep, 2) // published to the stream, and read by its catch-up
		want = append(want, overlap...)
		gate.open()
		frames := s.until(t, overlap[1])

		// Another store on the same storage (another coordinator) appends
		// a chunk this stream is never published; the next chunk, which
		// it is, starts past the stream's position.
		other, err := logs.New(f.logger, f.cfg)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, f.appendLines(t, other, "build", logs.SetupStep, 2)...)
		after := f.add(t, "build", logs.SetupStep, 1)
		want = append(want, after...)
		frames = append(frames, s.until(t, after[0])...)
		want = append(want, f.add(t, "build", 0, 1)...)
		f.finish(t)
		frames = append(frames, s.rest(t)...)
		if diff := cmp.Diff(map[string][]string{"build": want}, linesByJob(frames)); diff != "" {
			t.Errorf("lines mismatch (-want +got):\n%s", diff)
		}
	})
}

// TestEventStreamResumesFromEveryID: on a finished run, the id of each log
// frame, given as Last-Event-ID, yields exactly the lines of the frames
// after it. A step of more than logs.MaxReadLimit lines is sent in pages.
func TestEventStreamResumesFromEveryID(t *testing.T) {
	t.Parallel()
	forEachLogStore(t, func(t *testing.T, db *store.DB, cfg logs.Config) {
		f := newEventsFixture(t, db, cfg, store.RunFailure, nil)
		f.add(t, "build", logs.SetupStep, 1)
		f.add(t, "build", 0, logs.MaxReadLimit+5)
		f.add(t, "test", logs.SetupStep, 2)
		f.add(t, "test", 1, 2) // step 0 wrote nothing
		all := f.open(t, "", "from=").rest(t)

		type page struct {
			job  string
			step int
			n    int
		}
		var logFrames []sseFrame
		var pages []page
		for _, fr := range all {
			if fr.event == "log" {
				logFrames = append(logFrames, fr)
				pages = append(pages, page{job: fr.data.Job, step: *fr.data.Step, n: len(fr.data.Lines)})
			}
		}
		wantPages := []page{{"build", -1, 1}, {"build", 0, logs.MaxReadLimit}, {"build", 0, 5}, {"test", -1, 2}, {"test", 1, 2}}
		if diff := cmp.Diff(wantPages, pages, cmp.AllowUnexported(page{})); diff != "" {
			t.Fatalf("log frames mismatch (-want +got):\n%s", diff)
		}
		for i, fr := range logFrames {
			got := linesByJob(f.open(t, fr.id, "").rest(t))
			want := linesByJob(logFrames[i+1:])
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("from the id %q of log frame %d: lines mismatch (-want +got):\n%s", fr.id, i, diff)
			}
		}
	})
}

// TestEventStreamRejectsABadPosition: a start position that is not one in
// the run's logs is a 400 naming the entry and what is wrong with it,
// before any event.
func TestEventStreamRejectsABadPosition(t *testing.T) {
	t.Parallel()
	forEachLogStore(t, func(t *testing.T, db *store.DB, cfg logs.Config) {
		f := newEventsFixture(t, db, cfg, store.RunSuccess, nil)
		f.add(t, "build", 0, 2)
		build, test := f.index["build"], f.index["test"]
		size := strings.Split(f.entry(t, "build", 0), ":")[2]
		huge := strings.Repeat(fmt.Sprintf("%d:0:0,", build), 11000)
		for _, tc := range []struct {
			name, lastEventID, query string
			want                     string
		}{
			{name: "garbage", lastEventID: "garbage", want: `Last-Event-ID entry "garbage": want JOB:STEP:OFFSET`},
			{name: "two fields", lastEventID: "0:0", want: `Last-Event-ID entry "0:0": want JOB:STEP:OFFSET`},
			{name: "not a number", lastEventID: "0:x:0", want: `Last-Event-ID entry "0:x:0": want JOB:STEP:OFFSET, three whole numbers`},
			{name: "empty entry", lastEventID: fmt.Sprintf("%d:0:0,", build), want: "Last-Event-ID: has an empty entry"},
			{name: "index out of range", lastEventID: "2:0:0", want: `Last-Event-ID entry "2:0:0": job index 2 is out of range: the run has 2 jobs`},
			{name: "negative index", lastEventID: "-1:0:0", want: `job index -1 is out of range`},
			{name: "duplicate index", lastEventID: fmt.Sprintf("%d:-1:0,%d:0:0", test, test),
				want: fmt.Sprintf(`Last-Event-ID entry "%d:0:0": job index %d is given more than once`, test, test)},
			{name: "step past the last", lastEventID: fmt.Sprintf("%d:1:0", build),
				want: fmt.Sprintf(`Last-Event-ID entry "%d:1:0": step 1 is out of range: job "build" has steps -1 (setup) to 0`, build)},
			{name: "provisioning step", lastEventID: fmt.Sprintf("%d:-2:0", test), want: `step -2 is out of range: job "test" has steps -1 (setup) to 1`},
			{name: "negative offset", lastEventID: fmt.Sprintf("%d:0:-1", build), want: "offset -1 is negative"},
			{name: "offset past the end", lastEventID: fmt.Sprintf("%d:0:99999", build),
				want: fmt.Sprintf(`Last-Event-ID entry "%d:0:99999": offset 99999 is past the end of the step's log (%s bytes)`, build, size)},
			{name: "offset past an empty log", lastEventID: fmt.Sprintf("%d:1:5", test), want: "offset 5 is past the end of the step's log (0 bytes)"},
			{name: "offset inside a line", lastEventID: fmt.Sprintf("%d:0:1", build), want: "offset 1 is not at the start of a line"},
			{name: "too long", lastEventID: huge, want: fmt.Sprintf("Last-Event-ID: is %d bytes, more than the 65536 allowed", len(huge))},
			{name: "from, bad", query: "from=1:2", want: `from entry "1:2": want JOB:STEP:OFFSET`},
			{name: "from, does not decode", query: "from=%zz", want: `from: "%zz" does not decode`},
			{name: "from, twice", query: "from=&from=0:0:0", want: "from: given more than once"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, contentType, body := f.get(t, tc.lastEventID, tc.query)
				if status != http.StatusBadRequest || contentType != "application/json" {
					t.Fatalf("got status %d, %s (%.200s), want 400, application/json", status, contentType, body)
				}
				var e apiv1.Error
				if err := json.Unmarshal(body, &e); err != nil {
					t.Fatalf("decode %q: %v", body, err)
				}
				if !strings.Contains(e.Error, tc.want) {
					t.Errorf("got error %q, want it to contain %q", e.Error, tc.want)
				}
			})
		}
	})
}

// TestEventStreamRecoversFromLag: a stream with a start position that
// falls SubscriberBuffer events behind subscribes again, resends the
// statuses and the missed lines, and goes on: every line once, no
// "lagged" frame. A stream without one still ends with "lagged".
func TestEventStreamRecoversFromLag(t *testing.T) {
	t.Parallel()
	const buffer = 4
	for _, tc := range []struct {
		name  string
		query string
	}{
		{name: "with a start position", query: "from="},
		{name: "without a start position"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			forEachLogStore(t, func(t *testing.T, db *store.DB, cfg logs.Config) {
				cfg.SubscriberBuffer = buffer
				gate := newFrameGate(func(frame string) bool { return strings.Contains(frame, "test line 1 ") })
				f := newEventsFixture(t, db, cfg, store.RunRunning, gate)
				s := f.open(t, "", tc.query)
				want := f.add(t, "test", logs.SetupStep, 1)
				gate.wait(t)
				// The held stream reads no event: the buffer fills, and
				// the next event drops it.
				for range buffer + 1 {
					want = append(want, f.add(t, "test", logs.SetupStep, 1)...)
				}
				if got := f.logs.Stats().SubscribersLagged; got != 1 {
					t.Fatalf("got %d subscribers lagged, want 1", got)
				}
				gate.open()
				if tc.query == "" {
					frames := s.rest(t)
					if last := frames[len(frames)-1]; last.event != "lagged" {
						t.Errorf("got last frame %q, want lagged", last.event)
					}
					if diff := cmp.Diff(map[string][]string{"test": want[:1+buffer]}, linesByJob(frames)); diff != "" {
						t.Errorf("lines mismatch (-want +got):\n%s", diff)
					}
					return
				}
				// The stream may be held in the catch-up or live; either
				// way, it has recovered once it resent the run's status,
				// and then it has every line stored so far.
				last := want[len(want)-1]
				frames := s.readUntil(t, "recovery", func(frames []sseFrame) bool {
					return slices.Contains(linesByJob(frames)["test"], last) &&
						len(slices.DeleteFunc(statusFrames(frames), func(s string) bool { return s != "run running" })) == 2
				})
				want = append(want, f.add(t, "test", 0, 2)...)
				f.finish(t)
				frames = append(frames, s.rest(t)...)
				if diff := cmp.Diff(map[string][]string{"test": want}, linesByJob(frames)); diff != "" {
					t.Errorf("lines mismatch (-want +got):\n%s", diff)
				}
				wantStatus := []string{"run running", "job running", "job running", "run running", "job running", "job running", "run success"}
				if diff := cmp.Diff(wantStatus, statusFrames(frames)); diff != "" {
					t.Errorf("status frames mismatch (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestEventStreamSendsLateLinesOfAnEarlierStep: output added to a step
// before the position's (an agent's note to the setup's log while a step
// runs) is sent live, once, and the position stays in the later step.
func TestEventStreamSendsLateLinesOfAnEarlierStep(t *testing.T) {
	t.Parallel()
	forEachLogStore(t, func(t *testing.T, db *store.DB, cfg logs.Config) {
		f := newEventsFixture(t, db, cfg, store.RunRunning, nil)
		f.add(t, "build", logs.SetupStep, 2)
		f.add(t, "build", 0, 1)
		s := f.open(t, "", "from="+f.entry(t, "build", 0))
		want := f.add(t, "build", logs.SetupStep, 1)
		frames := s.until(t, want[0])
		if got, wantID := frames[len(frames)-1].id, position(f.entry(t, "build", 0), fmt.Sprintf("%d:-1:0", f.index["test"])); got != wantID {
			t.Errorf("got id %q, want %q", got, wantID)
		}
		want = append(want, f.add(t, "build", 0, 1)...)
		want = append(want, f.add(t, "build", logs.SetupStep, 1)...)
		f.finish(t)
		frames = append(frames, s.rest(t)...)
		if diff := cmp.Diff(map[string][]string{"build": want}, linesByJob(frames)); diff != "" {
			t.Errorf("lines mismatch (-want +got):\n%s", diff)
		}
	})
}

// TestEventStreamEndsWithEveryStoredLine: a stream with a start position
// sends, before the run's final status, the lines stored that were never
// published to it.
func TestEventStreamEndsWithEveryStoredLine(t *testing.T) {
	t.Parallel()
	forEachLogStore(t, func(t *testing.T, db *store.DB, cfg logs.Config) {
		f := newEventsFixture(t, db, cfg, store.RunRunning, nil)
		s := f.open(t, "", "from=")
		first := f.add(t, "test", logs.SetupStep, 1)
		frames := s.until(t, first[0])
		other, err := logs.New(f.logger, f.cfg) // another coordinator's store
		if err != nil {
			t.Fatal(err)
		}
		unpublished := f.appendLines(t, other, "test", 1, 2)
		f.finish(t)
		frames = append(frames, s.rest(t)...)
		if diff := cmp.Diff(map[string][]string{"test": append(first, unpublished...)}, linesByJob(frames)); diff != "" {
			t.Errorf("lines mismatch (-want +got):\n%s", diff)
		}
		if last := frames[len(frames)-1]; last.event != "run" || last.data.Status != "success" {
			t.Errorf("got last frame %q %q, want the run's final status", last.event, last.data.Status)
		}
	})
}
