package logs_test

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/logs"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC)

// newStore builds a Store on dir (a fresh temporary directory when empty)
// that logs to the test's output.
func newStore(t testing.TB, dir string) *logs.Store {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	st, err := logs.New(slog.New(slog.NewTextHandler(t.Output(), nil)), logs.Config{Dir: dir, SubscriberBuffer: 64})
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	return st
}

// mkLines returns n lines "prefix i".
func mkLines(prefix string, n int) []logs.Line {
	out := make([]logs.Line, n)
	for i := range out {
		out[i] = logs.Line{TS: t0.Add(time.Duration(i) * time.Millisecond), Text: fmt.Sprintf("%s %d", prefix, i)}
	}
	return out
}

// stored returns what Read gives back for lines appended with seq.
func stored(seq uint64, attempt int, lines []logs.Line) []logs.StoredLine {
	out := make([]logs.StoredLine, len(lines))
	for i, l := range lines {
		out[i] = logs.StoredLine{Seq: seq, Attempt: attempt, TS: l.TS, Text: l.Text}
	}
	return out
}

func mustAppend(t testing.TB, st *logs.Store, key logs.StepKey, seq uint64, lines []logs.Line) {
	t.Helper()
	ok, err := st.Append(t.Context(), key, seq, lines)
	if err != nil {
		t.Fatalf("append %v seq %d: %v", key, seq, err)
	}
	if !ok {
		t.Fatalf("append %v seq %d: got skipped, want stored", key, seq)
	}
}

// readAll reads a step's whole log in pages of limit lines.
func readAll(t testing.TB, st *logs.Store, key logs.StepKey, limit int) []logs.StoredLine {
	t.Helper()
	var all []logs.StoredLine
	cursor := int64(0)
	for {
		lines, next, err := st.Read(t.Context(), key, cursor, limit)
		if err != nil {
			t.Fatalf("read %v at %d: %v", key, cursor, err)
		}
		if len(lines) == 0 {
			if next != cursor {
				t.Fatalf("read %v at %d: got next %d with no lines, want %d", key, cursor, next, cursor)
			}
			return all
		}
		all = append(all, lines...)
		cursor = next
	}
}

func TestAppendRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := newStore(t, dir)
	ctx := t.Context()
	k0 := logs.StepKey{RunID: "run-1", JobID: "job-1", Step: 0}
	setup := logs.StepKey{RunID: "run-1", JobID: "job-1", Step: logs.SetupStep}

	a, b, c := mkLines("a", 3), mkLines("b", 2), mkLines("setup", 1)
	c[0].Text = `quotes " <tags> & a	tab`
	mustAppend(t, st, setup, 1, c)
	mustAppend(t, st, k0, 2, a)
	mustAppend(t, st, k0, 3, b)

	want := append(stored(2, 0, a), stored(3, 0, b)...)
	for _, limit := range []int{0, 1, 2, 100} {
		if diff := cmp.Diff(want, readAll(t, st, k0, limit)); diff != "" {
			t.Errorf("read step 0 with limit %d (-want +got):\n%s", limit, diff)
		}
	}
	if diff := cmp.Diff(stored(1, 0, c), readAll(t, st, setup, 0)); diff != "" {
		t.Errorf("read setup step (-want +got):\n%s", diff)
	}

	// The cursor after the first chunk's lines reads exactly the second.
	first, next, err := st.Read(ctx, k0, 0, 3)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if len(first) != 3 {
		t.Fatalf("got %d lines, want 3", len(first))
	}
	rest, end, err := st.Read(ctx, k0, next, 0)
	if err != nil {
		t.Fatalf("read from %d: %v", next, err)
	}
	if diff := cmp.Diff(stored(3, 0, b), rest); diff != "" {
		t.Errorf("read from cursor %d (-want +got):\n%s", next, diff)
	}
	size, err := st.Size(ctx, k0)
	if err != nil {
		t.Fatalf("size: %v", err)
	}
	if size != end {
		t.Errorf("got size %d, want the final cursor %d", size, end)
	}

	// The layout and record format are the documented ones.
	data, err := os.ReadFile(filepath.Join(dir, "run-1", "job-1", "step-setup.log"))
	if err != nil {
		t.Fatalf("read setup file: %v", err)
	}
	wantRec := `{"seq":1,"ts":"2026-05-01T12:00:00.123456789Z","text":"quotes \" <tags> & a\ttab"}` + "\n"
	if string(data) != wantRec {
		t.Errorf("got setup file %q, want %q", data, wantRec)
	}
	if _, err := os.Stat(filepath.Join(dir, "run-1", "job-1", "step-0.log")); err != nil {
		t.Errorf("step 0 file: %v", err)
	}

	// A step without a log reads as empty and has size 0.
	none := logs.StepKey{RunID: "run-1", JobID: "job-1", Step: 7}
	if lines, next, err := st.Read(ctx, none, 0, 0); err != nil || len(lines) != 0 || next != 0 {
		t.Errorf("read missing step: got %d lines, next %d, err %v; want none, 0, nil", len(lines), next, err)
	}
	if size, err := st.Size(ctx, none); err != nil || size != 0 {
		t.Errorf("size of missing step: got %d, %v; want 0, nil", size, err)
	}

	if got := st.Stats(); got.BytesStored != size+int64(len(data)) || got.ChunksStored != 3 {
		t.Errorf("got stats %+v, want %d bytes in 3 chunks", got, size+int64(len(data)))
	}
}

