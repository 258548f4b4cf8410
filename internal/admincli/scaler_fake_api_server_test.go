package admincli

import (
	"fmt"
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

const fakeContainerID = "3f9a1c2b7d8e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c"

var fakeOrphans = []scaler.Orphan{
	{Scaler: "build-hosts", Backend: "bare-metal", AgentID: "scaler-bare-metal-0c1d2e3f", Ref: "48213", Started: before(5 * time.Minute), Tracked: true},
	{Scaler: "docker", Backend: "container", AgentID: "scaler-container-1a2b3c4d", Ref: fakeContainerID, Started: before(2 * time.Minute), Tracked: true},
	{Scaler: "docker", Backend: "container", AgentID: "scaler-container-9f8e7d6c", Ref: "77ab5e0c9d1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b", Started: before(3 * time.Hour), Tracked: false},
	{Scaler: "docker", Backend: "container", AgentID: "scaler-container-0b1c2d3e", Ref: "c0ffee0c9d1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b", Started: before(26 * time.Hour), Tracked: false},
}

func (f *fakeAPI) scalerOrphans(w http.ResponseWriter, r *http.Request) {
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

// scalerStopOrphans behaves as the manager's StopOrphans: naming a
// tracked agent refuses everything; untracked ones are stopped, and an id
// with no compute is an error after the others were stopped.
func (f *fakeAPI) scalerStopOrphans(w http.ResponseWriter, r *http.Request) {
	if f.noScaler(w, r) {
		return
	}
	var req stopOrphansRequest
	if !decode(w, r, &req) {
		return
	}
	if len(req.AgentIDs) == 0 {
		writeError(w, http.StatusBadRequest, "agent_ids: name the untracked agents to stop (see GET /api/v1/scalers/orphans)")
		return
	}
	var refused, stopped, errs []string
	for _, id := range req.AgentIDs {
		i := slices.IndexFunc(fakeOrphans, func(o scaler.Orphan) bool { return o.AgentID == id })
		switch {
		case i < 0:
			errs = append(errs, fmt.Sprintf("no live compute for agent %q", id))
		case fakeOrphans[i].Tracked:
			refused = append(refused, id)
		default:
			stopped = append(stopped, id)
		}
	}
	if len(refused) > 0 {
		writeJSONStatus(w, http.StatusUnprocessableEntity, map[string]any{
			"stopped": []string{}, "error": fmt.Sprintf("refusing to stop tracked agents %v: they are working", refused),
		})
		return
	}
	slices.Sort(stopped)
	if stopped == nil {
		stopped = []string{}
	}
	if len(errs) > 0 {
		writeJSONStatus(w, http.StatusUnprocessableEntity, map[string]any{"stopped": stopped, "error": strings.Join(errs, "\n")})
		return
	}
	writeJSONStatus(w, http.StatusOK, map[string]any{"stopped": stopped})
}
