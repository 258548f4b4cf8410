package fake_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/fake"
	"github.com/kici-dev/kici/internal/scaler/scalertest"
)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

func TestConformance(t *testing.T) {
	t.Parallel()
	host := fake.NewHost() // shared: a "restart" finds the first backend's agents
	scalertest.Run(t, scalertest.Harness{
		New: func(t *testing.T, dir string) scaler.Backend {
			return fake.New(testLogger(t), fake.Config{WorkDir: dir, Host: host})
		},
		LabelSet: func(*testing.T) scaler.LabelSet { return scaler.LabelSet{Labels: []string{"fake"}} },
		Leftovers: func(t *testing.T, dir, agentID string) []string {
			if _, err := os.Stat(filepath.Join(dir, agentID)); err == nil {
				return []string{"work dir " + agentID}
			}
			return nil
		},
	})
}

// events records a spawn's events.
type events struct {
	mu   sync.Mutex
	list []scaler.Event
	ch   chan struct{}
}

func (e *events) add(ev scaler.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, ev)
	if ev.Type == scaler.EventFailed {
		close(e.ch)
	}
}

func (e *events) types() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.list {
		out = append(out, ev.Type)
	}
	return out
}

func TestSteering(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		// cancel ends Spawn's ctx at its first event.
		cancel            bool
		wantErr           error // errors.Is, or nil
		wantDeterministic bool
		wantEvents        []string
		wantDetail        string // of EventFailed
	}{
		{
			name: "refused", env: map[string]string{fake.EnvSpawnFail: "refused"}, wantDeterministic: true,
			wantEvents: []string{scaler.EventProvisioning, scaler.EventFailed}, wantDetail: "fake spawn refused",
		},
		{
			name: "error", env: map[string]string{fake.EnvSpawnFail: "error"}, wantErr: fake.ErrSpawn,
			wantEvents: []string{scaler.EventProvisioning},
		},
		{
			name: "bad fail value", env: map[string]string{fake.EnvSpawnFail: "maybe"}, wantDeterministic: true,
			wantEvents: []string{scaler.EventProvisioning, scaler.EventFailed}, wantDetail: `FAKE_SPAWN_FAIL="maybe"`,
		},
		{
			name: "bad delay", env: map[string]string{fake.EnvSpawnDelay: "soon"}, wantDeterministic: true,
			wantEvents: []string{scaler.EventProvisioning, scaler.EventFailed}, wantDetail: `FAKE_SPAWN_DELAY="soon"`,
		},
		{
			name: "delay cut by a cancelled ctx", env: map[string]string{fake.EnvSpawnDelay: "1h"}, cancel: true,
			wantErr: context.Canceled, wantEvents: []string{scaler.EventProvisioning},
		},
		{
			name: "exit before register", env: map[string]string{fake.EnvExitBeforeRegister: "1"},
			wantEvents: []string{scaler.EventProvisioning, scaler.EventReady, scaler.EventConnecting, scaler.EventFailed},
			wantDetail: "agent exited with code 1 before it registered\n--- last output ---\n" + fake.ExitOutput,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			b := fake.New(testLogger(t), fake.Config{WorkDir: dir})
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			ev := &events{ch: make(chan struct{})}
			req := scaler.SpawnRequest{
				AgentID: "scaler-fake-1", Scaler: "fake",
				LabelSet: scaler.LabelSet{Labels: []string{"fake"}, Env: tc.env},
				Env:      map[string]string{"KICI_ORCHESTRATOR_URL": "ws://127.0.0.1:1/ws", "KICI_AGENT_ID": "scaler-fake-1"},
				OnEvent: func(e scaler.Event) {
					ev.add(e)
					if tc.cancel {
						cancel()
					}
				},
			}
			_, err := b.Spawn(ctx, req)
			switch {
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Errorf("Spawn: got %v, want %v", err, tc.wantErr)
			case tc.wantDeterministic && !scaler.IsDeterministic(err):
				t.Errorf("Spawn: got %v, want a DeterministicSpawnError", err)
			case tc.wantErr == nil && !tc.wantDeterministic && err != nil:
				t.Errorf("Spawn: got %v, want nil", err)
			case err != nil && scaler.IsDeterministic(err) != tc.wantDeterministic:
				t.Errorf("Spawn: got %v, IsDeterministic %t; want %t", err, scaler.IsDeterministic(err), tc.wantDeterministic)
			}
			if tc.wantDetail != "" {
				select {
				case <-ev.ch:
				case <-time.After(10 * time.Second):
					t.Fatalf("no %s; got events %v", scaler.EventFailed, ev.types())
				}
				ev.mu.Lock()
				detail := ev.list[len(ev.list)-1].Detail
				ev.mu.Unlock()
				if !strings.Contains(detail, tc.wantDetail) {
					t.Errorf("%s detail: got %q, want it to hold %q", scaler.EventFailed, detail, tc.wantDetail)
				}
			}
			if diff := cmp.Diff(tc.wantEvents, ev.types()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if err := b.Destroy(t.Context(), req.AgentID); err != nil {
				t.Errorf("Destroy: got %v, want nil", err)
			}
			if _, err := os.Stat(filepath.Join(dir, req.AgentID)); !os.IsNotExist(err) {
				t.Errorf("work dir: got stat error %v, want it absent", err)
			}
		})
	}
}
