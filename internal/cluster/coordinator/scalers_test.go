package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/cluster/coordinator"
	"github.com/kici-dev/kici/internal/cluster/outbox"
	"github.com/kici-dev/kici/internal/cluster/peer"
	"github.com/kici-dev/kici/internal/cluster/pki"
	"github.com/kici-dev/kici/internal/cluster/worker"
	"github.com/kici-dev/kici/internal/scaler"
)

// waitTimeout bounds every wait on a condition in these tests. The
// worker's outbox relay retries once a second, so a wait that spans a
// retry needs a few of those, with room for the race detector.
const waitTimeout = 10 * time.Second

// waitFor polls cond until it holds, failing the test with what() after
// waitTimeout.
func waitFor(t *testing.T, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", waitTimeout, what())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// writeCredential makes a credential of ca for nodeID and keeps it in a
// file, as a worker that joined has one.
func writeCredential(t *testing.T, ca *pki.CA, nodeID string) string {
	t.Helper()
	key, err := pki.NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := pki.NewCSR(key, nodeID)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.SignClient(csr, nodeID, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cred, err := pki.NewCredential(key, certPEM, ca.Certificate())
	if err != nil {
		t.Fatal(err)
	}
	data, err := pki.MarshalCredential(cred)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "peer-credential")
	if err := pki.SaveCredentialFile(file, data); err != nil {
		t.Fatal(err)
	}
	return file
}

func newTestCA(t *testing.T) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA("test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// startHub serves a hub of ca taking scaler reports in rep (nil: none)
// and returns it with its base URL. It is closed when the test ends,
// after the workers started later (cleanups run last in, first out).
func startHub(t *testing.T, ca *pki.CA, rep coordinator.ScalerReports) (*coordinator.Hub, string) {
	t.Helper()
	cfg := coordinator.Config{SelfID: "coord-1", CA: fixedCA{ca}, Workers: &touches{seen: map[string]time.Duration{}}}
	if rep != nil {
		cfg.Scalers = rep
	}
	hub := coordinator.New(cfg)
	srv := httptest.NewServer(hub)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hub.Close(ctx)
		srv.Close()
	})
	return hub, srv.URL
}

// newWorker builds a worker of the credential in file for url, with s
// and ob as its scalers when s is not nil. It beats every MaxHeartbeat:
// its first heartbeat goes out as soon as it connects, and a worker drops
// a channel on which it hears nothing for three intervals (see
// TestWorkerChannelSurvivesSilentCoordinator), which must not happen
// within a test.
func newWorker(t *testing.T, url, file string, s worker.Scalers, ob *outbox.Outbox) *worker.Worker {
	t.Helper()
	w, err := worker.New(worker.Config{CoordinatorURLs: []string{url}, CredentialFile: file, Heartbeat: worker.MaxHeartbeat})
	if err != nil {
		t.Fatal(err)
	}
	if s != nil {
		w.SetScalers(s, ob)
	}
	return w
}

// run runs w until the returned stop is called (or the test ends).
func run(t *testing.T, w *worker.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("worker Run: %v", err)
				}
			case <-time.After(waitTimeout):
				t.Errorf("worker Run did not return %s after its context ended", waitTimeout)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// connect runs w and waits until hub has its channel.
func connect(t *testing.T, hub *coordinator.Hub, w *worker.Worker, nodeID string) (stop func()) {
	t.Helper()
	stop = run(t, w)
	waitFor(t, func() string {
		return fmt.Sprintf("hub lists %v connected, want %s among them", hub.Connected(), nodeID)
	}, func() bool { return slices.Contains(hub.Connected(), nodeID) && w.Ready() })
	return stop
}

func openOutbox(t *testing.T, path string) *outbox.Outbox {
	t.Helper()
	ob, err := outbox.Open(path, outbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ob.Close() })
	return ob
}

func depth(ob *outbox.Outbox) int {
	n, _ := ob.Depth()
	return n
}

// fakeScalers is a fake of worker.Scalers (a *scaler.Manager) that
// records what the worker asks of it.
type fakeScalers struct {
	offers   []scaler.Offer
	agentIDs []string
	result   scaler.ScaleResult
	orphans  []scaler.Orphan
	// stopBlock, when set, holds every StopOrphans until it is closed.
	stopBlock chan struct{}

	mu           sync.Mutex
	scales       []scaler.ScaleRequest
	trackers     []trackersSeen
	stops        [][]string
	busy         []string
	disconnected []string
}

type trackersSeen struct {
	registered, boundJob map[string]bool
	err                  error
}

func (f *fakeScalers) RequestScale(_ context.Context, req scaler.ScaleRequest) scaler.ScaleResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scales = append(f.scales, req)
	return f.result
}

func (f *fakeScalers) OnAgentRegistered(agentID, token string) (scaler.Registration, error) {
	if !slices.Contains(f.agentIDs, agentID) || token != "token-of-"+agentID {
		return scaler.Registration{}, fmt.Errorf("%w: %s", scaler.ErrUnknownScalerAgent, agentID)
	}
	return scaler.Registration{Managed: true, Labels: []string{"linux"}, BoundJobID: "job-of-" + agentID, Scaler: "s1", Backend: "container"}, nil
}

