package baremetal

import (
	"maps"
	"slices"

	"github.com/kici-dev/kici/internal/scaler"
)

// hostEnv are the only variables of the orchestrator's own environment an
// agent inherits. Everything else (the orchestrator's secrets, its
// database URL) stays out.
var hostEnv = []string{"PATH", "HOME", "LANG", "TMPDIR", "USER"}

// agentEnv builds an agent's environment from scratch, each layer
// overriding the one before: the allow-listed host variables (read with
// lookup, os.LookupEnv in production), the request's KICI_* identity,
// KICI_AGENT_WORKDIR, and the label set's Env.
func agentEnv(lookup func(string) (string, bool), req scaler.SpawnRequest, workDir string) []string {
	m := map[string]string{}
	for _, k := range hostEnv {
		if v, ok := lookup(k); ok {
			m[k] = v
		}
	}
	maps.Copy(m, req.Env)
	m["KICI_AGENT_WORKDIR"] = workDir
	maps.Copy(m, req.LabelSet.Env)
	env := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		env = append(env, k+"="+m[k])
	}
	return env
}
