package deploy_test

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"

	"github.com/kici-dev/kici/internal/agent"
	"github.com/kici-dev/kici/internal/orchestrator"
)

// component is the kici program a file or a Compose service configures.
type component string

const (
	// compNone is not a kici program (PostgreSQL): it sets no KICI_ variable.
	compNone component = "none"
	// compOrchestrator is kici-orchestrator, standalone or coordinator.
	compOrchestrator component = "orchestrator"
	// compWorker is kici-orchestrator with KICI_CLUSTER_ROLE=worker.
	compWorker component = "worker"
	// compAgent is kici-agent.
	compAgent component = "agent"
)

// pendingWorkerVars are variables of the cluster design that
// kici-orchestrator does not read yet; only the worker's files may name
// them. None is left: the worker role reads its three.
var pendingWorkerVars []string

// workerFiles are the files under deploy/ that configure a worker.
var workerFiles = []string{
	"compose/compose.yaml",
	"systemd/kici-worker.service",
	"systemd/worker.env.example",
}

// kiciName matches a KICI_ variable name in any text (the same pattern as
// internal/orchestrator's docs test).
var kiciName = regexp.MustCompile(`\bKICI_[A-Z0-9_]*[A-Z0-9]\b`)

// orchestratorKnows reports whether kici-orchestrator starts without an
// "unknown variable" warning for name. Every value is left empty, so the
// defaults apply and the configuration is valid.
func orchestratorKnows(t *testing.T, name string) bool {
	t.Helper()
	_, warnings, err := orchestrator.ConfigFromEnv(func(string) string { return "" }, []string{name + "="})
	if err != nil {
		t.Fatalf("orchestrator.ConfigFromEnv with only %s set (empty): %v", name, err)
	}
	return len(warnings) == 0
}

// agentKnows reports whether name is one of kici-agent's variables.
func agentKnows(name string) bool {
	return slices.ContainsFunc(agent.EnvVars, func(v agent.EnvVar) bool { return v.Name == name })
}

// checkNames reports every KICI_ name of names that c does not read. where
// says which file or service names them.
func checkNames(t *testing.T, c component, where string, names []string) {
	t.Helper()
	for _, name := range names {
		if !strings.HasPrefix(name, "KICI_") {
			continue
		}
		var known bool
		switch c {
		case compNone:
			t.Errorf("%s: got %s, want no KICI_ variable (it is not a kici program)", where, name)
			continue
		case compOrchestrator:
			known = orchestratorKnows(t, name)
		case compWorker:
			known = orchestratorKnows(t, name)
			if slices.Contains(pendingWorkerVars, name) {
				if known {
					t.Logf("%s: kici-orchestrator reads %s now: remove it from pendingWorkerVars", where, name)
				}
				known = true
			}
		case compAgent:
			known = agentKnows(name)
		default:
			t.Fatalf("%s: unknown component %q", where, c)
		}
		if !known {
			t.Errorf("%s: sets %s, which kici's %s does not read", where, name, c)
		}
	}
}

// checkEnvironment starts c's configuration from env, as the program would
// read it at start, and reports a refused value or an unknown variable.
// A worker is checked like the orchestrator it is.
func checkEnvironment(t *testing.T, c component, where string, env map[string]string) {
	t.Helper()
	getenv := func(k string) string { return env[k] }
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	switch c {
	case compOrchestrator, compWorker:
		_, warnings, err := orchestrator.ConfigFromEnv(getenv, environ)
		if err != nil {
			t.Errorf("%s: kici-orchestrator refuses its environment: %v", where, err)
		}
		if len(warnings) > 0 {
			t.Errorf("%s: kici-orchestrator warns: got %q, want no warning", where, warnings)
		}
	case compAgent:
		_, warnings, err := agent.FromEnv(getenv, environ)
		if err != nil {
			t.Errorf("%s: kici-agent refuses its environment: %v", where, err)
		}
		if len(warnings) > 0 {
			t.Errorf("%s: kici-agent warns: got %q, want no warning", where, warnings)
		}
	}
}

// composeFile is the part of compose.yaml the test reads. An environment
// is a mapping or a list of NAME=value strings.
type composeFile struct {
	Services map[string]struct {
		Environment any `yaml:"environment"`
	} `yaml:"services"`
}

// composeInterpolation holds a value for every ${NAME...} of compose.yaml,
// as its .env file would give them.
var composeInterpolation = map[string]string{
	"KICI_SECRET_KEY":            strings.Repeat("5e", 32),
	"KICI_BOOTSTRAP_ADMIN_TOKEN": "bootstrap-example",
	"POSTGRES_PASSWORD":          "password-example",
	"KICI_AGENT_TOKEN":           "kat_example",
	"KICI_CLUSTER_JOIN_TOKEN":    "join-example",
}