func (f *fakeScalers) OnAgentDisconnected(agentID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disconnected = append(f.disconnected, agentID)
}

func (f *fakeScalers) OnAgentBusy(agentID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.busy = append(f.busy, agentID)
}

// Orphans reads the trackers as a worker's scaler.Manager does, through
// its Config.Trackers, which is worker.Trackers there.
func (f *fakeScalers) Orphans(ctx context.Context) ([]scaler.Orphan, error) {
	registered, boundJob, err := worker.Trackers(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.trackers = append(f.trackers, trackersSeen{registered, boundJob, err})
	return f.orphans, nil
}

func (f *fakeScalers) StopOrphans(ctx context.Context, ids []string) ([]scaler.StopOutcome, error) {
	f.mu.Lock()
	f.stops = append(f.stops, ids)
	f.mu.Unlock()
	if f.stopBlock != nil {
		select {
		case <-f.stopBlock:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	out := make([]scaler.StopOutcome, 0, len(ids))
	for _, id := range ids {
		out = append(out, scaler.StopOutcome{ID: id, Outcome: scaler.OutcomeStopped})
	}
	return out, nil
}

func (f *fakeScalers) Offers() []scaler.Offer { return f.offers }
func (f *fakeScalers) AgentIDs() []string     { return f.agentIDs }

// delivery is one ApplyOutbox call and what Dedup said of it.
type delivery struct {
	nodeID  string
	seq     uint64
	verdict outbox.Verdict
}

// fakeReports is a fake of coordinator.ScalerReports that keeps, as the
// coordinators' database does, the applied sequence number of every
// (outbox id, stream) and follows outbox.Dedup.
type fakeReports struct {
	// hold, when set, runs before each entry is looked at (outside the
	// lock), so that a test can hold a delivery.
	hold func(e worker.OutboxEntry)

	mu         sync.Mutex
	state      map[[2]string]uint64
	applied    []worker.OutboxEntry // in the order applied
	deliveries []delivery
	// loseAck: entries whose first application fails after the apply, as
	// when the commit went through and the answer was lost.
	loseAck  map[uint64]bool
	retire   worker.RetireReply
	retired  []string
	capacity int
}

func newFakeReports() *fakeReports {
	return &fakeReports{state: map[[2]string]uint64{}, loseAck: map[uint64]bool{}}
}

func (f *fakeReports) ApplyOutbox(_ context.Context, nodeID string, e worker.OutboxEntry) (worker.OutboxAck, error) {
	if f.hold != nil {
		f.hold(e)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := [2]string{e.OutboxID, e.Stream}
	d := outbox.Dedup{Applied: f.state[key]}
	v := d.Check(e.Seq, e.Prev)
	f.deliveries = append(f.deliveries, delivery{nodeID: nodeID, seq: e.Seq, verdict: v})
	if v != outbox.Apply {
		return worker.OutboxAck{Applied: d.Applied, Verdict: v.String()}, nil
	}
	f.state[key] = e.Seq
	f.applied = append(f.applied, e)
	if f.loseAck[e.Seq] {
		delete(f.loseAck, e.Seq)
		return worker.OutboxAck{Applied: e.Seq, Verdict: v.String()}, errors.New("database connection lost after the commit")
	}
	return worker.OutboxAck{Applied: e.Seq, Verdict: v.String()}, nil
}

func (f *fakeReports) Retire(agentID string) worker.RetireReply {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retired = append(f.retired, agentID)
	return f.retire
}

func (f *fakeReports) CapacityFreed() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.capacity++
}

func (f *fakeReports) appliedEntries() []worker.OutboxEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.applied)
}

func (f *fakeReports) deliveriesOf(seq uint64) []outbox.Verdict {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []outbox.Verdict
	for _, d := range f.deliveries {
		if d.seq == seq {
			out = append(out, d.verdict)
		}
	}
	return out
}

// report is a scaler report as the sink was given it.
type report struct {
	kind    string
	event   *worker.ScalerEventBody
	failed  *worker.ProvisioningFailedBody
	spawned *worker.SpawnFailedBody
}

// decodeReport decodes an applied entry's payload by its kind.
func decodeReport(t *testing.T, e worker.OutboxEntry) report {
	t.Helper()
	r := report{kind: e.Kind}
	var err error
	switch e.Kind {
	case worker.KindScalerEvent:
		r.event = new(worker.ScalerEventBody)
		err = json.Unmarshal(e.Payload, r.event)
	case worker.KindProvisioningFailed:
		r.failed = new(worker.ProvisioningFailedBody)
		err = json.Unmarshal(e.Payload, r.failed)
	case worker.KindSpawnFailed:
		r.spawned = new(worker.SpawnFailedBody)
		err = json.Unmarshal(e.Payload, r.spawned)
	default:
		t.Fatalf("entry %d of unknown kind %q", e.Seq, e.Kind)
	}
	if err != nil {
		t.Fatalf("entry %d (%s): payload %s: %v", e.Seq, e.Kind, e.Payload, err)
	}
	return r
}

func sameReport(a, b report) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case worker.KindScalerEvent:
		x, y := a.event, b.event
		return x.RunID == y.RunID && x.JobID == y.JobID && x.Event.AgentID == y.Event.AgentID && x.Event.Type == y.Event.Type &&
			x.Event.Detail == y.Event.Detail && x.Event.Time.Equal(y.Event.Time)
	case worker.KindProvisioningFailed:
		return *a.failed == *b.failed
	case worker.KindSpawnFailed:
		return *a.spawned == *b.spawned
	}
	return false
}

