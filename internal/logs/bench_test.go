package logs_test

import (
	"testing"

	"github.com/kici-dev/kici/internal/logs"
)

// BenchmarkAppend stores 50-line chunks (the agent's batch size) of
// typical build output, fsync included.
func BenchmarkAppend(b *testing.B) {
	st := newStore(b, "")
	lines := mkLines("ok  	github.com/kici-dev/kici/internal/workflow	0.412s	coverage: 87.1% of statements", 50)
	key := logs.StepKey{RunID: "run", JobID: "job", Step: 0}
	seq := uint64(0)
	for b.Loop() {
		seq++
		if _, err := st.Append(b.Context(), key, seq, lines); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(st.Stats().BytesStored / int64(seq))
}

// BenchmarkAppendJob stores the chunks of one small job, each iteration a
// new job of a new run (so every directory and file is new): a setup note,
// two chunks of step 0 and one of step 1. It reports the syncs per job
// when the store counts them (see CountSyncs).
func BenchmarkAppendJob(b *testing.B) {
	st := newStore(b, "")
	syncs := countSyncs(st)
	lines := mkLines("ok  	github.com/kici-dev/kici/internal/workflow	0.412s", 5)
	n := 0
	for b.Loop() {
		n++
		run, job := "run-"+itoa(n), "job-"+itoa(n)
		for i, step := range []int{logs.SetupStep, 0, 0, 1} {
			key := logs.StepKey{RunID: run, JobID: job, Step: step}
			if _, err := st.Append(b.Context(), key, uint64(i+1), lines); err != nil {
				b.Fatal(err)
			}
		}
	}
	if syncs != nil {
		b.ReportMetric(float64(syncs.files.Load())/float64(n), "filesyncs/job")
		b.ReportMetric(float64(syncs.dirs.Load())/float64(n), "dirsyncs/job")
	}
}
