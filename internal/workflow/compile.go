package workflow

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// ErrNoWorkflows is returned by CompileDir when a repository holds no
// workflow file.
var ErrNoWorkflows = errors.New("no workflow files")

// File is one workflow source handed to Compile.
type File struct {
	// Path is the repository-relative path (".kici/workflows/ci.yml"); it
	// is recorded in the plan.
	Path string
	// Display is the name errors carry; empty means Path.
	Display string
	Data    []byte
}

// IsWorkflowFile reports whether a repository-relative path names a
// workflow file: a .yml or .yaml file directly in .kici/workflows.
func IsWorkflowFile(p string) bool {
	dir, base := path.Split(p)
	ext := path.Ext(base)
	return path.Clean(dir) == WorkflowsDir && (ext == ".yml" || ext == ".yaml") && !strings.HasPrefix(base, ".")
}

// CompileDir compiles every workflow file of the repository rooted at dir.
// Errors name files as dir-joined paths, so they can be opened from where
// the caller stands.
func CompileDir(dir string) (*Plan, error) {
	wdir := filepath.Join(dir, filepath.FromSlash(WorkflowsDir))
	entries, err := os.ReadDir(wdir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", wdir, ErrNoWorkflows)
	}
	if err != nil {
		return nil, fmt.Errorf("read workflows: %w", err)
	}
	var files []File
	count := 0
	for _, e := range entries {
		if rel := WorkflowsDir + "/" + e.Name(); !e.IsDir() && IsWorkflowFile(rel) {
			count++
		}
	}
	if err := CheckFileCount(count); err != nil {
		return nil, fmt.Errorf("%s: %w", wdir, err)
	}
	for _, e := range entries {
		rel := WorkflowsDir + "/" + e.Name()
		if e.IsDir() || !IsWorkflowFile(rel) {
			continue
		}
		full := filepath.Join(wdir, e.Name())
		if info, err := e.Info(); err == nil && info.Size() > maxFileBytes {
			return nil, fmt.Errorf("%s: file is %d bytes, over the limit of %d", full, info.Size(), maxFileBytes)
		}
		data, err := os.ReadFile(full)
		if err != nil {
			return nil, fmt.Errorf("read workflow: %w", err)
		}
		files = append(files, File{Path: rel, Display: full, Data: data})
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: %w (expected *.yml or *.yaml files)", wdir, ErrNoWorkflows)
	}
	return Compile(files)
}

// DefaultMaxJobsPerRun is the most jobs one workflow may have, its
// matrix expansions included, unless Options say otherwise; it is the
// default of the orchestrator's KICI_MAX_JOBS_PER_RUN.
const DefaultMaxJobsPerRun = 1000

// MaxFiles is the most workflow files a repository may hold in
// WorkflowsDir. Every push reads and compiles all of them.
const MaxFiles = 100

// ErrTooManyFiles is returned (wrapped, with the count) for a repository
// of more than MaxFiles workflow files.
var ErrTooManyFiles = fmt.Errorf("more than %d workflow files in %s", MaxFiles, WorkflowsDir)

// Options tune Compile. The zero value is the defaults.
type Options struct {
	// MaxJobsPerRun is the most jobs one workflow may expand to, matrix
	// included; 0 means DefaultMaxJobsPerRun.
	MaxJobsPerRun int
}

func (o Options) maxJobs() int {
	if o.MaxJobsPerRun <= 0 {
		return DefaultMaxJobsPerRun
	}
	return o.MaxJobsPerRun
}

// CheckFileCount refuses a repository of more than MaxFiles workflow files.
func CheckFileCount(n int) error {
	if n > MaxFiles {
		return fmt.Errorf("%d files: %w", n, ErrTooManyFiles)
	}
	return nil
}

// CheckJobCount refuses a workflow of more than max jobs (0 means
// DefaultMaxJobsPerRun), for plans that did not come out of Compile with
// the same limit: a committed lock file, a rerun.
func CheckJobCount(wf *Workflow, max int) error {
	limit := Options{MaxJobsPerRun: max}.maxJobs()
	if len(wf.Jobs) > limit {
		return fmt.Errorf("workflow %q has %d jobs, over the limit of %d jobs per run", wf.Name, len(wf.Jobs), limit)
	}
	return nil
}

// Compile checks and compiles workflow files into a plan with the default
// Options. On any problem it returns a nil plan and an ErrorList holding
// every problem of every file.
func Compile(files []File) (*Plan, error) {
	return CompileWith(files, Options{})
}

