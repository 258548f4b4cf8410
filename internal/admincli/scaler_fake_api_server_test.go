package admincli

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/scaler"
)

// The fake's auto-scaler depends on the path its base URL has, so that a
// golden case picks the orchestrator it talks to with KICI_ADMIN_URL:
//
//	{url}            an auto-scaler with three scalers and some compute
//	{url}/no-scaler  an orchestrator without one (409, "configured": false)
//	{url}/failing    its reload is refused and one scaler's compute
//	                 cannot be listed
//
// With empty, the auto-scaler runs with no scalers and no compute.
const (
	fakeNoScaler = "/no-scaler"
	fakeFailing  = "/failing"
)

// scalerRoutes adds the auto-scaler's endpoints under every prefix.
func (f *fakeAPI) scalerRoutes(mux *http.ServeMux) {
	for _, prefix := range []string{"", fakeNoScaler, fakeFailing} {
		mux.HandleFunc("GET "+prefix+scalersPath, f.scalerStatus)
		mux.HandleFunc("POST "+prefix+scalerReloadPath, f.scalerReload)
		mux.HandleFunc("POST "+prefix+"/api/v1/scalers/{name}/retry", f.scalerRetry)
		mux.HandleFunc("GET "+prefix+orphansPath, f.scalerOrphans)
		mux.HandleFunc("POST "+prefix+orphansStopPath, f.scalerStopOrphans)
	}
}

// scalerMode is the prefix a request came under.
func scalerMode(r *http.Request) string {
	for _, prefix := range []string{fakeNoScaler, fakeFailing} {
		if strings.HasPrefix(r.URL.Path, prefix+"/") {
			return prefix
		}
	}
	return ""
}

// noScaler answers 409 as the orchestrator without an auto-scaler does.
func (f *fakeAPI) noScaler(w http.ResponseWriter, r *http.Request) bool {
	if scalerMode(r) != fakeNoScaler {
		return false
	}
	writeError(w, http.StatusConflict, "no auto-scaler is configured (set KICI_SCALER_CONFIG_PATH and restart)")
	return true
}

func timeP(t time.Time) *time.Time { return &t }

var fakeScalers = []scaler.ScalerStatus{
	{
		Name: "build-hosts", Type: "bare-metal", MaxAgents: 4, Active: 2, Spawning: 1,
		LabelSets: [][]string{{"linux", "trusted", "x64"}, {"big", "linux", "trusted", "x64"}},
	},
	{
		Name: "docker", Type: "container", MaxAgents: 10, Active: 0,
		LabelSets:  [][]string{{"docker", "linux"}},
		DeferredTo: timeP(fakeNow.Add(4*time.Minute + 30*time.Second)),
		LastError:  `spawn refused by the host: image "kici-agent:dev" is not present and its pull policy is Never`,
	},
	{
		Name: "microvms", Type: "firecracker", MaxAgents: 4, Active: 0,
		LabelSets:  [][]string{{"fc", "linux"}},
		DeferredTo: timeP(fakeNow.Add(time.Minute)),
		LastError:  `spawn refused by the host: kernel: /srv/fc/vmlinux: no such file or directory (put the guest kernel (an uncompressed vmlinux on x86_64) there, or fix kernelPath)`,
		Checks: []scaler.HostCheck{
			{Name: "kvm", Status: "pass", Detail: "/dev/kvm opens read-write"},
			{Name: "kernel", Status: "fail", Detail: "/srv/fc/vmlinux: no such file or directory", Fix: "put the guest kernel (an uncompressed vmlinux on x86_64) there, or fix kernelPath"},
			{Name: "cgroup v2", Status: "warn", Detail: "/sys/fs/cgroup is not a cgroup v2 hierarchy: the jailer runs with --cgroup-version 1", Fix: "boot with systemd.unified_cgroup_hierarchy=1 so that /sys/fs/cgroup is cgroup v2"},
		},
	},
	{
		Name: "old-hosts", Type: "bare-metal", MaxAgents: 2, Active: 1,
		LabelSets: [][]string{{"linux", "old"}},
		Retiring:  true,
		LastError: "agent process exited with code 2 before it registered\n--- last output ---\n" +
			`kici-agent: agent config: OrchestratorURL (KICI_ORCHESTRATOR_URL) "http://ci-1:4000/ws": want a ws:// or wss:// URL such as ws://127.0.0.1:4000/ws`,
	},
}

func (f *fakeAPI) scalerStatus(w http.ResponseWriter, r *http.Request) {
	switch {
	case scalerMode(r) == fakeNoScaler:
		writeJSONStatus(w, http.StatusOK, map[string]any{"configured": false, "scalers": []scaler.ScalerStatus{}})
	case f.empty:
		writeJSONStatus(w, http.StatusOK, map[string]any{"configured": true, "scalers": []scaler.ScalerStatus{}})
	default:
		writeJSONStatus(w, http.StatusOK, map[string]any{"configured": true, "scalers": fakeScalers})
	}
}