// interpolation matches ${NAME}, ${NAME:-default}, ${NAME:?message} and the
// like.
var interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:[:]?[-?+][^}]*)?\}`)

// interpolate replaces each ${...} of v with its value in
// composeInterpolation, naming those it has none for.
func interpolate(v string) (string, []string) {
	var missing []string
	out := interpolation.ReplaceAllStringFunc(v, func(m string) string {
		name := interpolation.FindStringSubmatch(m)[1]
		val, ok := composeInterpolation[name]
		if !ok {
			missing = append(missing, name)
		}
		return val
	})
	return out, missing
}

// environment reads a service's environment, in either of its forms.
func environment(v any) (map[string]string, error) {
	out := map[string]string{}
	switch e := v.(type) {
	case nil:
	case map[string]any:
		for k, val := range e {
			if k == "<<" {
				return nil, errors.New("environment: a YAML merge key was left unresolved")
			}
			if val != nil {
				out[k] = fmt.Sprint(val)
			} else {
				out[k] = ""
			}
		}
	case []any:
		for _, item := range e {
			s, ok := item.(string)
			if !ok {
				return nil, fmt.Errorf("environment entry %v: want a NAME=value string", item)
			}
			k, val, _ := strings.Cut(s, "=")
			out[k] = val
		}
	default:
		return nil, fmt.Errorf("environment: got %T, want a mapping or a list", v)
	}
	return out, nil
}

func TestComposeVariables(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("compose", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatalf("parse compose.yaml: %v", err)
	}
	// Each service's component, and the values that make the cluster: every
	// coordinator known by its own URL, the agent and the worker listing
	// all three.
	services := map[string]struct {
		comp component
		want map[string]string
	}{
		"postgres":      {comp: compNone},
		"coordinator-1": {comp: compOrchestrator, want: coordinatorValues("coordinator-1")},
		"coordinator-2": {comp: compOrchestrator, want: coordinatorValues("coordinator-2")},
		"coordinator-3": {comp: compOrchestrator, want: coordinatorValues("coordinator-3")},
		"agent": {comp: compAgent, want: map[string]string{
			"KICI_ORCHESTRATOR_URL": "ws://coordinator-1:4000/ws,ws://coordinator-2:4000/ws,ws://coordinator-3:4000/ws",
		}},
		"worker": {comp: compWorker, want: map[string]string{
			"KICI_CLUSTER_ROLE":             "worker",
			"KICI_CLUSTER_COORDINATOR_URLS": "http://coordinator-1:4000,http://coordinator-2:4000,http://coordinator-3:4000",
		}},
	}
	var got, want []string
	for name := range f.Services {
		got = append(got, name)
	}
	for name := range services {
		want = append(want, name)
	}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("services of compose.yaml (-want +got); give a new one its component here:\n%s", diff)
	}
	envs := map[string]map[string]string{}
	for name := range services {
		raw, err := environment(f.Services[name].Environment)
		if err != nil {
			t.Fatalf("service %s: %v", name, err)
		}
		envs[name] = raw
	}
	// The coordinators share one database and one secret key.
	for _, k := range []string{"KICI_DATABASE_URL", "KICI_SECRET_KEY"} {
		for _, name := range []string{"coordinator-2", "coordinator-3"} {
			if got, want := envs[name][k], envs["coordinator-1"][k]; got != want || got == "" {
				t.Errorf("%s of %s: got %q, want coordinator-1's %q (not empty)", k, name, got, want)
			}
		}
	}
	for name, svc := range services {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			where := "compose.yaml service " + name
			env := map[string]string{}
			var names []string
			for k, v := range envs[name] {
				names = append(names, k)
				val, missing := interpolate(v)
				if len(missing) > 0 {
					t.Errorf("%s: %s interpolates %q, which composeInterpolation has no value for", where, k, missing)
				}
				env[k] = val
			}
			slices.Sort(names)
			checkNames(t, svc.comp, where, names)
			checkEnvironment(t, svc.comp, where, env)
			got := map[string]string{}
			for k := range svc.want {
				got[k] = env[k]
			}
			if diff := cmp.Diff(svc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s: values (-want +got):\n%s", where, diff)
			}
		})
	}
}

// coordinatorValues are the values that make service name a coordinator
// that the others and the agents know by its own address.
func coordinatorValues(name string) map[string]string {
	return map[string]string{
		"KICI_CLUSTER_ROLE": "coordinator",
		"KICI_PUBLIC_URL":   "http://" + name + ":4000",
	}
}

// assignment matches a line of an environment file that sets a variable,
// or would set it once its leading # is removed.
var assignment = regexp.MustCompile(`^(#?)\s*([A-Za-z_][A-Za-z0-9_]*)=(.*)$`)

// readEnvFile returns the variables an environment file sets, and the names
// of those it sets or shows commented out.
func readEnvFile(path string) (set map[string]string, names []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	set = map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := assignment.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		names = append(names, m[2])
		if m[1] == "" {
			set[m[2]] = m[3]
		}
	}
	return set, names, sc.Err()
}