func TestReadPartialLineAndBadCursors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := newStore(t, dir)
	ctx := t.Context()
	key := logs.StepKey{RunID: "r", JobID: "j", Step: 2}
	lines := mkLines("x", 2)
	mustAppend(t, st, key, 1, lines)
	size, err := st.Size(ctx, key)
	if err != nil {
		t.Fatalf("size: %v", err)
	}

	// A line that is still being written (no newline yet) is not returned.
	path := filepath.Join(dir, "r", "j", "step-2.log")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if _, err := f.WriteString(`{"seq":2,"ts":"2026-05-01T12:00:00Z","te`); err != nil {
		t.Fatalf("write partial: %v", err)
	}
	f.Close()
	got, next, err := st.Read(ctx, key, 0, 0)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if diff := cmp.Diff(stored(1, 0, lines), got); diff != "" {
		t.Errorf("read with a partial last line (-want +got):\n%s", diff)
	}
	if next != size {
		t.Errorf("got next %d, want %d (before the partial line)", next, size)
	}
	if got, next2, err := st.Read(ctx, key, next, 0); err != nil || len(got) != 0 || next2 != next {
		t.Errorf("read at the partial line: got %d lines, next %d, err %v; want none, %d, nil", len(got), next2, err, next)
	}

	for _, tc := range []struct {
		name   string
		cursor int64
	}{
		{name: "negative", cursor: -1},
		{name: "mid line", cursor: 5},
		{name: "past the end", cursor: size + 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, _, err := st.Read(t.Context(), key, tc.cursor, 0); !errors.Is(err, logs.ErrBadCursor) {
				t.Errorf("read at %d: got %v, want ErrBadCursor", tc.cursor, err)
			}
		})
	}
}

