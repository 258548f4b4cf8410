package web

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/web/ansi"
)

// The log viewer reads a job's log by line number: a window of lines
// (GET /runs/{id}/jobs/{job}/lines?from=&count=) and the numbers of the
// lines matching a search over the whole stored log (…/search?q=). Both
// go through the API for the session, a page of up to readPage lines at a
// time, and remember where each page started (a checkpoint: its first
// line number and the API's cursor), so that reaching line 99,990 of a
// long log reads it once, and later windows start from the nearest
// checkpoint.
const (
	readPage       = 10000 // lines per API read (the API's maximum)
	maxWindow      = 2000  // lines one window request may ask for
	maxMatches     = 1000  // matches one search returns
	maxQuery       = 200   // bytes of a search query
	maxIndexedJobs = 256   // jobs whose checkpoints are remembered
	maxCheckpoints = 10000 // checkpoints per job (10,000 × 10,000 lines)
)

// checkpoint is where a page of the job's log starts.
type checkpoint struct {
	line   int    // number of its first line, from 1
	cursor string // the API's cursor before it ("" for the start)
}

// jobIndex is what is known of a job's log: its pages' starts, in order.
type jobIndex struct {
	mu     sync.Mutex
	points []checkpoint
	// end is the cursor after the last line read, endLine that line's
	// number, done whether the log is complete (the job ended).
	end     string
	endLine int
	done    bool
	// spans are the job's sections (a step's run of lines), in order,
	// for its lines 1 to known.
	spans []span
	known int
}

// span is a run of consecutive lines of one step.
type span struct {
	Step  int `json:"step"`
	From  int `json:"from"`
	Count int `json:"count"`
}

// note records that line n belongs to step, when n extends the lines
// whose steps are known.
func (idx *jobIndex) note(n, step int) {
	if n != idx.known+1 {
		return
	}
	idx.known = n
	if k := len(idx.spans); k > 0 && idx.spans[k-1].Step == step {
		idx.spans[k-1].Count++
		return
	}
	idx.spans = append(idx.spans, span{Step: step, From: n, Count: 1})
}

// logIndex remembers the checkpoints of the jobs read lately (LRU).
type logIndex struct {
	mu    sync.Mutex
	jobs  map[string]*list.Element
	order *list.List // of *indexEntry, most recent first
}

type indexEntry struct {
	key string
	idx *jobIndex
}

func newLogIndex() *logIndex { return &logIndex{jobs: map[string]*list.Element{}, order: list.New()} }

func (li *logIndex) get(key string) *jobIndex {
	li.mu.Lock()
	defer li.mu.Unlock()
	if e, ok := li.jobs[key]; ok {
		li.order.MoveToFront(e)
		return e.Value.(*indexEntry).idx
	}
	idx := &jobIndex{points: []checkpoint{{line: 1}}}
	li.jobs[key] = li.order.PushFront(&indexEntry{key: key, idx: idx})
	for li.order.Len() > maxIndexedJobs {
		old := li.order.Back()
		li.order.Remove(old)
		delete(li.jobs, old.Value.(*indexEntry).key)
	}
	return idx
}

// numbered is a log line with its number in the job's log.
type numbered struct {
	N    int
	Line apiv1.LogLine
}

// scan reads the job's log from the checkpoint at or before line from,
// calling visit for each line until it returns false or the stored log
// ends. It records the checkpoints it passes.
func (h *Handler) scan(ctx context.Context, s *sessionInfo, runID, job string, from int, visit func(numbered) bool) (total int, done bool, err error) {
	idx := h.index.get(runID + "\x00" + job)
	idx.mu.Lock()
	defer idx.mu.Unlock()
	start := idx.points[0]
	for _, p := range idx.points {
		if p.line <= from {
			start = p
		}
	}
	n, cursor := start.line, start.cursor
	for {
		var page apiv1.LogPage
		path := fmt.Sprintf("/api/v1/runs/%s/jobs/%s/logs?limit=%d&cursor=%s", pathEscape(runID), pathEscape(job), readPage, url.QueryEscape(cursor))
		if err := h.call(ctx, s.Principal, http.MethodGet, path, nil, &page); err != nil {
			return 0, false, err
		}
		if len(page.Lines) > 0 && n > idx.points[len(idx.points)-1].line && len(idx.points) < maxCheckpoints {
			idx.points = append(idx.points, checkpoint{line: n, cursor: cursor})
		}
		for _, l := range page.Lines {
			idx.note(n, l.Step)
			if !visit(numbered{N: n, Line: l}) {
				return max(n, idx.endLine), idx.done, nil
			}
			n++
		}
		if n-1 > idx.endLine {
			idx.end, idx.endLine = page.Next, n-1
		}
		if page.Done || len(page.Lines) == 0 || page.Next == cursor {
			idx.done = page.Done
			return n - 1, page.Done, nil
		}
		cursor = page.Next
	}
}