// unitFile is what the test reads of a systemd unit.
type unitFile struct {
	env     map[string]string // Environment= assignments
	envFile string            // EnvironmentFile=
}

// readUnit reads the Environment= and EnvironmentFile= lines of a unit.
// Environment= takes space-separated NAME=value words, each of which may
// be in double quotes.
func readUnit(path string) (unitFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return unitFile{}, err
	}
	u := unitFile{env: map[string]string{}}
	for line := range strings.SplitSeq(string(data), "\n") {
		key, val, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.HasPrefix(key, "#") {
			continue
		}
		switch key {
		case "Environment":
			for _, w := range unitWords(val) {
				k, v, ok := strings.Cut(w, "=")
				if !ok {
					return unitFile{}, fmt.Errorf("%s: Environment word %q: want NAME=value", path, w)
				}
				u.env[k] = v
			}
		case "EnvironmentFile":
			u.envFile = val
		}
	}
	return u, nil
}

// unitWords splits a unit setting's value at spaces outside double quotes,
// dropping the quotes.
func unitWords(s string) []string {
	var words []string
	var cur strings.Builder
	quoted, inWord := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
			inWord = true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
			}
			inWord = false
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

func TestSystemdVariables(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string // the unit
		envFile string // its example environment file
		comp    component
	}{
		{name: "kici-orchestrator.service", envFile: "orchestrator.env.example", comp: compOrchestrator},
		{name: "kici-agent.service", envFile: "agent.env.example", comp: compAgent},
		{name: "kici-worker.service", envFile: "worker.env.example", comp: compWorker},
	}
	var got, want []string
	for _, pattern := range []string{"*.service", "*.env.example"} {
		files, err := filepath.Glob(filepath.Join("systemd", pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			got = append(got, filepath.Base(f))
		}
	}
	for _, tt := range tests {
		want = append(want, tt.name, tt.envFile)
	}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("files of deploy/systemd (-want +got); give a new one its component here:\n%s", diff)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			unit, err := readUnit(filepath.Join("systemd", tt.name))
			if err != nil {
				t.Fatal(err)
			}
			if want := "/etc/kici/" + strings.TrimSuffix(tt.envFile, ".example"); unit.envFile != want {
				t.Errorf("%s: EnvironmentFile got %q, want %q (the installed name of %s)", tt.name, unit.envFile, want, tt.envFile)
			}
			set, fileNames, err := readEnvFile(filepath.Join("systemd", tt.envFile))
			if err != nil {
				t.Fatal(err)
			}
			var unitNames []string
			for k := range unit.env {
				unitNames = append(unitNames, k)
			}
			slices.Sort(unitNames)
			checkNames(t, tt.comp, tt.name, unitNames)
			checkNames(t, tt.comp, tt.envFile, fileNames)
			// What the service starts with: systemd lets the environment
			// file override Environment=.
			env := map[string]string{}
			for k, v := range unit.env {
				env[k] = v
			}
			for k, v := range set {
				env[k] = v
			}
			checkEnvironment(t, tt.comp, tt.name+" with "+tt.envFile, env)
		})
	}
}

// TestDeployFilesNameKnownVariables: every KICI_ name anywhere in deploy/
// (comments included) and in docs/deploy.md is one some kici component
// reads, but for the worker's pending variables in the worker's files.
func TestDeployFilesNameKnownVariables(t *testing.T) {
	t.Parallel()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".go") {
			return err
		}
		files = append(files, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "docs", "deploy.md"))
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, name := range kiciName.FindAllString(string(text), -1) {
			if seen[name] {
				continue
			}
			seen[name] = true
			if slices.Contains(workerFiles, filepath.ToSlash(f)) && slices.Contains(pendingWorkerVars, name) {
				continue
			}
			if !orchestratorKnows(t, name) {
				t.Errorf("%s names %s, which no kici component reads", f, name)
			}
		}
	}
}