func (r report) String() string {
	switch {
	case r.event != nil:
		return fmt.Sprintf("%s%+v", r.kind, *r.event)
	case r.failed != nil:
		return fmt.Sprintf("%s%+v", r.kind, *r.failed)
	case r.spawned != nil:
		return fmt.Sprintf("%s%+v", r.kind, *r.spawned)
	}
	return r.kind
}

// checkApplied checks that rep applied exactly want, in that order, each
// once, from the outbox obID, with strictly increasing sequence numbers.
func checkApplied(t *testing.T, rep *fakeReports, obID string, want []report) {
	t.Helper()
	got := rep.appliedEntries()
	if len(got) != len(want) {
		var kinds []string
		for _, e := range got {
			kinds = append(kinds, fmt.Sprintf("%d:%s", e.Seq, e.Kind))
		}
		t.Fatalf("applied %d entries %v, want %d", len(got), kinds, len(want))
	}
	var last uint64
	for i, e := range got {
		if e.OutboxID != obID || e.Stream == "" {
			t.Errorf("entry %d: outbox %q stream %q; want outbox %q and a stream", e.Seq, e.OutboxID, e.Stream, obID)
		}
		if e.Seq <= last {
			t.Errorf("entry %d applied after entry %d: out of order or twice", e.Seq, last)
		}
		last = e.Seq
		if r := decodeReport(t, e); !sameReport(r, want[i]) {
			t.Errorf("applied entry #%d (seq %d) is %v, want %v", i, e.Seq, r, want[i])
		}
	}
}

// TestOutboxReplayAfterRestart: scaler reports made while no coordinator
// is reachable stay in the worker's outbox across a restart of the
// worker, and once it connects each reaches the coordinator's reports
// exactly once, in the order made, its payload intact; an entry made
// while the replay is under way comes after it; the outbox ends empty.
func TestOutboxReplayAfterRestart(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	file := writeCredential(t, ca, "worker-replay")
	path := filepath.Join(t.TempDir(), "outbox.db")

	// A coordinator address where nothing listens.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + l.Addr().String()
	_ = l.Close()

	at := time.Date(2025, 3, 4, 5, 6, 7, 8000, time.UTC)
	want := []report{
		{kind: worker.KindScalerEvent, event: &worker.ScalerEventBody{RunID: "run-1", JobID: "job-1",
			Event: scaler.Event{AgentID: "scaler-a1", Type: "spawning", Detail: "container s1 starting", Time: at}}},
		{kind: worker.KindProvisioningFailed, failed: &worker.ProvisioningFailedBody{JobID: "job-2", Detail: "image pull: not found"}},
		{kind: worker.KindSpawnFailed, spawned: &worker.SpawnFailedBody{Backend: "container", Bound: true}},
		{kind: worker.KindScalerEvent, event: &worker.ScalerEventBody{RunID: "run-1", JobID: "job-1",
			Event: scaler.Event{AgentID: "scaler-a1", Type: "spawned", Time: at.Add(time.Second)}}},
	}

	ob1 := openOutbox(t, path)
	obID := ob1.ID()
	w1 := newWorker(t, deadURL, file, &fakeScalers{}, ob1)
	stop1 := run(t, w1)
	sink := w1.Sink()
	sink.ScalerEvent(want[0].event.RunID, want[0].event.JobID, want[0].event.Event)
	sink.ScalerEvent("", "", scaler.Event{AgentID: "scaler-warm", Type: "spawned"}) // a warm agent's: no job to tell
	sink.ProvisioningFailed(want[1].failed.JobID, want[1].failed.Detail)
	sink.SpawnFailed(want[2].spawned.Backend, want[2].spawned.Bound)
	sink.ScalerEvent(want[3].event.RunID, want[3].event.JobID, want[3].event.Event)
	if n := depth(ob1); n != len(want) {
		t.Fatalf("outbox holds %d entries, want %d (the warm agent's event left out)", n, len(want))
	}
	if w1.Ready() {
		t.Fatal("worker #1 is ready with no coordinator listening")
	}
	// The process dies: nothing was acknowledged.
	stop1()
	if err := ob1.Close(); err != nil {
		t.Fatal(err)
	}

	rep := newFakeReports()
	// The first delivery is held until a live report is in the outbox.
	firstSeen, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	rep.hold = func(worker.OutboxEntry) {
		once.Do(func() {
			close(firstSeen)
			select {
			case <-release:
			case <-time.After(waitTimeout):
			}
		})
	}
	hub, url := startHub(t, ca, rep)
	ob2 := openOutbox(t, path)
	if ob2.ID() != obID {
		t.Fatalf("reopened outbox has id %q, want %q", ob2.ID(), obID)
	}
	if n := depth(ob2); n != len(want) {
		t.Fatalf("reopened outbox holds %d entries, want %d", n, len(want))
	}
	w2 := newWorker(t, url, file, &fakeScalers{}, ob2)
	connect(t, hub, w2, "worker-replay")
	select {
	case <-firstSeen:
	case <-time.After(waitTimeout):
		t.Fatal("no outbox entry reached the coordinator")
	}
	// While the first delivery is held nothing is acknowledged: the
	// heartbeat (the first, sent on connecting) says what the outbox
	// holds.
	outboxDepth := func() int { return hub.Heartbeats()["worker-replay"].OutboxDepth }
	waitFor(t, func() string {
		return fmt.Sprintf("heartbeat reports an outbox of %d, want %d", outboxDepth(), len(want))
	}, func() bool { return outboxDepth() == len(want) })
	live := report{kind: worker.KindProvisioningFailed, failed: &worker.ProvisioningFailedBody{JobID: "job-3", Detail: "made during the replay"}}
	w2.Sink().ProvisioningFailed(live.failed.JobID, live.failed.Detail)
	close(release)
	want = append(want, live)

	waitFor(t, func() string {
		return fmt.Sprintf("%d entries applied, outbox holds %d; want %d applied and none held", len(rep.appliedEntries()), depth(ob2), len(want))
	}, func() bool { return len(rep.appliedEntries()) == len(want) && depth(ob2) == 0 })
	checkApplied(t, rep, obID, want)
}