func TestAppendSkipsReplays(t *testing.T) {
	t.Parallel()
	st := newStore(t, "")
	key := func(step, attempt int) logs.StepKey {
		return logs.StepKey{RunID: "r", JobID: "j", Step: step, Attempt: attempt}
	}
	steps := []struct {
		name    string
		key     logs.StepKey
		seq     uint64
		stored  bool
		logStep int
	}{
		{name: "first", key: key(0, 0), seq: 1, stored: true},
		{name: "same seq again", key: key(0, 0), seq: 1, stored: false},
		{name: "same seq in another step", key: key(1, 0), seq: 1, stored: false},
		{name: "gap", key: key(1, 0), seq: 3, stored: true},
		{name: "older seq after a gap", key: key(0, 0), seq: 2, stored: false},
		{name: "attempt 1 spelled out", key: key(1, 1), seq: 3, stored: false},
		{name: "new attempt restarts seq", key: key(0, 2), seq: 1, stored: true},
		{name: "old attempt after new", key: key(0, 1), seq: 9, stored: false},
		{name: "empty chunk advances", key: key(0, 2), seq: 2, stored: true},
		{name: "after the empty chunk", key: key(0, 2), seq: 2, stored: false},
	}
	for _, s := range steps {
		lines := mkLines(s.name, 1)
		if s.name == "empty chunk advances" {
			lines = nil
		}
		ok, err := st.Append(t.Context(), s.key, s.seq, lines)
		if err != nil {
			t.Fatalf("%s: append: %v", s.name, err)
		}
		if ok != s.stored {
			t.Errorf("%s: got stored %v, want %v", s.name, ok, s.stored)
		}
	}
	want0 := append(stored(1, 0, mkLines("first", 1)), stored(1, 2, mkLines("new attempt restarts seq", 1))...)
	if diff := cmp.Diff(want0, readAll(t, st, key(0, 0), 0)); diff != "" {
		t.Errorf("step 0 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(stored(3, 0, mkLines("gap", 1)), readAll(t, st, key(1, 0), 0)); diff != "" {
		t.Errorf("step 1 (-want +got):\n%s", diff)
	}
	if got := st.Stats().ChunksSkipped; got != 6 {
		t.Errorf("got %d chunks skipped, want 6", got)
	}
	if _, err := st.Append(t.Context(), key(0, 0), 0, mkLines("zero", 1)); err == nil {
		t.Errorf("append seq 0: got no error, want one")
	}
}

func TestSeqRecoveredAfterReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := newStore(t, dir)
	k := func(job string, step, attempt int) logs.StepKey {
		return logs.StepKey{RunID: "r", JobID: job, Step: step, Attempt: attempt}
	}
	mustAppend(t, first, k("a", -1, 0), 1, mkLines("a", 2))
	mustAppend(t, first, k("a", 0, 0), 2, mkLines("a", 2))
	mustAppend(t, first, k("a", 1, 0), 5, mkLines("a", 2))
	mustAppend(t, first, k("a", 0, 0), 6, mkLines("a", 1))
	mustAppend(t, first, k("b", 0, 0), 1, mkLines("b", 1))
	mustAppend(t, first, k("b", 0, 2), 1, mkLines("b", 1))
	// A record longer than the tail reader's 64 KiB block: 100 KiB of
	// quotes, each escaped to two bytes.
	mustAppend(t, first, k("c", 3, 0), 4, []logs.Line{{TS: t0, Text: strings.Repeat(`"`, 100<<10)}})

	// A crash in the middle of a write left half a record in job c's file.
	path := filepath.Join(dir, "r", "c", "step-3.log")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if _, err := f.WriteString(`{"seq":5,"ts":"2026-05-`); err != nil {
		t.Fatalf("write: %v", err)
	}
	f.Close()

	second := newStore(t, dir)
	for _, tc := range []struct {
		name   string
		key    logs.StepKey
		seq    uint64
		stored bool
	}{
		{name: "a: last seq, other step", key: k("a", 2, 0), seq: 6, stored: false},
		{name: "a: lower seq", key: k("a", 1, 0), seq: 5, stored: false},
		{name: "a: next seq", key: k("a", 2, 0), seq: 7, stored: true},
		{name: "b: attempt 1 after attempt 2", key: k("b", 0, 1), seq: 8, stored: false},
		{name: "b: attempt 2 next seq", key: k("b", 0, 2), seq: 2, stored: true},
		{name: "c: seq of the half record", key: k("c", 3, 0), seq: 5, stored: true},
		{name: "new job", key: k("d", 0, 0), seq: 1, stored: true},
	} {
		ok, err := second.Append(t.Context(), tc.key, tc.seq, mkLines(tc.name, 1))
		if err != nil {
			t.Fatalf("%s: append: %v", tc.name, err)
		}
		if ok != tc.stored {
			t.Errorf("%s: got stored %v, want %v", tc.name, ok, tc.stored)
		}
	}
	got := readAll(t, second, k("c", 3, 0), 0)
	if len(got) != 2 || got[0].Seq != 4 || len(got[0].Text) != 100<<10 || got[1].Seq != 5 {
		t.Errorf("job c after recovery: got %d lines, want the long line (seq 4) and the new one (seq 5)", len(got))
	}
}

