package outbox

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// openBench opens a new outbox for a benchmark, closed when it ends.
func openBench(b *testing.B) *Outbox {
	b.Helper()
	o, err := Open(filepath.Join(b.TempDir(), "outbox.db"), Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := o.Close(); err != nil {
			b.Error(err)
		}
	})
	return o
}

// BenchmarkReplay10kLogChunks measures a replay after a reconnect: 10,000
// log chunks of 2 KiB wait in the outbox (appended, untimed, by 64
// goroutines so that they are group-committed), and the timed part reads
// them back with Pending in batches of 500, acknowledging each batch as a
// coordinator would.
func BenchmarkReplay10kLogChunks(b *testing.B) {
	const (
		chunks    = 10_000
		chunkSize = 2 << 10
		batch     = 500
		appenders = 64
		stream    = "coord-a"
	)
	o := openBench(b)
	payload := bytes.Repeat([]byte("0123456789abcdef"), chunkSize/16)
	fill := func() {
		var wg sync.WaitGroup
		var left atomic.Int64
		left.Store(chunks)
		for range appenders {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					if _, err := o.Append(b.Context(), stream, "log.chunk", payload); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	var read int
	for range b.N {
		b.StopTimer()
		fill()
		b.StartTimer()
		var after uint64
		for {
			entries, err := o.Pending(b.Context(), stream, after, batch)
			if err != nil {
				b.Fatal(err)
			}
			if len(entries) == 0 {
				break
			}
			after = entries[len(entries)-1].Seq
			if _, err := o.Ack(b.Context(), stream, after); err != nil {
				b.Fatal(err)
			}
			read += len(entries)
		}
	}
	if read != chunks*b.N {
		b.Fatalf("replayed %d entries, want %d", read, chunks*b.N)
	}
	secs := b.Elapsed().Seconds()
	b.ReportMetric(float64(read)/secs, "entries/s")
	b.ReportMetric(float64(read*chunkSize)/secs/1e6, "MB/s")
}

// BenchmarkAppendConcurrent measures Appends of 256-byte status messages
// from many goroutines at once (GOMAXPROCS × 16), which the writer groups
// into shared transactions.
func BenchmarkAppendConcurrent(b *testing.B) {
	o := openBench(b)
	payload := bytes.Repeat([]byte("s"), 256)
	var streams atomic.Int64
	before := o.commits.Load()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		stream := fmt.Sprintf("job:%d", streams.Add(1))
		for pb.Next() {
			if _, err := o.Append(b.Context(), stream, "job.progress", payload); err != nil {
				b.Error(err)
				return
			}
		}
	})
	commits := o.commits.Load() - before
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
	b.ReportMetric(float64(b.N)/float64(max(commits, 1)), "appends/commit")
}