// TestOutboxLostAckIsResentNotReapplied: a coordinator that applied an
// entry but could not say so (its answer is an error) is sent the entry
// again; the second time Dedup finds it applied and acknowledges it, so
// the entry takes effect once, the entries after it follow, and the
// outbox empties.
func TestOutboxLostAckIsResentNotReapplied(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	file := writeCredential(t, ca, "worker-lostack")
	ob := openOutbox(t, filepath.Join(t.TempDir(), "outbox.db"))
	rep := newFakeReports()
	hub, url := startHub(t, ca, rep)
	w := newWorker(t, url, file, &fakeScalers{}, ob)

	want := []report{
		{kind: worker.KindProvisioningFailed, failed: &worker.ProvisioningFailedBody{JobID: "job-1", Detail: "no capacity"}},
		{kind: worker.KindSpawnFailed, spawned: &worker.SpawnFailedBody{Backend: "baremetal"}},
	}
	w.Sink().ProvisioningFailed(want[0].failed.JobID, want[0].failed.Detail)
	w.Sink().SpawnFailed(want[1].spawned.Backend, want[1].spawned.Bound)
	pending, err := ob.Pending(t.Context(), "", 0, 10)
	if err != nil || len(pending) != 2 {
		t.Fatalf("pending: %d entries, %v; want 2", len(pending), err)
	}
	first := pending[0].Seq
	rep.mu.Lock()
	rep.loseAck[first] = true
	rep.mu.Unlock()

	connect(t, hub, w, "worker-lostack")
	waitFor(t, func() string {
		return fmt.Sprintf("%d entries applied, outbox holds %d, deliveries of entry %d: %v; want 2 applied, none held",
			len(rep.appliedEntries()), depth(ob), first, rep.deliveriesOf(first))
	}, func() bool { return len(rep.appliedEntries()) == 2 && depth(ob) == 0 })
	checkApplied(t, rep, ob.ID(), want)
	if got := rep.deliveriesOf(first); len(got) < 2 || got[0] != outbox.Apply || slices.Contains(got[1:], outbox.Apply) {
		t.Errorf("deliveries of entry %d: %v; want it applied, then resent and found a duplicate", first, got)
	}
}

