package firecracker

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkSpawnRegisterDestroy measures one microVM's life with the named
// fakes, one after another: Spawn (lease, TAP, rules, jail, overlay copy,
// jailer, API configuration, InstanceStart), then until the guest's
// kici-agent registered, then Destroy (stop the guest, remove everything).
// It reports the medians as spawn-ms, registered-ms (from the spawn's
// start) and teardown-ms, the latter split into stop-ms (the guest asked
// to stop, its VMM gone) and remove-ms (the host side: VM dir, TAP, rules,
// lease). Run it as root:
//
//	go test ./internal/scaler/firecracker/ -run '^$' -bench SpawnRegisterDestroy -benchtime 50x
func BenchmarkSpawnRegisterDestroy(b *testing.B) {
	w := testWorld(b)
	be := w.newBackend(b, b.TempDir())
	defer be.Close(context.Background())
	ls := testLabelSet(b, b.TempDir())
	orch := w.orchestrator(b)
	// One spawn first, so that the overlay template exists: it is built
	// once per host and size, not per spawn.
	warm := orch.Request(be, ls)
	if _, err := be.Spawn(context.Background(), warm); err != nil {
		b.Fatal(err)
	}
	orch.WaitRegistered(b, warm.AgentID)
	_ = be.Destroy(context.Background(), warm.AgentID)

	var spawn, registered, teardown, stop, remove []time.Duration
	be.timed = func(s, r time.Duration) { stop, remove = append(stop, s), append(remove, r) }
	b.ResetTimer()
	for range b.N {
		req := orch.Request(be, ls)
		t0 := time.Now()
		if _, err := be.Spawn(context.Background(), req); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		orch.WaitRegistered(b, req.AgentID)
		be.MarkRegistered(req.AgentID)
		t2 := time.Now()
		if err := be.Destroy(context.Background(), req.AgentID); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		spawn, registered, teardown = append(spawn, t1.Sub(t0)), append(registered, t2.Sub(t0)), append(teardown, t3.Sub(t2))
	}
	b.StopTimer()
	b.ReportMetric(median(spawn), "spawn-ms")
	b.ReportMetric(median(registered), "registered-ms")
	b.ReportMetric(median(teardown), "teardown-ms")
	b.ReportMetric(median(stop), "stop-ms")
	b.ReportMetric(median(remove), "remove-ms")
	if left := w.hostLeftovers(b); len(left) != 0 {
		b.Errorf("left on the host: %q", left)
	}
}

func median(d []time.Duration) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}
