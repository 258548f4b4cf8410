package container

import (
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/scaler"
)

func TestContainerSpec(t *testing.T) {
	t.Parallel()
	cfg := Config{Name: "ct", Instance: "orch-1", ExtraHosts: []string{"host.docker.internal:host-gateway"}}
	req := scaler.SpawnRequest{
		AgentID: "scaler-container-0123abcd",
		Scaler:  "ct",
		LabelSet: scaler.LabelSet{
			Labels:  []string{"container", "linux"},
			Image:   "example/agent:1",
			Env:     map[string]string{"KICI_LOG_LEVEL": "debug", "EXTRA": "1"},
			Volumes: []string{"/cache:/cache:ro"},
			Limits:  scaler.Spec{CPUs: 2, MemoryBytes: 1 << 30},
		},
		Env:        map[string]string{"KICI_AGENT_ID": "scaler-container-0123abcd", "KICI_LOG_LEVEL": "info"},
		Limits:     scaler.Spec{CPUs: 0.5},
		BoundJobID: "job-1",
		RunID:      "run-1",
	}
	gotCfg, gotHost := containerSpec(cfg, req)

	wantCfg := &container.Config{
		Image: "example/agent:1",
		Env: []string{
			"EXTRA=1",
			"KICI_AGENT_ID=scaler-container-0123abcd",
			"KICI_AGENT_WORKDIR=/tmp/kici-agent",
			"KICI_LOG_LEVEL=debug", // the label set wins
		},
		Labels: map[string]string{
			"kici-managed":      "true",
			"kici-instance":     "orch-1",
			"kici-scaler-name":  "ct",
			"kici-agent-id":     "scaler-container-0123abcd",
			"kici-labels":       "container,linux",
			"kici-bound-job-id": "job-1",
			"kici-run-id":       "run-1",
		},
	}
	if diff := cmp.Diff(wantCfg, gotCfg); diff != "" {
		t.Errorf("container config (-want +got):\n%s", diff)
	}
	pids := int64(4096)
	wantHost := &container.HostConfig{
		Binds:      []string{"/cache:/cache:ro"},
		ExtraHosts: []string{"host.docker.internal:host-gateway"},
		Resources: container.Resources{
			NanoCPUs:  500_000_000, // from the request
			Memory:    1 << 30,     // from the label set
			PidsLimit: &pids,
		},
	}
	if diff := cmp.Diff(wantHost, gotHost); diff != "" {
		t.Errorf("host config (-want +got):\n%s", diff)
	}
}

func TestContainerSpecWarmAgent(t *testing.T) {
	t.Parallel()
	req := scaler.SpawnRequest{
		AgentID:  "scaler-container-0123abcd",
		LabelSet: scaler.LabelSet{Labels: []string{"linux"}, Image: "i", Env: map[string]string{"KICI_AGENT_WORKDIR": "/work"}},
	}
	gotCfg, gotHost := containerSpec(Config{Name: "ct", Instance: "i1"}, req)
	for _, k := range []string{"kici-bound-job-id", "kici-run-id"} {
		if v, ok := gotCfg.Labels[k]; ok {
			t.Errorf("label %s = %q, want none for an unbound spawn", k, v)
		}
	}
	if diff := cmp.Diff([]string{"KICI_AGENT_WORKDIR=/work"}, gotCfg.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if gotHost.Memory != 0 || gotHost.NanoCPUs != 0 {
		t.Errorf("limits = %d bytes, %d nano-CPUs; want none", gotHost.Memory, gotHost.NanoCPUs)
	}
}