// TestHeartbeatInventory: a worker's heartbeat carries its scalers'
// offers and agents to the hub, which finds a scaler agent's worker by
// them, cuts what it keeps to the advertised bounds, and forgets a worker
// that disconnected.
func TestHeartbeatInventory(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	hub, url := startHub(t, ca, nil)

	offers := []scaler.Offer{
		{Scaler: "s1", Type: "container", LabelSets: [][]string{{"linux", "x64"}, {"docker", "linux"}}, Mandatory: []string{"docker"}, Free: 3},
		{Scaler: "s2", Type: "baremetal", LabelSets: [][]string{{"gpu"}}, Mandatory: []string{"gpu"}, Free: 1},
	}
	small := &fakeScalers{offers: offers, agentIDs: []string{"scaler-a", "scaler-b"}}
	ws := newWorker(t, url, writeCredential(t, ca, "worker-small"), small, nil)
	stopSmall := connect(t, hub, ws, "worker-small")

	// One that offers past every bound.
	var many []scaler.Offer
	for i := range worker.MaxOffers + 10 {
		many = append(many, scaler.Offer{Scaler: fmt.Sprintf("s%03d", i), Type: "container", LabelSets: [][]string{{"linux"}}, Mandatory: []string{"linux"}, Free: i})
	}
	var sets [][]string
	for i := range worker.MaxOfferLabelSets + 3 {
		sets = append(sets, []string{fmt.Sprintf("set%d", i)})
	}
	var labels []string
	for i := range worker.MaxOfferLabels + 3 {
		labels = append(labels, fmt.Sprintf("l%03d", i))
	}
	sets[0] = labels
	many[0].LabelSets, many[0].Mandatory = sets, labels
	var agents []string
	for i := range worker.MaxScalerAgents + 7 {
		agents = append(agents, fmt.Sprintf("scaler-big-%05d", i))
	}
	wb := newWorker(t, url, writeCredential(t, ca, "worker-big"), &fakeScalers{offers: many, agentIDs: agents}, nil)
	connect(t, hub, wb, "worker-big")

	waitFor(t, func() string { return fmt.Sprintf("heartbeats: %d", len(hub.Heartbeats())) }, func() bool {
		beats := hub.Heartbeats()
		return len(beats["worker-small"].Scalers) > 0 && len(beats["worker-big"].Scalers) > 0
	})
	beats := hub.Heartbeats()
	hb := beats["worker-small"]
	if hb.NodeID != "worker-small" || !reflect.DeepEqual(hb.Scalers, offers) || !slices.Equal(hb.ScalerAgents, small.agentIDs) {
		t.Errorf("worker-small's heartbeat: %+v; want offers %+v and agents %v", hb, offers, small.agentIDs)
	}
	for _, id := range small.agentIDs {
		if owner, ok := hub.ScalerAgentOwner(id); !ok || owner != "worker-small" {
			t.Errorf("ScalerAgentOwner(%s) = %q, %t; want worker-small", id, owner, ok)
		}
	}
	if owner, ok := hub.ScalerAgentOwner("scaler-nobody"); ok {
		t.Errorf("ScalerAgentOwner of an agent no worker runs = %q", owner)
	}

	big := beats["worker-big"]
	if len(big.Scalers) != worker.MaxOffers || !reflect.DeepEqual(big.Scalers[1:], many[1:worker.MaxOffers]) {
		t.Errorf("worker-big's heartbeat keeps %d offers; want the first %d", len(big.Scalers), worker.MaxOffers)
	}
	if len(big.Scalers) > 0 {
		o := big.Scalers[0]
		if len(o.LabelSets) != worker.MaxOfferLabelSets || !slices.Equal(o.LabelSets[0], labels[:worker.MaxOfferLabels]) ||
			!slices.Equal(o.Mandatory, labels[:worker.MaxOfferLabels]) || !slices.Equal(o.LabelSets[1], sets[1]) {
			t.Errorf("oversized offer kept with %d label sets, %d labels in its first, %d mandatory; want %d, %d, %d",
				len(o.LabelSets), len(o.LabelSets[0]), len(o.Mandatory), worker.MaxOfferLabelSets, worker.MaxOfferLabels, worker.MaxOfferLabels)
		}
	}
	if !slices.Equal(big.ScalerAgents, agents[:worker.MaxScalerAgents]) {
		t.Errorf("worker-big's heartbeat keeps %d agents; want the first %d", len(big.ScalerAgents), worker.MaxScalerAgents)
	}
	if owner, ok := hub.ScalerAgentOwner(agents[0]); !ok || owner != "worker-big" {
		t.Errorf("ScalerAgentOwner(%s) = %q, %t; want worker-big", agents[0], owner, ok)
	}
	if owner, ok := hub.ScalerAgentOwner(agents[len(agents)-1]); ok {
		t.Errorf("ScalerAgentOwner of an agent past the bound = %q; want none", owner)
	}

	// A worker that disconnects is forgotten.
	stopSmall()
	waitFor(t, func() string {
		return fmt.Sprintf("hub lists %v connected after worker-small stopped", hub.Connected())
	}, func() bool { return !slices.Contains(hub.Connected(), "worker-small") })
	if _, ok := hub.Heartbeats()["worker-small"]; ok {
		t.Error("the hub keeps the heartbeat of a worker that disconnected")
	}
	if owner, ok := hub.ScalerAgentOwner("scaler-a"); ok {
		t.Errorf("ScalerAgentOwner(scaler-a) = %q after its worker disconnected", owner)
	}
}