func (f *fakeAPI) scalerReload(w http.ResponseWriter, r *http.Request) {
	if f.noScaler(w, r) {
		return
	}
	if scalerMode(r) == fakeFailing {
		writeError(w, http.StatusUnprocessableEntity, "reload rejected; the running configuration is unchanged: "+
			"load /etc/kici/scalers.yaml: /etc/kici/scalers.yaml:14:9: scalers[1].labelSets[0].imagee: unknown key (did you mean \"image\"?)\n"+
			"/etc/kici/scalers.d/20-gpu.yaml:3:16: scalers[0].maxAgents: must be a positive number (at most 100000), got 0")
		return
	}
	plan := scaler.ReloadResult{Added: []string{"gpu"}, Updated: []string{"docker"}, Retired: []string{"old-hosts"}, Unchanged: []string{"build-hosts"}}
	if f.empty {
		plan = scaler.ReloadResult{}
	}
	writeJSONStatus(w, http.StatusOK, map[string]any{"result": "applied", "plan": plan})
}

// scalerRetry lifts the deferral of a scaler of fakeScalers.
func (f *fakeAPI) scalerRetry(w http.ResponseWriter, r *http.Request) {
	if f.noScaler(w, r) {
		return
	}
	name := r.PathValue("name")
	if !slices.ContainsFunc(fakeScalers, func(s scaler.ScalerStatus) bool { return s.Name == name }) {
		writeError(w, http.StatusNotFound, "no scaler named \""+name+"\" (see GET /api/v1/scalers)")
		return
	}
	writeJSONStatus(w, http.StatusOK, map[string]any{"scaler": name, "result": "deferral lifted"})
}

const fakeContainerID = "3f9a1c2b7d8e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c"

var fakeOrphans = []scaler.Orphan{
	{Scaler: "build-hosts", Backend: "bare-metal", ID: "scaler-bare-metal-0c1d2e3f", Ref: "48213", Started: before(5 * time.Minute),
		Status: scaler.ComputeTracked, TrackedBy: []string{scaler.TrackedByRegistered, scaler.TrackedByBoundJob}},
	{Scaler: "docker", Backend: "container", ID: "scaler-container-1a2b3c4d", Ref: fakeContainerID, Started: before(2 * time.Minute),
		Status: scaler.ComputeTracked, TrackedBy: []string{scaler.TrackedBySpawning}},
	{Scaler: "docker", Backend: "container", ID: "scaler-container-9f8e7d6c", Ref: "77ab5e0c9d1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b", Started: before(3 * time.Hour),
		Status: scaler.ComputeOrphaned, TrackedBy: []string{}},
	{Scaler: "docker", Backend: "container", ID: "scaler-container-0b1c2d3e", Ref: "c0ffee0c9d1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b", Started: before(26 * time.Hour),
		Status: scaler.ComputeOrphaned, TrackedBy: []string{}},
	{Scaler: "microvms", Backend: "firecracker", ID: "scaler-firecracker-5e6f7a8b", Ref: "9911", Started: before(4 * time.Hour),
		Status: scaler.ComputeUnverified, TrackedBy: []string{}},
}

// The fake cluster the node parameter reaches: the answering
// coordinator ci-1 (the fake's own auto-scaler), the worker ci-2 with
// two pieces of compute, ci-3 without scalers, and ci-4 that cannot be
// asked. Any other well-formed id is not a node of the cluster. Under
// {url}/no-scaler the orchestrator is not a coordinator.
const (
	fakeSelfNode = "ci-1"
	fakeNodeErr  = `node "ci-4": the worker disconnected before it answered`
)

var fakeNodeOrphans = map[string][]scaler.Orphan{
	"ci-2": {
		{Scaler: "gpu", Backend: "container", ID: "scaler-container-7e6d5c4b", Ref: "aa11bb22cc33dd44ee55ff6677889900aabbccddeeff00112233445566778899", Started: before(90 * time.Minute),
			Status: scaler.ComputeOrphaned, TrackedBy: []string{}},
		{Scaler: "gpu", Backend: "container", ID: "scaler-container-3a4b5c6d", Ref: "bb22cc33dd44ee55ff6677889900aabbccddeeff00112233445566778899aa11", Started: before(10 * time.Minute),
			Status: scaler.ComputeTracked, TrackedBy: []string{scaler.TrackedByRegistered}},
	},
	"ci-3": {},
}

// fakeNode answers for the node parameter when the request has one (a
// "node" query value, or node in a stop body): 400 when the orchestrator
// is not a coordinator, 404 for a node not in the cluster. It reports
// whether it answered.
func (f *fakeAPI) fakeNode(w http.ResponseWriter, r *http.Request, node string) bool {
	if scalerMode(r) == fakeNoScaler {
		writeError(w, http.StatusBadRequest, "this orchestrator is not a cluster coordinator; --node is for clusters")
		return true
	}
	if _, ok := fakeNodeOrphans[node]; ok || node == fakeSelfNode || node == "ci-4" || node == "all" {
		return false
	}
	writeError(w, http.StatusNotFound, `node "`+node+`" is neither this coordinator nor a worker connected to it (see kici-admin peers list)`)
	return true
}

