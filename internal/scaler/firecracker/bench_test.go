package firecracker

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/scaler"
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
	benchLife(b, testLabelSet(b, b.TempDir()), "booted")
}

// BenchmarkWarmRestoreRegisterDestroy is BenchmarkSpawnRegisterDestroy
// for a warm-start label set: each spawn restores the label set's
// snapshot (links its state and memory, copies its overlay, loads it with
// the VM's own TAP, fills MMDS) instead of configuring and booting. With
// the fakes the guest boots fresh either way, so the difference is the
// host side's; on real hardware a restore also skips the guest's boot.
//
//	go test ./internal/scaler/firecracker/ -run '^$' -bench WarmRestoreRegisterDestroy -benchtime 50x
func BenchmarkWarmRestoreRegisterDestroy(b *testing.B) {
	ls := testLabelSet(b, b.TempDir())
	ls.Labels = []string{"bench", "warm"}
	ls.Firecracker.WarmStart = true
	benchLife(b, ls, "restored from snapshot")
}

// benchLife measures spawn, registration and teardown of ls's VMs; each
// spawn's ready event must say how (booted or restored).
func benchLife(b *testing.B, ls scaler.LabelSet, how string) {
	w := testWorld(b)
	be := w.newBackend(b, b.TempDir())
	defer be.Close(context.Background())
	orch := w.orchestrator(b)
	// One spawn first, so that the overlay template exists: it is built
	// once per host and size, not per spawn (and, for a warm-start label
	// set, the snapshot, built in the background).
	warm := orch.Request(be, ls)
	if _, err := be.Spawn(context.Background(), warm); err != nil {
		b.Fatal(err)
	}
	orch.WaitRegistered(b, warm.AgentID)
	_ = be.Destroy(context.Background(), warm.AgentID)
	if ls.Firecracker.WarmStart {
		waitSnapshot(b, be, ls)
	}

	var spawn, registered, teardown, stop, remove []time.Duration
	be.timed = func(s, r time.Duration) { stop, remove = append(stop, s), append(remove, r) }
	b.ResetTimer()
	for range b.N {
		req := orch.Request(be, ls)
		var ready atomic.Value
		req.OnEvent = func(e scaler.Event) {
			if e.Type == scaler.EventReady {
				ready.Store(e.Detail)
			}
		}
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
		if d, _ := ready.Load().(string); !strings.Contains(d, how) {
			b.Fatalf("spawn %s: ready event %q, want one saying %q", req.AgentID, d, how)
		}
		spawn, registered, teardown = append(spawn, t1.Sub(t0)), append(registered, t2.Sub(t0)), append(teardown, t3.Sub(t2))
	}
	b.StopTimer()
	b.ReportMetric(median(spawn), "spawn-ms")
	b.ReportMetric(median(registered), "registered-ms")
	b.ReportMetric(median(teardown), "teardown-ms")
	b.ReportMetric(median(stop), "stop-ms")
	b.ReportMetric(median(remove), "remove-ms")
	b.ReportMetric(float64(slices.Max(registered).Microseconds())/1000, "max-registered-ms")
	b.ReportMetric(float64(slices.Max(teardown).Microseconds())/1000, "max-teardown-ms")
	slow := 0
	for _, d := range teardown {
		if d > time.Second {
			slow++
		}
	}
	b.ReportMetric(float64(slow), "teardowns>1s")
	if left := w.hostLeftovers(b); len(left) != 0 {
		b.Errorf("left on the host: %q", left)
	}
}

func median(d []time.Duration) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}