// windowLine is a line as the viewer's script receives it.
type windowLine struct {
	N    int       `json:"n"`
	Step int       `json:"step"`
	TS   time.Time `json:"ts"`
	HTML string    `json:"html"`
}

// lines answers a window of a job's log: up to count lines from line
// from, as safe HTML.
func (h *Handler) lines(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	q := r.URL.Query()
	from, err1 := strconv.Atoi(q.Get("from"))
	count, err2 := strconv.Atoi(q.Get("count"))
	if err1 != nil || err2 != nil || from < 1 || count < 1 || count > maxWindow {
		writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("want from ≥ 1 and count 1 to %d", maxWindow))
		return
	}
	out := struct {
		Lines []windowLine `json:"lines"`
		Total int          `json:"total"`
		Done  bool         `json:"done"`
	}{Lines: []windowLine{}}
	total, done, err := h.scan(r.Context(), s, r.PathValue("id"), r.PathValue("job"), from, func(l numbered) bool {
		if l.N < from {
			return true
		}
		out.Lines = append(out.Lines, windowLine{N: l.N, Step: l.Line.Step, TS: l.Line.TS, HTML: ansi.Line(l.Line.Text)})
		return len(out.Lines) < count
	})
	if err != nil {
		h.jsonFail(w, err)
		return
	}
	out.Total, out.Done = total, done
	writeJSON(w, out)
}

// outline answers a job's sections (the lines of each step: the first
// one's number and how many), its number of lines, and the position where
// its stored log ends now (what the run's event stream takes as from=).
// It reads the whole log once; later calls read only what was added.
func (h *Handler) outline(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	runID, job := r.PathValue("id"), r.PathValue("job")
	idx := h.index.get(runID + "\x00" + job)
	idx.mu.Lock()
	from := idx.known + 1
	idx.mu.Unlock()
	total, done, err := h.scan(r.Context(), s, runID, job, from, func(numbered) bool { return true })
	if err != nil {
		h.jsonFail(w, err)
		return
	}
	idx.mu.Lock()
	out := struct {
		Sections []span `json:"sections"`
		Total    int    `json:"total"`
		Done     bool   `json:"done"`
		Pos      string `json:"pos"`
	}{Sections: append([]span{}, idx.spans...), Total: total, Done: done, Pos: streamPos(idx.end)}
	idx.mu.Unlock()
	writeJSON(w, out)
}

// streamPos turns a logs cursor ("<step>:<offset>") into a job's entry
// of the event stream's position, which leaves the provisioning section
// (step -2) out: a cursor still in it is the start of the setup's log.
func streamPos(cursor string) string {
	step, _, ok := strings.Cut(cursor, ":")
	if !ok || step == "-2" {
		return "-1:0"
	}
	return cursor
}

// search answers the numbers of the lines of a job's whole stored log
// that contain q (case-insensitive, colours ignored), up to maxMatches.
func (h *Handler) search(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	query := r.URL.Query().Get("q")
	if query == "" || len(query) > maxQuery {
		writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("q: want 1 to %d bytes", maxQuery))
		return
	}
	needle := strings.ToLower(query)
	out := struct {
		Matches   []int `json:"matches"`
		Truncated bool  `json:"truncated"`
		Total     int   `json:"total"`
	}{Matches: []int{}}
	total, _, err := h.scan(r.Context(), s, r.PathValue("id"), r.PathValue("job"), 1, func(l numbered) bool {
		if strings.Contains(strings.ToLower(ansi.Strip(l.Line.Text)), needle) {
			if len(out.Matches) == maxMatches {
				out.Truncated = true
				return false
			}
			out.Matches = append(out.Matches, l.N)
		}
		return true
	})
	if err != nil {
		h.jsonFail(w, err)
		return
	}
	out.Total = total
	writeJSON(w, out)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(apiv1.Error{Error: msg})
}

// jsonFail answers an API failure as JSON with the API's status.
func (h *Handler) jsonFail(w http.ResponseWriter, err error) {
	status, msg := http.StatusInternalServerError, err.Error()
	if ae, ok := err.(*apiError); ok {
		status, msg = ae.Status, ae.Message
	} else {
		h.cfg.Log.Error("dashboard log read failed", "error", err)
	}
	writeJSONError(w, status, msg)
}

// raw streams a job's whole stored log as plain text, colours stripped,
// for download.
func (h *Handler) raw(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	job := r.PathValue("job")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", sanitizeFilename(r.PathValue("id")+"-"+job+".log")))
	started := false
	_, _, err := h.scan(r.Context(), s, r.PathValue("id"), job, 1, func(l numbered) bool {
		started = true
		_, err := fmt.Fprintf(w, "%s %s\n", l.Line.TS.UTC().Format(time.RFC3339Nano), ansi.Strip(l.Line.Text))
		return err == nil
	})
	if err != nil && !started {
		w.Header().Set("Content-Disposition", "")
		h.jsonFail(w, err)
	}
}

// sanitizeFilename keeps a download's name to safe characters.
func sanitizeFilename(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
}
