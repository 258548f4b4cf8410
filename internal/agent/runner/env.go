package runner

import (
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/kici-dev/kici/internal/workflow"
)

// HostEnvAllowList names the variables of the runner's own environment that
// a step inherits. Nothing else of the host's environment reaches a step.
var HostEnvAllowList = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE",
	"LC_MESSAGES", "TERM", "TZ", "TMPDIR", "HOSTNAME", "SSL_CERT_FILE", "SSL_CERT_DIR",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
}

// hostEnv returns the allow-listed variables of environ.
func hostEnv(environ []string) map[string]string {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && slices.Contains(HostEnvAllowList, k) {
			env[k] = v
		}
	}
	return env
}

// stepEnv returns a step's environment, sorted, and the variables its `if`
// sees as env.*. The layers, each overriding the one before: allow-listed
// host variables (not for a step in an image, which starts from the
// image's own), the runner's own (CI, KICI_WORKSPACE, TMPDIR, and those of
// the job's containers: see jobContainers.stepEnv), the dispatch's Env,
// EventEnv, the job's Env, the step's Env, and Secrets. `if` sees the
// dispatch's Env, EventEnv, the job's and the step's Env.
func (j *jobRun) stepEnv(st workflow.Step) (env []string, ifEnv map[string]string) {
	ifEnv = map[string]string{}
	for _, layer := range []map[string]string{j.spec.Env, j.spec.EventEnv, j.spec.Job.Env, st.Env} {
		maps.Copy(ifEnv, layer)
	}
	all := map[string]string{}
	if !j.ctr.inImage() {
		all = hostEnv(os.Environ())
	}
	maps.Copy(all, map[string]string{
		"CI":             "true",
		"KICI_WORKSPACE": j.src,
		"TMPDIR":         j.dirs.tmp,
	})
	maps.Copy(all, j.ctr.stepEnv())
	maps.Copy(all, ifEnv)
	maps.Copy(all, j.spec.Secrets)
	for _, k := range slices.Sorted(maps.Keys(all)) {
		env = append(env, k+"="+all[k])
	}
	return env, ifEnv
}

// gitEnv is the environment of the checkout's git commands: the allow-listed
// host variables, and no prompt for credentials.
func gitEnv() []string {
	all := hostEnv(os.Environ())
	all["GIT_TERMINAL_PROMPT"] = "0"
	var env []string
	for _, k := range slices.Sorted(maps.Keys(all)) {
		env = append(env, k+"="+all[k])
	}
	return env
}