// TestScalerRequests: a coordinator's scaler requests reach the worker's
// manager and its answers come back; a worker without scalers refuses a
// spawn but answers an orphan listing with an empty list.
func TestScalerRequests(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	hub, url := startHub(t, ca, nil)
	fs := &fakeScalers{
		agentIDs: []string{"scaler-a"},
		result:   scaler.ScaleResult{Action: scaler.ActionSpawning, Scaler: "s1", Backend: "container", AgentID: "scaler-a", RetryAfter: 3 * time.Second},
		orphans:  []scaler.Orphan{{ID: "scaler-z", Scaler: "s1", Backend: "container", Ref: "c0ffee", Status: scaler.ComputeOrphaned, TrackedBy: []string{}}},
	}
	connect(t, hub, newWorker(t, url, writeCredential(t, ca, "worker-s"), fs, nil), "worker-s")
	connect(t, hub, newWorker(t, url, writeCredential(t, ca, "worker-plain"), nil, nil), "worker-plain")
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()

	t.Run("spawn", func(t *testing.T) {
		req := worker.SpawnRequest{JobID: "job-7", RunID: "run-7", Labels: []string{"linux", "docker"}, Exclude: []string{"s2"}}
		f, err := hub.Request(ctx, "worker-s", worker.TypeScalerSpawn, req)
		if err != nil {
			t.Fatal(err)
		}
		var res scaler.ScaleResult
		if err := f.Decode(&res); err != nil {
			t.Fatal(err)
		}
		if res != fs.result {
			t.Errorf("spawn answered %+v, want the manager's %+v", res, fs.result)
		}
		fs.mu.Lock()
		got := slices.Clone(fs.scales)
		fs.mu.Unlock()
		want := scaler.ScaleRequest{JobID: req.JobID, RunID: req.RunID, Labels: req.Labels, Exclude: req.Exclude}
		if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
			t.Errorf("manager asked to scale %+v, want once %+v", got, want)
		}
		if _, err := hub.Request(ctx, "worker-s", worker.TypeScalerSpawn, worker.SpawnRequest{Labels: []string{"linux"}}); err == nil {
			t.Error("a spawn without a job id was served")
		}
	})

	t.Run("spawn on a worker without scalers", func(t *testing.T) {
		_, err := hub.Request(ctx, "worker-plain", worker.TypeScalerSpawn, worker.SpawnRequest{JobID: "job-8", Labels: []string{"linux"}})
		var re *peer.RemoteError
		if !errors.As(err, &re) {
			t.Errorf("spawn on a worker without scalers: %v; want the worker's refusal", err)
		}
	})

	t.Run("orphans on a worker without scalers", func(t *testing.T) {
		f, err := hub.Request(ctx, "worker-plain", worker.TypeScalerOrphans, worker.OrphansRequest{Op: "list", Registered: []string{"scaler-a"}})
		if err != nil {
			t.Fatalf("orphan listing on a worker without scalers: %v; want an empty list", err)
		}
		var r worker.OrphansReply
		if err := f.Decode(&r); err != nil {
			t.Fatal(err)
		}
		if len(r.Orphans) != 0 || len(r.Outcomes) != 0 {
			t.Errorf("orphan listing on a worker without scalers: %+v; want nothing", r)
		}
		f, err = hub.Request(ctx, "worker-plain", worker.TypeScalerOrphans, worker.OrphansRequest{Op: "stop", IDs: []string{"scaler-q"}})
		if err != nil {
			t.Fatal(err)
		}
		r = worker.OrphansReply{}
		if err := f.Decode(&r); err != nil {
			t.Fatal(err)
		}
		if len(r.Outcomes) != 1 || r.Outcomes[0].ID != "scaler-q" || r.Outcomes[0].Outcome != scaler.OutcomeNotFound {
			t.Errorf("orphan stop on a worker without scalers: %+v; want scaler-q not found", r)
		}
	})

	t.Run("orphans carry the coordinator's trackers", func(t *testing.T) {
		f, err := hub.Request(ctx, "worker-s", worker.TypeScalerOrphans,
			worker.OrphansRequest{Op: "list", Registered: []string{"scaler-a", "scaler-b"}, BoundJob: []string{"scaler-c"}})
		if err != nil {
			t.Fatal(err)
		}
		var r worker.OrphansReply
		if err := f.Decode(&r); err != nil {
			t.Fatal(err)
		}
		if len(r.Orphans) != 1 || r.Orphans[0].ID != "scaler-z" || r.Orphans[0].Status != scaler.ComputeOrphaned {
			t.Errorf("orphans: %+v; want the manager's scaler-z", r.Orphans)
		}
		fs.mu.Lock()
		seen := slices.Clone(fs.trackers)
		fs.mu.Unlock()
		wantReg, wantBound := map[string]bool{"scaler-a": true, "scaler-b": true}, map[string]bool{"scaler-c": true}
		if len(seen) != 1 || seen[0].err != nil || !reflect.DeepEqual(seen[0].registered, wantReg) || !reflect.DeepEqual(seen[0].boundJob, wantBound) {
			t.Errorf("trackers the manager read: %+v; want registered %v, bound %v", seen, wantReg, wantBound)
		}
		if _, _, err := worker.Trackers(context.Background()); err == nil {
			t.Error("Trackers outside an orphan request gave trackers; want an error, so that nothing counts as orphaned")
		}

		f, err = hub.Request(ctx, "worker-s", worker.TypeScalerOrphans, worker.OrphansRequest{Op: "stop", IDs: []string{"scaler-z"}})
		if err != nil {
			t.Fatal(err)
		}
		r = worker.OrphansReply{}
		if err := f.Decode(&r); err != nil {
			t.Fatal(err)
		}
		if len(r.Outcomes) != 1 || r.Outcomes[0] != (scaler.StopOutcome{ID: "scaler-z", Outcome: scaler.OutcomeStopped}) {
			t.Errorf("stop outcomes: %+v; want scaler-z stopped", r.Outcomes)
		}
		if _, err := hub.Request(ctx, "worker-s", worker.TypeScalerOrphans, worker.OrphansRequest{Op: "stop", IDs: []string{"../etc"}}); err == nil {
			t.Error("a stop of a bad id was served")
		}
		if _, err := hub.Request(ctx, "worker-s", worker.TypeScalerOrphans, worker.OrphansRequest{Op: "drop"}); err == nil {
			t.Error("an unknown orphan op was served")
		}
	})

	t.Run("register and agent notices", func(t *testing.T) {
		f, err := hub.Request(ctx, "worker-s", worker.TypeScalerRegister, worker.RegisterRequest{AgentID: "scaler-a", Token: "token-of-scaler-a"})
		if err != nil {
			t.Fatal(err)
		}
		var reg scaler.Registration
		if err := f.Decode(&reg); err != nil {
			t.Fatal(err)
		}
		if !reg.Managed || reg.BoundJobID != "job-of-scaler-a" {
			t.Errorf("registration: %+v; want the manager's", reg)
		}
		_, err = hub.Request(ctx, "worker-s", worker.TypeScalerRegister, worker.RegisterRequest{AgentID: "scaler-x", Token: "forged"})
		if !worker.IsUnknownScalerAgent(err) {
			t.Errorf("registration of an agent the worker did not spawn: %v; want an unknown scaler agent", err)
		}
		if err := hub.Send(ctx, "worker-s", worker.TypeScalerAgent, worker.AgentNotice{AgentID: "scaler-a", Event: worker.AgentBusy}); err != nil {
			t.Fatal(err)
		}
		if err := hub.Send(ctx, "worker-s", worker.TypeScalerAgent, worker.AgentNotice{AgentID: "scaler-a", Event: worker.AgentDisconnected}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() string { return "the worker's manager was not told of the agent busy and disconnected" }, func() bool {
			fs.mu.Lock()
			defer fs.mu.Unlock()
			return slices.Equal(fs.busy, []string{"scaler-a"}) && slices.Equal(fs.disconnected, []string{"scaler-a"})
		})
	})
}

