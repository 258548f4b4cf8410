package outbox

import (
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

// openAt opens the outbox at path and closes it when the test ends.
func openAt(t *testing.T, path string, opts Options) *Outbox {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	o, err := Open(path, opts)
	if err != nil {
		t.Fatalf("open outbox: %v", err)
	}
	t.Cleanup(func() {
		if err := o.Close(); err != nil {
			t.Errorf("close outbox: %v", err)
		}
	})
	return o
}

// openTemp opens a new outbox in the test's temporary directory.
func openTemp(t *testing.T, opts Options) *Outbox {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "outbox.db"), opts)
}

// mustAppend appends or fails the test.
func mustAppend(t testing.TB, o *Outbox, stream, kind, payload string) uint64 {
	t.Helper()
	seq, err := o.Append(t.Context(), stream, kind, []byte(payload))
	if err != nil {
		t.Fatalf("append to %q: %v", stream, err)
	}
	return seq
}

// all returns every pending entry of stream ("" for all streams).
func all(t *testing.T, o *Outbox, stream string) []Entry {
	t.Helper()
	got, err := o.Pending(t.Context(), stream, 0, 1_000_000)
	if err != nil {
		t.Fatalf("pending of %q: %v", stream, err)
	}
	return got
}

// ignoreTime leaves CreatedAt out of entry comparisons; TestRoundTrip
// checks it on its own.
var ignoreTime = cmpopts.IgnoreFields(Entry{}, "CreatedAt")

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	o := openTemp(t, Options{})
	before := time.Now()
	appends := []struct{ stream, kind, payload string }{
		{"coord-a", "job.progress", `{"job":"1","status":"running"}`},
		{"coord-b", "log.chunk", "line one\nline two\n"},
		{"coord-a", "step.status", `{"step":0}`},
		{"coord-a", "job.done", ""},
		{"coord-b", "scaler.event", "\x00\xffbinary"},
	}
	for _, a := range appends {
		mustAppend(t, o, a.stream, a.kind, a.payload)
	}
	after := time.Now()

	want := []Entry{
		{Seq: 1, Prev: 0, Stream: "coord-a", Kind: "job.progress", Payload: []byte(`{"job":"1","status":"running"}`)},
		{Seq: 2, Prev: 0, Stream: "coord-b", Kind: "log.chunk", Payload: []byte("line one\nline two\n")},
		{Seq: 3, Prev: 1, Stream: "coord-a", Kind: "step.status", Payload: []byte(`{"step":0}`)},
		{Seq: 4, Prev: 3, Stream: "coord-a", Kind: "job.done", Payload: []byte{}},
		{Seq: 5, Prev: 2, Stream: "coord-b", Kind: "scaler.event", Payload: []byte("\x00\xffbinary")},
	}
	got := all(t, o, "")
	if diff := cmp.Diff(want, got, ignoreTime); diff != "" {
		t.Fatalf("all pending entries (-want +got):\n%s", diff)
	}
	for _, e := range got {
		if e.CreatedAt.Location() != time.UTC || e.CreatedAt.Before(before.Truncate(time.Microsecond)) || e.CreatedAt.After(after) {
			t.Errorf("entry %d CreatedAt %v, want UTC between %v and %v", e.Seq, e.CreatedAt, before, after)
		}
	}

	tests := []struct {
		name   string
		stream string
		after  uint64
		limit  int
		want   []uint64
	}{
		{name: "one stream", stream: "coord-a", limit: 100, want: []uint64{1, 3, 4}},
		{name: "other stream", stream: "coord-b", limit: 100, want: []uint64{2, 5}},
		{name: "unknown stream", stream: "coord-c", limit: 100, want: nil},
		{name: "after a seq", stream: "coord-a", after: 1, limit: 100, want: []uint64{3, 4}},
		{name: "after a seq of another stream", stream: "coord-a", after: 2, limit: 100, want: []uint64{3, 4}},
		{name: "limit", stream: "coord-a", limit: 2, want: []uint64{1, 3}},
		{name: "all streams with limit", stream: "", after: 1, limit: 3, want: []uint64{2, 3, 4}},
		{name: "after the last", stream: "", after: 5, limit: 3, want: nil},
		{name: "after the largest seq", stream: "", after: ^uint64(0), limit: 3, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			entries, err := o.Pending(t.Context(), tt.stream, tt.after, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			var seqs []uint64
			for _, e := range entries {
				seqs = append(seqs, e.Seq)
			}
			if diff := cmp.Diff(tt.want, seqs); diff != "" {
				t.Errorf("seqs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPendingRejectsBadLimit(t *testing.T) {
	t.Parallel()
	o := openTemp(t, Options{})
	if _, err := o.Pending(t.Context(), "s", 0, 0); err == nil || !strings.Contains(err.Error(), "limit is 0") {
		t.Fatalf("Pending with limit 0: got %v, want an error naming the limit", err)
	}
}

func TestAckIsCumulativeAndIdempotent(t *testing.T) {
	t.Parallel()
	o := openTemp(t, Options{})
	for i := range 6 {
		stream := "a"
		if i%2 == 1 {
			stream = "b"
		}
		mustAppend(t, o, stream, "k", fmt.Sprint(i)) // a: 1,3,5; b: 2,4,6
	}
	steps := []struct {
		name   string
		stream string
		upto   uint64
		want   int
		left   []uint64
	}{
		{name: "first two of a", stream: "a", upto: 3, want: 2, left: []uint64{2, 4, 5, 6}},
		{name: "again", stream: "a", upto: 3, want: 0, left: []uint64{2, 4, 5, 6}},
		{name: "an older seq", stream: "a", upto: 1, want: 0, left: []uint64{2, 4, 5, 6}},
		{name: "zero", stream: "a", upto: 0, want: 0, left: []uint64{2, 4, 5, 6}},
		{name: "another stream's seq leaves it alone", stream: "a", upto: 4, want: 0, left: []uint64{2, 4, 5, 6}},
		{name: "unknown stream", stream: "c", upto: 100, want: 0, left: []uint64{2, 4, 5, 6}},
		{name: "b between its seqs", stream: "b", upto: 3, want: 1, left: []uint64{4, 5, 6}},
		{name: "beyond everything", stream: "b", upto: ^uint64(0), want: 2, left: []uint64{5}},
	}
	for _, s := range steps { // in order: each step builds on the last
		n, err := o.Ack(t.Context(), s.stream, s.upto)
		if err != nil {
			t.Fatalf("%s: ack %q up to %d: %v", s.name, s.stream, s.upto, err)
		}
		if n != s.want {
			t.Errorf("%s: ack %q up to %d removed %d, want %d", s.name, s.stream, s.upto, n, s.want)
		}
		var left []uint64
		for _, e := range all(t, o, "") {
			left = append(left, e.Seq)
		}
		if diff := cmp.Diff(s.left, left); diff != "" {
			t.Errorf("%s: entries left (-want +got):\n%s", s.name, diff)
		}
	}
	if _, err := o.Ack(t.Context(), "", 10); err == nil {
		t.Error("ack of the empty stream: got nil, want an error")
	}
}

func TestSeqNeverReusedAfterAllAckedAndReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "outbox.db")
	o, err := Open(path, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	id := o.ID()
	var last uint64
	for i := range 5 {
		last = mustAppend(t, o, "s", "k", fmt.Sprint(i))
	}
	if _, err := o.Ack(t.Context(), "s", last); err != nil {
		t.Fatal(err)
	}
	if n, b := o.Depth(); n != 0 || b != 0 {
		t.Fatalf("depth after acking all: got (%d, %d), want (0, 0)", n, b)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}

	o = openAt(t, path, Options{})
	if o.ID() != id {
		t.Errorf("ID after reopen: got %q, want %q", o.ID(), id)
	}
	seq := mustAppend(t, o, "s", "k", "after reopen")
	if seq != last+1 {
		t.Errorf("first seq after reopen: got %d, want %d", seq, last+1)
	}
	// Every earlier entry of the stream was acknowledged, so none is
	// pending before it.
	if got := all(t, o, "s"); len(got) != 1 || got[0].Prev != 0 {
		t.Errorf("pending after reopen: got %+v, want one entry with Prev 0", got)
	}
}

func TestIDsDiffer(t *testing.T) {
	t.Parallel()
	a, b := openTemp(t, Options{}), openTemp(t, Options{})
	if a.ID() == b.ID() || len(a.ID()) != 32 {
		t.Errorf("IDs %q and %q, want two different 32-hex-digit IDs", a.ID(), b.ID())
	}
}

func TestOpenRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    Options
		path    func(t *testing.T) string // nil: a new file in a temporary directory
		prepare func(t *testing.T, path string)
		want    string
	}{
		{name: "negative MaxEntries", opts: Options{MaxEntries: -1}, want: "Options.MaxEntries is -1"},
		{name: "negative MaxBytes", opts: Options{MaxBytes: -1}, want: "Options.MaxBytes is -1"},
		{
			name: "another database",
			prepare: func(t *testing.T, path string) {
				execSQLite(t, path, "CREATE TABLE jobs (id TEXT)")
			},
			want: "not a kici outbox",
		},
		{
			name: "a newer schema",
			prepare: func(t *testing.T, path string) {
				o, err := Open(path, Options{Logger: testLogger(t)})
				if err != nil {
					t.Fatal(err)
				}
				if err := o.Close(); err != nil {
					t.Fatal(err)
				}
				execSQLite(t, path, "PRAGMA user_version = 99")
			},
			want: "schema version is 99",
		},
		{
			name: "a missing directory",
			path: func(t *testing.T) string { return filepath.Join(t.TempDir(), "missing", "outbox.db") },
			want: "no such file or directory",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "outbox.db")
			if tt.path != nil {
				path = tt.path(t)
			}
			if tt.prepare != nil {
				tt.prepare(t, path)
			}
			tt.opts.Logger = testLogger(t)
			o, err := Open(path, tt.opts)
			if err == nil {
				o.Close()
				t.Fatalf("open: got nil error, want one containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("open: got %q, want it to contain %q and the path", err, tt.want)
			}
		})
	}
}

// execSQLite runs one statement on the SQLite file at path, bypassing the
// outbox.
func execSQLite(t *testing.T, path, stmt string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), stmt); err != nil {
		t.Fatal(err)
	}
}

func TestOpenSetsDurablePragmas(t *testing.T) {
	t.Parallel()
	o := openTemp(t, Options{})
	for _, p := range []struct {
		pragma string
		want   int64
	}{
		{"synchronous", 2}, // FULL
		{"auto_vacuum", 2}, // INCREMENTAL
		{"application_id", applicationID},
		{"user_version", schemaVersion},
	} {
		var got int64
		if err := o.write.QueryRowContext(t.Context(), "PRAGMA "+p.pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != p.want {
			t.Errorf("PRAGMA %s: got %d, want %d", p.pragma, got, p.want)
		}
	}
	var mode string
	if err := o.write.QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("PRAGMA journal_mode: got %q (%v), want wal", mode, err)
	}
}