// CompileWith is Compile with opts. More than MaxFiles files give an
// error wrapping ErrTooManyFiles, before any file is read.
func CompileWith(files []File, opts Options) (*Plan, error) {
	plan, errs, err := CompileValid(files, opts)
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return plan, nil
}

// CompileValid is CompileWith that keeps going past invalid files: it
// returns the plan of the valid workflows (possibly none) and the problems
// of the invalid ones, sorted; one bad file does not stop its siblings. err
// is only for what stops every file (too many of them).
func CompileValid(files []File, opts Options) (*Plan, ErrorList, error) {
	if err := CheckFileCount(len(files)); err != nil {
		return nil, nil, err
	}
	sorted := append([]File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	plan := &Plan{SchemaVersion: SchemaVersion, Workflows: []Workflow{}}
	var all ErrorList
	names := map[string]string{}
	for _, f := range sorted {
		display := f.Display
		if display == "" {
			display = f.Path
		}
		p := &fileParser{file: display, maxJobs: opts.maxJobs()}
		base := strings.TrimSuffix(path.Base(f.Path), path.Ext(f.Path))
		raw := p.parseFile(f.Data, base)
		var wf *Workflow
		if raw != nil {
			wf = p.build(raw, f)
		}
		if raw != nil {
			if prev, dup := names[raw.name]; dup {
				p.errorf(raw.nameN, "workflow name %q is already used by %s", raw.name, prev)
			} else {
				names[raw.name] = display
			}
		}
		if len(p.errs) > 0 {
			all = append(all, dedupe(p.errs)...)
			continue
		}
		plan.Workflows = append(plan.Workflows, *wf)
	}
	all.sort()
	return plan, all, nil
}

func dedupe(errs ErrorList) ErrorList {
	seen := map[Error]bool{}
	out := errs[:0]
	for _, e := range errs {
		if seen[*e] {
			continue
		}
		seen[*e] = true
		out = append(out, e)
	}
	return out
}

// ContentHash identifies a workflow source: hex SHA-256 of the schema
// version, a colon, and the text with CRLF line ends turned into LF.
func ContentHash(src []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d:", SchemaVersion)
	h.Write(bytes.ReplaceAll(src, []byte("\r\n"), []byte("\n")))
	return hex.EncodeToString(h.Sum(nil))
}

// build checks the cross-references of a parsed file and produces the
// compiled workflow.
func (p *fileParser) build(raw *rawWorkflow, f File) *Workflow {
	wf := &Workflow{Name: raw.name, File: f.Path, ContentHash: ContentHash(f.Data), Triggers: raw.triggers}
	if wf.Triggers == nil {
		wf.Triggers = []Trigger{}
	}
	p.checkInputVars(raw)

	wfEnv := p.buildEnv(raw.env, nil, nil, raw.inputs, "env")
	if len(wfEnv) > 0 {
		wf.Env = wfEnv
	}
	if raw.concurrency != nil {
		c := *raw.concurrency
		g, problems := interpolate(c.Group, interpScope{env: wfEnv, inputs: raw.inputs}, modeDeferred)
		for _, m := range problems {
			p.errorf(raw.concurrencyN, "concurrency: %s", m)
		}
		c.Group = g
		wf.Concurrency = &c
	}

	byName := map[string]*rawJob{}
	for _, j := range raw.jobs {
		byName[j.name] = j
	}
	p.checkNeeds(raw.jobs, byName)
	p.checkCycles(raw.jobs, byName)

	// Expand every job first: needs refer to the upstream's expansions.
	combos := map[string][]map[string]string{}
	total := 0
	for _, j := range raw.jobs {
		combos[j.name] = p.expandMatrix(j)
		total += len(combos[j.name])
	}
	if total > p.maxJobs {
		p.errorf(raw.jobsN, "workflow %q expands to %d jobs (matrix included), over the limit of %d jobs per run", raw.name, total, p.maxJobs)
		return wf
	}
	for _, j := range raw.jobs {
		wf.Jobs = append(wf.Jobs, p.buildJob(j, combos, wfEnv, raw)...)
	}
	if wf.Jobs == nil {
		wf.Jobs = []Job{}
	}
	return wf
}

// checkInputVars refuses two inputs whose environment variables collide
// (target-env and target_env both become KICI_INPUT_TARGET_ENV).
func (p *fileParser) checkInputVars(raw *rawWorkflow) {
	seen := map[string]string{}
	for _, name := range setKeys(raw.inputs) {
		v := runtimeVar("inputs", name)
		if other, ok := seen[v]; ok {
			p.errorf(nil, "inputs %q and %q would both be passed as %s; rename one", other, name, v)
		}
		seen[v] = name
	}
}

// buildEnv interpolates an env map. Each value sees the outer variables and
// the ones defined before it in the same map.
func (p *fileParser) buildEnv(entries []envEntry, outer, matrix map[string]string, inputs map[string]bool, what string) map[string]string {
	visible := make(map[string]string, len(outer)+len(entries))
	for k, v := range outer {
		visible[k] = v
	}
	own := make(map[string]string, len(entries))
	for _, e := range entries {
		v, problems := interpolate(e.value, interpScope{matrix: matrix, env: visible, inputs: inputs}, modeDeferred)
		for _, m := range problems {
			p.errorf(e.n, "%s.%s: %s", what, e.key, m)
		}
		visible[e.key] = v
		own[e.key] = v
	}
	return own
}

func (p *fileParser) checkNeeds(jobs []*rawJob, byName map[string]*rawJob) {
	names := make([]string, 0, len(jobs))
	for _, j := range jobs {
		names = append(names, j.name)
	}
	for _, j := range jobs {
		seen := map[string]bool{}
		for _, n := range j.needs {
			switch {
			case n.job == j.name:
				p.errorf(n.n, "jobs.%s.needs: a job cannot need itself", j.name)
			case byName[n.job] == nil:
				hint := ""
				if c := closest(n.job, names); c != "" {
					hint = fmt.Sprintf(" (did you mean %q?)", c)
				}
				p.errorf(n.n, "jobs.%s.needs: unknown job %q%s", j.name, n.job, hint)
			case seen[n.job]:
				p.errorf(n.n, "jobs.%s.needs: %q is listed twice", j.name, n.job)
			}
			seen[n.job] = true
		}
	}
}

// checkCycles reports each needs cycle once, naming every job on it.
func (p *fileParser) checkCycles(jobs []*rawJob, byName map[string]*rawJob) {
	const (
		unvisited = iota
		active
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(j *rawJob)
	visit = func(j *rawJob) {
		state[j.name] = active
		stack = append(stack, j.name)
		for _, n := range j.needs {
			up := byName[n.job]
			if up == nil || up == j {
				continue
			}
			switch state[up.name] {
			case unvisited:
				visit(up)
			case active:
				start := 0
				for i, s := range stack {
					if s == up.name {
						start = i
					}
				}
				cycle := append(append([]string(nil), stack[start:]...), up.name)
				p.errorf(n.n, "jobs.%s.needs: cycle: %s", j.name, strings.Join(cycle, " -> "))
			}
		}
		stack = stack[:len(stack)-1]
		state[j.name] = done
	}
	for _, j := range jobs {
		if state[j.name] == unvisited {
			visit(j)
		}
	}
}

// expandMatrix returns the job's combinations: one nil map without a
// matrix. Dimensions multiply in file order; exclude entries drop every
// combination that agrees with all their keys; an include entry that sets
// every dimension to an existing combination's values adds its other keys
// to that combination, and any other include entry is a combination of its
// own.
func (p *fileParser) expandMatrix(j *rawJob) []map[string]string {
	m := j.matrix
	if m == nil {
		return []map[string]string{nil}
	}
	what := "jobs." + j.name + ".matrix"
	total := 1
	for _, d := range m.dims {
		total *= len(d.values)
		if total > maxMatrixCombinations {
			p.errorf(m.n, "%s: expands to more than %d combinations", what, maxMatrixCombinations)
			return []map[string]string{nil}
		}
	}
	var combos []map[string]string
	if len(m.dims) > 0 {
		combos = []map[string]string{{}}
		for _, d := range m.dims {
			next := make([]map[string]string, 0, len(combos)*len(d.values))
			for _, c := range combos {
				for _, v := range d.values {
					n := make(map[string]string, len(c)+1)
					for k, cv := range c {
						n[k] = cv
					}
					n[d.name] = v
					next = append(next, n)
				}
			}
			combos = next
		}
	}
	dims := map[string]bool{}
	for _, d := range m.dims {
		dims[d.name] = true
	}
	before := len(combos)
	for _, ex := range m.exclude {
		for k := range ex.values {
			if !dims[k] {
				p.errorf(ex.n, "%s.exclude: %q is not a dimension of this matrix", what, k)
			}
		}
		if len(ex.values) == 0 {
			continue
		}
		kept := combos[:0]
		for _, c := range combos {
			if !agrees(c, ex.values) {
				kept = append(kept, c)
			}
		}
		combos = kept
	}
	for _, in := range m.include {
		if len(in.values) == 0 {
			p.errorf(in.n, "%s.include: an include entry needs at least one key", what)
			continue
		}
		merged := false
		if setsAll(in.values, dims) {
			for _, c := range combos {
				if agreesOn(c, in.values, dims) {
					for k, v := range in.values {
						c[k] = v
					}
					merged = true
				}
			}
		}
		if !merged {
			c := make(map[string]string, len(in.values))
			for k, v := range in.values {
				c[k] = v
			}
			combos = append(combos, c)
		}
	}
	// Two include entries may produce the same combination; keep one.
	seen := map[string]bool{}
	uniq := combos[:0]
	for _, c := range combos {
		key := comboLabel(c)
		if seen[key] {
			continue
		}
		seen[key] = true
		uniq = append(uniq, c)
	}
	if len(uniq) > maxMatrixCombinations {
		p.errorf(m.n, "%s: expands to %d combinations, over the limit of %d", what, len(uniq), maxMatrixCombinations)
		return []map[string]string{nil}
	}
	if len(uniq) == 0 {
		if before > 0 {
			p.errorf(m.n, "%s: every combination is excluded", what)
		}
		return []map[string]string{nil}
	}
	return uniq
}

func agrees(c, want map[string]string) bool {
	for k, v := range want {
		if c[k] != v {
			return false
		}
	}
	return true
}

func setsAll(values map[string]string, dims map[string]bool) bool {
	if len(dims) == 0 {
		return false
	}
	for d := range dims {
		if _, ok := values[d]; !ok {
			return false
		}
	}
	return true
}

func agreesOn(c, values map[string]string, dims map[string]bool) bool {
	for d := range dims {
		if c[d] != values[d] {
			return false
		}
	}
	return true
}

// comboLabel renders a combination as "k=v, k2=v2" in key order.
func comboLabel(c map[string]string) string {
	keys := mapKeys(c)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + c[k]
	}
	return strings.Join(parts, ", ")
}

// ExpandedName is the name of one matrix combination of a job.
func ExpandedName(base string, matrix map[string]string) string {
	if len(matrix) == 0 {
		return base
	}
	return base + " (" + comboLabel(matrix) + ")"
}

// needsOn maps a needs condition to the upstream statuses it accepts.
func needsOn(when string) []string {
	switch when {
	case WhenFailure:
		return []string{NeedFailure}
	case WhenAlways:
		return []string{NeedSuccess, NeedFailure, NeedCancelled, NeedSkipped}
	case WhenSkipped:
		return []string{NeedSuccess, NeedSkipped}
	}
	return []string{NeedSuccess}
}

// posixShells may expand the ${VAR} references that event and input
// interpolations in run scripts become.
var posixShells = map[string]bool{"bash": true, "sh": true, "dash": true, "zsh": true, "ksh": true, "ash": true}

func (p *fileParser) buildJob(j *rawJob, combos map[string][]map[string]string, wfEnv map[string]string, raw *rawWorkflow) []Job {
	what := "jobs." + j.name

	// Checks that do not depend on the combination run once.
	matrixKeys := map[string]string{}
	for _, c := range combos[j.name] {
		for k, v := range c {
			matrixKeys[k] = v
		}
	}
	jobEnvKeys := map[string]bool{}
	for k := range wfEnv {
		jobEnvKeys[k] = true
	}
	for _, e := range j.env {
		jobEnvKeys[e.key] = true
	}
	needSet := map[string]bool{}
	for _, n := range j.needs {
		needSet[n.job] = true
	}
	if j.ifN != nil {
		for _, m := range checkIf(p.exprConfig(), j.ifExpr, ifScope{matrix: matrixKeys, env: jobEnvKeys, inputs: raw.inputs, needs: needSet}) {
			p.errorf(j.ifN, "%s.if: %s", what, m)
		}
	}
	for i, s := range j.steps {
		if s.ifN == nil {
			continue
		}
		stepEnv := map[string]bool{}
		for k := range jobEnvKeys {
			stepEnv[k] = true
		}
		for _, e := range s.env {
			stepEnv[e.key] = true
		}
		for _, m := range checkIf(p.exprConfig(), s.ifExpr, ifScope{matrix: matrixKeys, env: stepEnv, inputs: raw.inputs}) {
			p.errorf(s.ifN, "%s.steps[%d].if: %s", what, i, m)
		}
	}

	var needs []Need
	for _, n := range j.needs {
		for _, c := range combos[n.job] {
			needs = append(needs, Need{Job: ExpandedName(n.job, c), On: needsOn(n.when)})
		}
	}

	out := make([]Job, 0, len(combos[j.name]))
	for _, c := range combos[j.name] {
		jobEnv := p.buildEnv(j.env, wfEnv, c, raw.inputs, what+".env")
		merged := make(map[string]string, len(wfEnv)+len(jobEnv))
		for k, v := range wfEnv {
			merged[k] = v
		}
		for k, v := range jobEnv {
			merged[k] = v
		}
		job := Job{
			Name:            ExpandedName(j.name, c),
			Base:            j.name,
			Matrix:          c,
			RunsOn:          []string{},
			Needs:           needs,
			If:              strings.TrimSpace(j.ifExpr),
			TimeoutMS:       j.timeoutMS,
			ContinueOnError: j.continueOnError,
			Secrets:         j.secrets,
		}
		if len(merged) > 0 {
			job.Env = merged
		}
		for _, l := range j.runsOn {
			v, problems := interpolate(l, interpScope{matrix: c, env: merged}, modeStatic)
			for _, m := range problems {
				p.errorf(j.runsOnN, "%s.runs-on: %s", what, m)
			}
			if len(problems) == 0 && (strings.TrimSpace(v) == "" || strings.ContainsAny(v, ", \t\n")) {
				p.errorf(j.runsOnN, "%s.runs-on: invalid label %q: labels are non-empty and hold no spaces or commas", what, v)
			}
			if strings.HasPrefix(v, "kici:") && !strings.HasPrefix(v, "kici:os:") && !strings.HasPrefix(v, "kici:arch:") && !strings.HasPrefix(v, "kici:scaler:") {
				p.errorf(j.runsOnN, "%s.runs-on: label %q: the kici: prefix is reserved (kici:os:*, kici:arch:* and kici:scaler:* can be asked for)", what, v)
			}
			if !containsStr(job.RunsOn, v) {
				job.RunsOn = append(job.RunsOn, v)
			}
		}
		p.buildFeatures(&job, j, c, merged, raw.inputs, what)
		for i, s := range j.steps {
			job.Steps = append(job.Steps, p.buildStep(s, fmt.Sprintf("%s.steps[%d]", what, i), c, merged, raw.inputs))
		}
		if job.Steps == nil {
			job.Steps = []Step{}
		}
		out = append(out, job)
	}
	return out
}

func (p *fileParser) buildStep(s *rawStep, what string, matrix, jobEnv map[string]string, inputs map[string]bool) Step {
	stepEnv := p.buildEnv(s.env, jobEnv, matrix, inputs, what+".env")
	visible := make(map[string]string, len(jobEnv)+len(stepEnv))
	for k, v := range jobEnv {
		visible[k] = v
	}
	for k, v := range stepEnv {
		visible[k] = v
	}
	sc := interpScope{matrix: matrix, env: visible, inputs: inputs}
	st := Step{
		Shell:           strings.TrimSpace(s.shell),
		TimeoutMS:       s.timeoutMS,
		If:              strings.TrimSpace(s.ifExpr),
		ContinueOnError: s.continueOnError,
	}
	if len(stepEnv) > 0 {
		st.Env = stepEnv
	}
	var problems []string
	st.Name, problems = interpolate(s.name, sc, modeDeferred)
	for _, m := range problems {
		p.errorf(s.nameN, "%s.name: %s", what, m)
	}
	st.Run, problems = interpolate(s.run, sc, modeRun)
	for _, m := range problems {
		p.errorf(s.runN, "%s.run: %s", what, m)
	}
	if st.Shell != "" && st.Run != s.run && strings.Contains(st.Run, "${KICI_") {
		if sh := filepath.Base(strings.Fields(st.Shell)[0]); !posixShells[sh] {
			p.errorf(s.shellN, "%s.shell: %q cannot expand event or input references in run; read them from the environment (KICI_EVENT_*, KICI_INPUT_*) instead", what, st.Shell)
		}
	}
	st.WorkingDirectory, problems = interpolate(s.workDir, sc, modeDeferred)
	for _, m := range problems {
		p.errorf(s.workDirN, "%s.working-directory: %s", what, m)
	}
	if s.workDirN != nil {
		if wd := s.workDir; wd == "" || path.IsAbs(wd) || wd == ".." || strings.HasPrefix(wd, "../") || strings.Contains(wd, "/../") {
			p.errorf(s.workDirN, "%s.working-directory: %q must be a relative path inside the checkout", what, wd)
		}
	}
	return st
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
