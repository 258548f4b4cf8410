package store

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestLogChunks(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		run := createTestRun(t, db, testJob("build", []string{"linux"}), testJob("test", []string{"linux"}))
		a, b := run.Jobs[0].ID, run.Jobs[1].ID
		w := func(job string, step, attempt int, seq uint64, body string) LogChunkWrite {
			return LogChunkWrite{RunID: run.ID, JobID: job, Step: step, Attempt: attempt, Seq: seq, Body: []byte(body)}
		}
		got, err := db.AppendLogChunks(ctx, []LogChunkWrite{
			w(a, 0, 1, 1, "a0-1\n"), w(b, 0, 1, 1, "b0-1\n"), w(a, 1, 1, 2, "a1-2\n"), w(a, 0, 1, 3, "a0-3\n"),
			w(a, 0, 1, 2, "replay\n"), w(a, 0, 1, 4, ""),
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []LogChunkStored{{true, 0, 5}, {true, 0, 5}, {true, 0, 5}, {true, 5, 10}, {}, {true, 10, 10}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("stored %v, want %v", got, want)
		}
		// A replay in a later call is skipped too; a new attempt starts over
		// at seq 1 and goes on.
		got, err = db.AppendLogChunks(ctx, []LogChunkWrite{w(a, 0, 1, 4, "late\n"), w(a, 0, 2, 1, "again\n")})
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Stored || !got[1].Stored || got[1].Start != 10 || got[1].End != 16 {
			t.Fatalf("second call stored %v, want the replay skipped and the new attempt at [10, 16)", got)
		}
		chunks, err := db.ReadLogChunks(ctx, run.ID, a, 0, 5, 10)
		if err != nil {
			t.Fatal(err)
		}
		var body strings.Builder
		for _, c := range chunks {
			body.Write(c.Body)
		}
		if body.String() != "a0-3\nagain\n" || chunks[0].Start != 5 {
			t.Errorf("read from 5: %q starting at %d", body.String(), chunks[0].Start)
		}
		if n, err := db.LogSize(ctx, run.ID, a, 0); err != nil || n != 16 {
			t.Errorf("size: %d, %v; want 16", n, err)
		}
		if n, _ := db.LogSize(ctx, run.ID, a, 7); n != 0 {
			t.Errorf("size of a step without output: %d, want 0", n)
		}
		if _, err := db.AppendLogChunks(ctx, []LogChunkWrite{w(a, 0, 0, 1, "x\n")}); err == nil {
			t.Error("a chunk of attempt 0 was stored")
		}
		if err := db.DeleteRunLogs(ctx, run.ID); err != nil {
			t.Fatal(err)
		}
		if n, _ := db.LogSize(ctx, run.ID, a, 0); n != 0 {
			t.Errorf("size after delete: %d", n)
		}
	})
}

// TestLogChunksConcurrentAppendsOfOneJob: batches of one job's chunks
// stored at once, each chunk sent twice (an agent replaying to another
// orchestrator), leave every chunk stored once, in contiguous offsets.
func TestLogChunksConcurrentAppendsOfOneJob(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		run := createTestRun(t, db, testJob("build", []string{"linux"}))
		job := run.Jobs[0].ID
		const n = 40
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for seq := uint64(1); seq <= n; seq++ {
					_, err := db.AppendLogChunks(ctx, []LogChunkWrite{{RunID: run.ID, JobID: job, Attempt: 1, Seq: seq, Body: fmt.Appendf(nil, "line %02d\n", seq)}})
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		chunks, err := db.ReadLogChunks(ctx, run.ID, job, 0, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var body strings.Builder
		var off int64
		for _, c := range chunks {
			if c.Start != off {
				t.Fatalf("chunk at %d, want %d: offsets not contiguous", c.Start, off)
			}
			off = c.End
			body.Write(c.Body)
		}
		var want strings.Builder
		for seq := 1; seq <= n; seq++ {
			fmt.Fprintf(&want, "line %02d\n", seq)
		}
		if body.String() != want.String() {
			t.Errorf("log:\n%s\nwant each line once, in order", body.String())
		}
	})
}