// TestScalerRetireAndCapacity: a worker's scaler asks the coordinator to
// retire an agent (kept when the coordinator says it holds a job) and
// tells it of freed capacity; a coordinator that takes no scaler reports
// refuses the retirement, so the agent is kept.
func TestScalerRetireAndCapacity(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	rep := newFakeReports()
	rep.retire = worker.RetireReply{Connected: true, Retired: false}
	hub, url := startHub(t, ca, rep)
	w := newWorker(t, url, writeCredential(t, ca, "worker-r"), &fakeScalers{}, nil)
	connect(t, hub, w, "worker-r")
	if w.Sink().RetireAgent("scaler-busy") {
		t.Error("an agent the coordinator says holds a job was retired")
	}
	rep.mu.Lock()
	rep.retire = worker.RetireReply{Connected: true, Retired: true}
	rep.mu.Unlock()
	if !w.Sink().RetireAgent("scaler-idle") {
		t.Error("an agent the coordinator retired was kept")
	}
	if w.Sink().RetireAgent("not-a-scaler-agent") {
		t.Error("a retirement of an id that is not a scaler agent's went through")
	}
	rep.mu.Lock()
	retired := slices.Clone(rep.retired)
	rep.mu.Unlock()
	if !slices.Equal(retired, []string{"scaler-busy", "scaler-idle"}) {
		t.Errorf("coordinator asked to retire %v, want scaler-busy and scaler-idle", retired)
	}
	w.Sink().CapacityFreed()
	waitFor(t, func() string { return "the coordinator was not told of freed capacity" }, func() bool {
		rep.mu.Lock()
		defer rep.mu.Unlock()
		return rep.capacity == 1
	})

	hub2, url2 := startHub(t, ca, nil)
	w2 := newWorker(t, url2, writeCredential(t, ca, "worker-r2"), &fakeScalers{}, nil)
	connect(t, hub2, w2, "worker-r2")
	if w2.Sink().RetireAgent("scaler-idle") {
		t.Error("a coordinator that takes no scaler reports retired an agent")
	}
}

