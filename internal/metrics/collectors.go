package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// QueueRow is what the queue-depth collector needs of a dispatch queue row.
type QueueRow struct {
	Status string
	Labels []string
}

// ScalerUsage is one scaler's population, for the usage gauges.
type ScalerUsage struct {
	Name      string
	Backend   string
	Active    int
	Spawning  int
	MaxAgents int
}

// queueCollector reports the dispatch queue's depth by status and by
// label at scrape time. A label once seen stays reported, at 0 when no
// queued job carries it: a drained label reads 0 instead of vanishing,
// so alerts and graphs do not lose it.
type queueCollector struct {
	list      func(ctx context.Context) ([]QueueRow, error)
	byStatus  *prometheus.Desc
	byLabel   *prometheus.Desc
	mu        sync.Mutex
	seenLabel map[string]bool
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.byStatus
	ch <- c.byLabel
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := c.list(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.byStatus, err)
		return
	}
	status := map[string]int{"pending": 0, "dispatched": 0}
	labels := map[string]int{}
	for _, r := range rows {
		status[r.Status]++
		if r.Status == "pending" {
			for _, l := range r.Labels {
				labels[l]++
			}
		}
	}
	c.mu.Lock()
	for l := range labels {
		c.seenLabel[l] = true
	}
	for l := range c.seenLabel {
		if _, ok := labels[l]; !ok {
			labels[l] = 0
		}
	}
	c.mu.Unlock()
	for s, n := range status {
		ch <- prometheus.MustNewConstMetric(c.byStatus, prometheus.GaugeValue, float64(n), s)
	}
	for l, n := range labels {
		ch <- prometheus.MustNewConstMetric(c.byLabel, prometheus.GaugeValue, float64(n), l)
	}
}

// WatchQueue registers the queue-depth gauges, read through list at
// every scrape.
func (r *Registry) WatchQueue(list func(ctx context.Context) ([]QueueRow, error)) {
	r.reg.MustRegister(&queueCollector{
		list: list, seenLabel: map[string]bool{},
		byStatus: prometheus.NewDesc("kici_orch_dispatch_queue_depth", "Jobs in the dispatch queue, by status (pending, dispatched).", []string{"status"}, nil),
		byLabel:  prometheus.NewDesc("kici_orch_dispatch_queue_depth_by_label", "Pending jobs in the dispatch queue, by runs-on label; a label once seen stays at 0 when drained.", []string{"label"}, nil),
	})
}

// scalerCollector reports each scaler's agents at scrape time.
type scalerCollector struct {
	usage              func() []ScalerUsage
	active, spawn, max *prometheus.Desc
}

func (c *scalerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.active
	ch <- c.spawn
	ch <- c.max
}

func (c *scalerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, u := range c.usage() {
		ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(u.Active), u.Name, u.Backend)
		ch <- prometheus.MustNewConstMetric(c.spawn, prometheus.GaugeValue, float64(u.Spawning), u.Name, u.Backend)
		ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(u.MaxAgents), u.Name, u.Backend)
	}
}

// WatchScalers registers the per-scaler usage gauges.
func (r *Registry) WatchScalers(usage func() []ScalerUsage) {
	labels := []string{"scaler", "backend"}
	r.reg.MustRegister(&scalerCollector{
		usage:  usage,
		active: prometheus.NewDesc("kici_orch_scaler_agents", "Agents of a scaler that are spawning or alive (what maxAgents caps).", labels, nil),
		spawn:  prometheus.NewDesc("kici_orch_scaler_agents_spawning", "Agents of a scaler being spawned that have not registered yet.", labels, nil),
		max:    prometheus.NewDesc("kici_orch_scaler_max_agents", "A scaler's maxAgents.", labels, nil),
	})
}

// agentCollector reports the connected agents by backend at scrape time.
// The total is also reported under the reference name
// kici_orch_agents_active.
type agentCollector struct {
	count        func() map[string]int
	desc, active *prometheus.Desc
}

func (c *agentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	ch <- c.active
}

func (c *agentCollector) Collect(ch chan<- prometheus.Metric) {
	total := 0
	for backend, n := range c.count() {
		total += n
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), backend)
	}
	ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(total))
}