func TestConcurrentAppends(t *testing.T) {
	t.Parallel()
	st := newStore(t, "")
	const (
		jobs   = 8
		steps  = 3
		chunks = 30
		per    = 5
	)
	events, cancel := st.Subscribe("run")
	defer cancel()

	var wg sync.WaitGroup
	for j := range jobs {
		job := fmt.Sprintf("job-%d", j)
		// Appends of one job come from one connection, in order; jobs run
		// side by side.
		wg.Go(func() {
			for c := range chunks {
				key := logs.StepKey{RunID: "run", JobID: job, Step: c%steps - 1}
				if _, err := st.Append(t.Context(), key, uint64(c+1), mkLines(job, per)); err != nil {
					t.Errorf("append %v: %v", key, err)
					return
				}
			}
		})
		// A reader follows each job's step 0 while it is written.
		wg.Go(func() {
			key := logs.StepKey{RunID: "run", JobID: job, Step: 0}
			cursor := int64(0)
			for range 50 {
				lines, next, err := st.Read(t.Context(), key, cursor, 7)
				if err != nil {
					t.Errorf("read %v at %d: %v", key, cursor, err)
					return
				}
				if next < cursor || (len(lines) == 0) != (next == cursor) {
					t.Errorf("read %v at %d: got %d lines and next %d", key, cursor, len(lines), next)
					return
				}
				cursor = next
			}
		})
	}
	wg.Wait()

	for j := range jobs {
		job := fmt.Sprintf("job-%d", j)
		for s := -1; s < steps-1; s++ {
			got := readAll(t, st, logs.StepKey{RunID: "run", JobID: job, Step: s}, 0)
			if len(got) != chunks/steps*per {
				t.Errorf("%s step %d: got %d lines, want %d", job, s, len(got), chunks/steps*per)
			}
			for i := 1; i < len(got); i++ {
				if got[i].Seq < got[i-1].Seq {
					t.Errorf("%s step %d: seq %d after %d", job, s, got[i].Seq, got[i-1].Seq)
				}
			}
		}
	}
	// The subscriber's buffer (64) is smaller than the chunks published,
	// and nobody drained it: it was dropped as lagged, without blocking.
	var last logs.Event
	for ev := range events {
		last = ev
	}
	if last.Kind != logs.EventLagged {
		t.Errorf("got last event %q, want %q", last.Kind, logs.EventLagged)
	}
}