// TestRequestToUnknownNode: a request or notice to a worker with no
// channel here fails with ErrNotConnected, before or after it was
// connected.
func TestRequestToUnknownNode(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	hub, url := startHub(t, ca, nil)
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	if _, err := hub.Request(ctx, "worker-nowhere", worker.TypeScalerSpawn, worker.SpawnRequest{JobID: "job-1"}); !errors.Is(err, coordinator.ErrNotConnected) {
		t.Errorf("request to an unknown node: %v; want ErrNotConnected", err)
	}
	if err := hub.Send(ctx, "worker-nowhere", worker.TypeScalerAgent, worker.AgentNotice{AgentID: "scaler-a", Event: worker.AgentBusy}); !errors.Is(err, coordinator.ErrNotConnected) {
		t.Errorf("notice to an unknown node: %v; want ErrNotConnected", err)
	}

	stop := connect(t, hub, newWorker(t, url, writeCredential(t, ca, "worker-gone"), &fakeScalers{}, nil), "worker-gone")
	if _, err := hub.Request(ctx, "worker-gone", worker.TypeScalerOrphans, worker.OrphansRequest{Op: "list"}); err != nil {
		t.Fatalf("request to the connected worker: %v", err)
	}
	stop()
	waitFor(t, func() string { return fmt.Sprintf("hub lists %v after the worker stopped", hub.Connected()) },
		func() bool { return !slices.Contains(hub.Connected(), "worker-gone") })
	if _, err := hub.Request(ctx, "worker-gone", worker.TypeScalerOrphans, worker.OrphansRequest{Op: "list"}); !errors.Is(err, coordinator.ErrNotConnected) {
		t.Errorf("request to a worker that disconnected: %v; want ErrNotConnected", err)
	}
}

// TestAgentNoticeWhileWorkerBusy: a coordinator's notice that one of the
// worker's scaler agents left reaches the worker's manager (which then
// destroys the compute and frees its capacity) even while the worker is
// serving as many long scaler requests (orphan stops) as it serves at
// once.
func TestAgentNoticeWhileWorkerBusy(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	hub, url := startHub(t, ca, nil)
	block := make(chan struct{})
	fs := &fakeScalers{agentIDs: []string{"scaler-a"}, stopBlock: block}
	connect(t, hub, newWorker(t, url, writeCredential(t, ca, "worker-busy"), fs, nil), "worker-busy")
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	released := false
	defer func() {
		if !released {
			close(block)
		}
	}()
	stopsEntered := func() int {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return len(fs.stops)
	}

	// Fill the worker with orphan stops that wait, until it refuses one
	// as busy.
	for n := 0; ; n++ {
		if n > 1000 {
			t.Fatal("the worker never refused an orphan stop as busy")
		}
		refused := make(chan error, 1)
		wg.Go(func() {
			_, err := hub.Request(ctx, "worker-busy", worker.TypeScalerOrphans, worker.OrphansRequest{Op: "stop", IDs: []string{"scaler-z"}})
			refused <- err
		})
		var err error
		waitFor(t, func() string { return fmt.Sprintf("orphan stop #%d neither served nor refused", n+1) }, func() bool {
			select {
			case err = <-refused:
				return true
			default:
				return stopsEntered() == n+1
			}
		})
		if err != nil {
			break // busy: every slot holds a stop
		}
	}

	if err := hub.Send(ctx, "worker-busy", worker.TypeScalerAgent, worker.AgentNotice{AgentID: "scaler-a", Event: worker.AgentDisconnected}); err != nil {
		t.Fatal(err)
	}
	// The worker handles a channel's frames in order: once it refused a
	// request sent after the notice, it has handled the notice too, while
	// still busy.
	if _, err := hub.Request(ctx, "worker-busy", worker.TypeScalerOrphans, worker.OrphansRequest{Op: "stop", IDs: []string{"scaler-z"}}); err == nil {
		t.Fatal("an orphan stop was served while every slot held one")
	}
	close(block)
	released = true
	waitFor(t, func() string { return "the worker's manager never heard that scaler-a left" }, func() bool {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return slices.Contains(fs.disconnected, "scaler-a")
	})
}

// TestWorkerChannelSurvivesSilentCoordinator: a worker keeps its channel
// to a coordinator that has nothing to send it (no relayed agent, no
// request) for many heartbeat intervals; the coordinator hears its
// heartbeats all along, so neither end has a reason to drop it.
func TestWorkerChannelSurvivesSilentCoordinator(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	hub := coordinator.New(coordinator.Config{SelfID: "coord-1", CA: fixedCA{ca}, Workers: &touches{seen: map[string]time.Duration{}}})
	var dials atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dials.Add(1)
		hub.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hub.Close(ctx)
		srv.Close()
	})
	// Long enough that a loaded machine does not starve the channel for
	// three intervals; the silence the test looks for is certain anyway.
	const beat = 250 * time.Millisecond
	w, err := worker.New(worker.Config{CoordinatorURLs: []string{srv.URL}, CredentialFile: writeCredential(t, ca, "worker-quiet"), Heartbeat: beat})
	if err != nil {
		t.Fatal(err)
	}
	connect(t, hub, w, "worker-quiet")
	// A negative can only be watched for a while: 10 intervals, well past
	// the 3 after which the worker gives a silent channel up.
	end := time.Now().Add(10 * beat)
	for time.Now().Before(end) {
		if n := dials.Load(); n != 1 {
			t.Fatalf("the worker dialled the coordinator %d times within %s of connecting; want its one channel kept", n, 10*beat)
		}
		time.Sleep(beat / 5)
	}
	if !slices.Contains(hub.Connected(), "worker-quiet") || !w.Ready() {
		t.Errorf("after %s: hub lists %v, worker ready %t; want the channel up", 10*beat, hub.Connected(), w.Ready())
	}
}