// WatchAgents registers the connected-agents gauge; count returns the
// number of connected agents per backend ("static" for agents started by
// hand, else the scaler backend type).
func (r *Registry) WatchAgents(count func() map[string]int) {
	r.reg.MustRegister(&agentCollector{
		count:  count,
		desc:   prometheus.NewDesc("kici_orch_agents_connected", "Agents connected to the orchestrator, by backend (static, or the scaler backend type).", []string{"backend"}, nil),
		active: prometheus.NewDesc("kici_orch_agents_active", "Agents connected to the orchestrator (all backends).", nil, nil),
	})
}

// WatchClusterEvents reports, at each scrape, how many live events this
// coordinator could not relay to the other coordinators (dropped returns
// the running count). Coordinators call it once.
func (r *Registry) WatchClusterEvents(dropped func() float64) {
	r.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "kici_orch_cluster_events_dropped_total",
		Help: "Live events (status changes, log chunk notices) this coordinator could not relay to the other coordinators.",
	}, dropped))
}

// LogStats is what the log-store collector reads at scrape time.
type LogStats struct {
	BytesStored  int64
	ChunksStored int64
}

// logCollector reports the log store's cumulative counters.
type logCollector struct {
	stats         func() LogStats
	bytes, chunks *prometheus.Desc
}

func (c *logCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.bytes
	ch <- c.chunks
}

func (c *logCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(st.BytesStored))
	ch <- prometheus.MustNewConstMetric(c.chunks, prometheus.CounterValue, float64(st.ChunksStored))
}

// WatchLogs registers the log-store counters, read through stats at every
// scrape.
func (r *Registry) WatchLogs(stats func() LogStats) {
	r.reg.MustRegister(&logCollector{
		stats:  stats,
		bytes:  prometheus.NewDesc("kici_orch_log_bytes_stored_total", "Bytes of step-log data written to the log store since the orchestrator started.", nil, nil),
		chunks: prometheus.NewDesc("kici_orch_log_chunks_stored_total", "Log chunks written to the log store since the orchestrator started (replayed chunks skipped).", nil, nil),
	})
}

// ClusterWorkers is what a coordinator reports of its workers; see
// WatchClusterWorkers.
type ClusterWorkers struct {
	// Connected returns how many workers hold a channel to this
	// coordinator.
	Connected func() int
	// OutboxDepth returns, per connected worker, the entries its outbox
	// holds (as its last heartbeat said).
	OutboxDepth func() map[string]int
}

// ClusterCounters are a coordinator's counters of the work it routes to
// workers; see WatchClusterWorkers.
type ClusterCounters struct {
	// Reroutes counts queued jobs routed to a worker's scaler, by outcome:
	// "asked" (sent), "taken-back" (no answer within the accept timeout,
	// or the worker left).
	Reroutes *prometheus.CounterVec
	// OutboxEntries counts workers' outbox entries received, by verdict:
	// "applied", "duplicate", "gap", "error".
	OutboxEntries *prometheus.CounterVec
}

// WatchClusterWorkers registers a coordinator's worker metrics and
// returns its counters. Coordinators call it once.
func (r *Registry) WatchClusterWorkers(w ClusterWorkers) ClusterCounters {
	c := ClusterCounters{
		Reroutes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kici_orch_cluster_reroutes_total",
			Help: "Queued jobs this coordinator routed to a worker's scalers, by outcome (asked, taken-back).",
		}, []string{"outcome"}),
		OutboxEntries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kici_orch_cluster_outbox_entries_total",
			Help: "Workers' outbox entries this coordinator received, by verdict (applied, duplicate, gap, error).",
		}, []string{"verdict"}),
	}
	for _, o := range []string{"asked", "taken-back"} {
		c.Reroutes.WithLabelValues(o)
	}
	for _, v := range []string{"applied", "duplicate", "gap", "error"} {
		c.OutboxEntries.WithLabelValues(v)
	}
	r.reg.MustRegister(c.Reroutes, c.OutboxEntries,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kici_orch_cluster_workers_connected",
			Help: "Workers holding a channel to this coordinator.",
		}, func() float64 { return float64(w.Connected()) }),
		&outboxDepthCollector{depth: w.OutboxDepth, desc: prometheus.NewDesc("kici_orch_cluster_worker_outbox_depth",
			"Entries a connected worker's outbox holds, as its last heartbeat said.", []string{"node"}, nil)})
	return c
}

type outboxDepthCollector struct {
	depth func() map[string]int
	desc  *prometheus.Desc
}

func (c *outboxDepthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *outboxDepthCollector) Collect(ch chan<- prometheus.Metric) {
	for node, n := range c.depth() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), node)
	}
}