func TestFailedWriteLeavesFileUnchanged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		before  int // chunks stored before the failing one
		failure func(f *os.File, b []byte) (int, error)
	}{
		{name: "half written, disk full", before: 1, failure: func(f *os.File, b []byte) (int, error) {
			n, _ := f.Write(b[:len(b)/2])
			return n, fmt.Errorf("write %s: %w", f.Name(), syscall.ENOSPC)
		}},
		{name: "short write", before: 1, failure: func(f *os.File, b []byte) (int, error) {
			return f.Write(b[:len(b)-1])
		}},
		{name: "new file", before: 0, failure: func(f *os.File, b []byte) (int, error) {
			n, _ := f.Write(b[:3])
			return n, syscall.ENOSPC
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			st := newStore(t, dir)
			ctx := t.Context()
			key := logs.StepKey{RunID: "r", JobID: "j", Step: 0}
			var want []logs.StoredLine
			for i := range tc.before {
				mustAppend(t, st, key, uint64(i+1), mkLines("ok", 2))
				want = append(want, stored(uint64(i+1), 0, mkLines("ok", 2))...)
			}
			sizeBefore, _ := st.Size(ctx, key)
			bytesBefore := st.Stats().BytesStored
			events, cancel := st.Subscribe("r")
			defer cancel()

			seq := uint64(tc.before + 1)
			st.SetWrite(tc.failure)
			ok, err := st.Append(ctx, key, seq, mkLines("lost", 3))
			st.SetWrite(nil)
			if ok || err == nil {
				t.Fatalf("append with a failing write: got %v, %v; want false and an error", ok, err)
			}
			if tc.name != "short write" && !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("got error %v, want it to wrap ENOSPC", err)
			}
			if path := filepath.Join(dir, "r", "j", "step-0.log"); !strings.Contains(err.Error(), path) {
				t.Errorf("got error %q, want it to name %q", err, path)
			}
			if size, _ := st.Size(ctx, key); size != sizeBefore {
				t.Errorf("got size %d after the failed write, want %d", size, sizeBefore)
			}
			if got := st.Stats().BytesStored; got != bytesBefore {
				t.Errorf("got %d bytes stored, want %d", got, bytesBefore)
			}
			select {
			case ev := <-events:
				t.Errorf("got event %+v for a failed append, want none", ev)
			default:
			}

			// The same chunk goes through once the disk has room again.
			mustAppend(t, st, key, seq, mkLines("retried", 3))
			want = append(want, stored(seq, 0, mkLines("retried", 3))...)
			if diff := cmp.Diff(want, readAll(t, st, key, 0)); diff != "" {
				t.Errorf("after the retry (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnsafeIDsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root := filepath.Join(dir, "logs")
	st := newStore(t, root)
	for _, tc := range []struct {
		name string
		key  logs.StepKey
	}{
		{name: "parent run", key: logs.StepKey{RunID: "..", JobID: "j"}},
		{name: "dot job", key: logs.StepKey{RunID: "r", JobID: "."}},
		{name: "traversal", key: logs.StepKey{RunID: "../../etc", JobID: "j"}},
		{name: "slash", key: logs.StepKey{RunID: "r", JobID: "a/b"}},
		{name: "backslash", key: logs.StepKey{RunID: `a\b`, JobID: "j"}},
		{name: "hidden", key: logs.StepKey{RunID: ".git", JobID: "j"}},
		{name: "empty run", key: logs.StepKey{JobID: "j"}},
		{name: "empty job", key: logs.StepKey{RunID: "r"}},
		{name: "nul", key: logs.StepKey{RunID: "r\x00", JobID: "j"}},
		{name: "space", key: logs.StepKey{RunID: "r 1", JobID: "j"}},
		{name: "too long", key: logs.StepKey{RunID: strings.Repeat("a", 129), JobID: "j"}},
		{name: "step below -1", key: logs.StepKey{RunID: "r", JobID: "j", Step: -2}},
		{name: "negative attempt", key: logs.StepKey{RunID: "r", JobID: "j", Attempt: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			if _, err := st.Append(ctx, tc.key, 1, mkLines("x", 1)); !errors.Is(err, logs.ErrInvalidKey) {
				t.Errorf("append: got %v, want ErrInvalidKey", err)
			}
			if _, _, err := st.Read(ctx, tc.key, 0, 0); !errors.Is(err, logs.ErrInvalidKey) {
				t.Errorf("read: got %v, want ErrInvalidKey", err)
			}
			if _, err := st.Size(ctx, tc.key); !errors.Is(err, logs.ErrInvalidKey) {
				t.Errorf("size: got %v, want ErrInvalidKey", err)
			}
		})
	}
	if err := st.RemoveRun(t.Context(), ".."); !errors.Is(err, logs.ErrInvalidKey) {
		t.Errorf("remove run ..: got %v, want ErrInvalidKey", err)
	}
	// The longest safe id is accepted.
	mustAppend(t, st, logs.StepKey{RunID: strings.Repeat("a", 128), JobID: "0195f0c4-7a1b-7c3d-9e8f-0123456789ab"}, 1, mkLines("x", 1))
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read dir: %v", err)
	}
	if len(entries) != 1 || entries[0].Name() != "logs" {
		t.Errorf("got %d entries beside the root, want only the root", len(entries))
	}
}

func TestRemoveRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := newStore(t, dir)
	ctx := t.Context()
	gone := logs.StepKey{RunID: "old", JobID: "j", Step: 0}
	kept := logs.StepKey{RunID: "new", JobID: "j", Step: 0}
	mustAppend(t, st, gone, 3, mkLines("old", 1))
	mustAppend(t, st, kept, 1, mkLines("new", 1))

	if err := st.RemoveRun(ctx, "old"); err != nil {
		t.Fatalf("remove run: %v", err)
	}
	if err := st.RemoveRun(ctx, "never"); err != nil {
		t.Errorf("remove a run without logs: got %v, want nil", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "old")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("run dir after removal: got %v, want it gone", err)
	}
	if got := readAll(t, st, kept, 0); len(got) != 1 {
		t.Errorf("other run: got %d lines, want 1", len(got))
	}
	// The removed run's position is forgotten with its files.
	mustAppend(t, st, gone, 1, mkLines("again", 1))

	st.ForgetJob("new", "j")
	if ok, err := st.Append(ctx, kept, 1, mkLines("dup", 1)); err != nil || ok {
		t.Errorf("append a stored seq after ForgetJob: got %v, %v; want false, nil", ok, err)
	}
}

// TestFilesOwnerOnly checks that the log directories and files are
// created readable by their owner only.
func TestFilesOwnerOnly(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "logs")
	st := newStore(t, dir)
	mustAppend(t, st, logs.StepKey{RunID: "run-1", JobID: "job-1", Step: 0}, 1, mkLines("a", 2))
	mustAppend(t, st, logs.StepKey{RunID: "run-1", JobID: "job-1", Step: logs.SetupStep}, 2, mkLines("s", 1))
	n := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n++
		if got := fi.Mode().Perm(); got&0o077 != 0 {
			t.Errorf("%s: got mode %s, want no group or other bits", path, got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 { // logs, run-1, job-1 and two step files
		t.Errorf("walked %d entries, want at least 5", n)
	}
}