// nodeOrphans is one node's answer with the node parameter.
func (f *fakeAPI) nodeOrphans(node string) map[string]any {
	switch node {
	case fakeSelfNode:
		return map[string]any{"node": node, "ok": true, "compute": fakeOrphans}
	case "ci-4":
		return map[string]any{"node": node, "ok": false, "error": fakeNodeErr, "compute": []scaler.Orphan{}}
	}
	return map[string]any{"node": node, "ok": true, "compute": fakeNodeOrphans[node]}
}

func (f *fakeAPI) scalerOrphans(w http.ResponseWriter, r *http.Request) {
	if node := r.URL.Query().Get("node"); node != "" {
		if f.fakeNode(w, r, node) {
			return
		}
		if node != "all" {
			writeJSONStatus(w, http.StatusOK, f.nodeOrphans(node))
			return
		}
		var nodes []map[string]any
		for _, n := range []string{fakeSelfNode, "ci-2", "ci-3", "ci-4"} {
			nodes = append(nodes, f.nodeOrphans(n))
		}
		writeJSONStatus(w, http.StatusOK, map[string]any{"nodes": nodes})
		return
	}
	if f.noScaler(w, r) {
		return
	}
	switch {
	case f.empty:
		writeJSONStatus(w, http.StatusOK, map[string]any{"compute": []scaler.Orphan{}})
	case scalerMode(r) == fakeFailing:
		writeJSONStatus(w, http.StatusOK, map[string]any{
			"compute": fakeOrphans[:1],
			"error":   `list compute of scaler "docker": list containers of scaler "docker": Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?`,
		})
	default:
		writeJSONStatus(w, http.StatusOK, map[string]any{"compute": fakeOrphans})
	}
}

// scalerStopOrphans behaves as the manager's StopOrphans: one outcome
// per id, in order; tracked and unverified compute is refused, an id
// with no compute is not found, and scaler-container-stuck fails to stop.
//
// With a node, it answers for that node of the fake cluster: ci-4
// fails as a whole, "all" is refused.
func (f *fakeAPI) scalerStopOrphans(w http.ResponseWriter, r *http.Request) {
	var req stopOrphansRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Node == "" && f.noScaler(w, r) {
		return
	}
	if req.Node != "" && f.fakeNode(w, r, req.Node) {
		return
	}
	if req.Node == "all" {
		writeError(w, http.StatusBadRequest, `node "all": name one node to stop compute on (see kici-admin peers list)`)
		return
	}
	if err := scaler.ValidateOrphanIDs(req.IDs); err != nil {
		writeError(w, http.StatusBadRequest, err.Error()+" (see GET /api/v1/scalers/orphans)")
		return
	}
	compute := fakeOrphans
	if req.Node != "" && req.Node != fakeSelfNode {
		compute = fakeNodeOrphans[req.Node]
	}
	if req.Node == "ci-4" {
		writeJSONStatus(w, http.StatusOK, map[string]any{"node": req.Node, "ok": false, "error": fakeNodeErr, "outcomes": []scaler.StopOutcome{}})
		return
	}
	outcomes := []scaler.StopOutcome{}
	for _, id := range req.IDs {
		i := slices.IndexFunc(compute, func(o scaler.Orphan) bool { return o.ID == id })
		o := scaler.StopOutcome{ID: id, Outcome: scaler.OutcomeStopped}
		switch {
		case id == "scaler-container-stuck":
			o.Outcome, o.Error = scaler.OutcomeError, `scaler "docker": stop agent "scaler-container-stuck": remove container "5d1e0f2a3b4c": Error response from daemon: driver "overlay2" failed to remove root filesystem`
		case i < 0:
			o.Outcome, o.Error = scaler.OutcomeNotFound, "no scaler lists live compute of this id"
		case compute[i].Status == scaler.ComputeTracked:
			o.Outcome, o.Error = scaler.OutcomeTracked, "tracked by "+strings.Join(compute[i].TrackedBy, ", ")+": it may be working"
		case compute[i].Status == scaler.ComputeUnverified:
			o.Outcome, o.Error = scaler.OutcomeUnverified, `scaler "microvms": the firecracker backend cannot confirm this compute is its own; it is never stopped`
		}
		outcomes = append(outcomes, o)
	}
	if req.Node != "" {
		writeJSONStatus(w, http.StatusOK, map[string]any{"node": req.Node, "ok": true, "outcomes": outcomes})
		return
	}
	writeJSONStatus(w, http.StatusOK, map[string]any{"outcomes": outcomes})
}
