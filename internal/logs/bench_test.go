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
