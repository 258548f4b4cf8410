package container

import (
	"context"
	"io"
	"maps"
	"net"
	"net/url"
	"strconv"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/scalertest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	testEngine(t)
	// The harness runs one orchestrator per scenario on 127.0.0.1, which
	// a container cannot reach (its loopback is its own). Each scenario's
	// backend is therefore wrapped so that its agents dial the
	// orchestrator through a forwarder on the bridge gateway, as an
	// operator's orchestratorUrl would point them at the host.
	var mu sync.Mutex
	instances := map[string]string{} // state dir → instance, so a restart keeps it
	scalertest.Run(t, scalertest.Harness{
		New: func(t *testing.T, stateDir string) scaler.Backend {
			mu.Lock()
			instance, ok := instances[stateDir]
			if !ok {
				instance = newInstance()
				instances[stateDir] = instance
			}
			mu.Unlock()
			cfg := testConfig(instance)
			cfg.Name = "conformance"
			b, err := New(t.Context(), testLogger(t), cfg)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return &reachableBackend{Backend: b, fwd: newForwarder(t)}
		},
		LabelSet: func(t *testing.T) scaler.LabelSet {
			return scaler.LabelSet{Labels: []string{"container", "linux"}, Image: testImage(t)}
		},
		Leftovers: func(t *testing.T, _ string, agentID string) []string {
			_, err := testEngine(t).ContainerInspect(context.WithoutCancel(t.Context()), containerName(agentID))
			if cerrdefs.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return []string{"cannot inspect container " + containerName(agentID) + ": " + err.Error()}
			}
			return []string{"container " + containerName(agentID)}
		},
	})
}

// reachableBackend is a Backend whose agents reach a loopback
// orchestrator through a forwarder on the engine's bridge gateway.
type reachableBackend struct {
	*Backend
	fwd *forwarder
}

func (r *reachableBackend) Spawn(ctx context.Context, req scaler.SpawnRequest) (scaler.Handle, error) {
	if u, err := url.Parse(req.Env["KICI_ORCHESTRATOR_URL"]); err == nil && u.Hostname() == "127.0.0.1" {
		u.Host = net.JoinHostPort(testHostAlias, strconv.Itoa(r.fwd.port(u.Host)))
		req.Env = maps.Clone(req.Env)
		req.Env["KICI_ORCHESTRATOR_URL"] = u.String()
	}
	return r.Backend.Spawn(ctx, req)
}

// forwarder forwards connections from a port on the bridge gateway to a
// loopback address, one listener per target.
type forwarder struct {
	t  *testing.T
	gw string

	mu    sync.Mutex
	ports map[string]int // target → gateway port
}

func newForwarder(t *testing.T) *forwarder {
	return &forwarder{t: t, gw: bridgeGateway(t), ports: map[string]int{}}
}

// port returns the gateway port that forwards to target, opening it on
// first use; it closes when the test ends.
func (f *forwarder) port(target string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.ports[target]; ok {
		return p
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(f.gw, "0"))
	if err != nil {
		f.t.Fatalf("listen on the bridge gateway %s: %v", f.gw, err)
	}
	var wg sync.WaitGroup
	var connsMu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		connsMu.Lock()
		conns = append(conns, c)
		connsMu.Unlock()
	}
	f.t.Cleanup(func() {
		_ = ln.Close()
		connsMu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		connsMu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			track(in)
			track(out)
			wg.Go(func() { pipe(out, in) })
			wg.Go(func() { pipe(in, out) })
		}
	})
	p := ln.Addr().(*net.TCPAddr).Port
	f.ports[target] = p
	return p
}

// pipe copies src to dst, then half-closes dst's write side.
func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		_ = dst.Close()
	}
}
