package workflow

import (
	"fmt"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"go.yaml.in/yaml/v3"
)

// The raw* types hold what one file says, with the YAML nodes that later
// checks point their errors at. They never leave this package.

type rawWorkflow struct {
	name     string
	nameN    *yaml.Node
	triggers []Trigger
	// inputs are the inputs declared by the manual triggers.
	inputs map[string]bool
	env    []envEntry
	jobs   []*rawJob
	// jobCount is how many jobs the file declares, and jobsN its "jobs"
	// node; past the limit the jobs are not read.
	jobCount int
	jobsN    *yaml.Node
	// concurrency is the workflow-level group.
	concurrency  *Concurrency
	concurrencyN *yaml.Node
}

type envEntry struct {
	key   string
	value string
	n     *yaml.Node
}

type rawNeed struct {
	job  string
	when string
	n    *yaml.Node
}

type rawJob struct {
	name            string
	keyN            *yaml.Node
	runsOn          []string
	runsOnN         *yaml.Node
	needs           []rawNeed
	needsN          *yaml.Node
	ifExpr          string
	ifN             *yaml.Node
	matrix          *rawMatrix
	env             []envEntry
	timeoutMS       int64
	continueOnError bool
	secrets         []string
	steps           []*rawStep
	concurrency     *Concurrency
	concurrencyN    *yaml.Node
	retry           *Retry
	environment     string
	image           *Container
	imageN          *yaml.Node
	services        []rawService
	caches          []rawCache
	artifacts       *Artifacts
}

type rawStep struct {
	name            string
	nameN           *yaml.Node
	run             string
	runN            *yaml.Node
	shell           string
	shellN          *yaml.Node
	workDir         string
	workDirN        *yaml.Node
	env             []envEntry
	timeoutMS       int64
	ifExpr          string
	ifN             *yaml.Node
	continueOnError bool
}

type matrixDim struct {
	name   string
	values []string
	n      *yaml.Node
}

type rawMatrix struct {
	failFast    bool
	maxParallel int
	n           *yaml.Node
	dims        []matrixDim
	include     []matrixEntry
	exclude     []matrixEntry
}

type matrixEntry struct {
	values map[string]string
	n      *yaml.Node
}

// parseFile reads one workflow document. It returns nil when the file is
// too broken to look further; the problems are in p.errs either way.
func (p *fileParser) parseFile(src []byte, defaultName string) *rawWorkflow {
	if len(src) > maxFileBytes {
		p.errorf(nil, "file is %d bytes, over the limit of %d", len(src), maxFileBytes)
		return nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		p.yamlError(err)
		return nil
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		p.errorf(nil, "file is empty: a workflow needs \"on\" and \"jobs\"")
		return nil
	}
	if !p.checkAliases(&doc) {
		return nil
	}
	root := resolve(doc.Content[0])
	pairs, ok := p.mapping(root, "workflow")
	if !ok {
		return nil
	}
	p.checkKeys(pairs, "workflow", "name", "on", "env", "jobs", "concurrency")
	wf := &rawWorkflow{name: defaultName, inputs: map[string]bool{}}
	var haveOn, haveJobs bool
	for _, kv := range pairs {
		switch kv.key {
		case "name":
			if s, ok := p.str(kv.value, "name"); ok {
				wf.name, wf.nameN = strings.TrimSpace(s), kv.value
				if wf.name == "" || len(wf.name) > maxNameLen || strings.ContainsAny(wf.name, "\n\r") {
					p.errorf(kv.value, "name: must be one line of 1 to %d characters", maxNameLen)
				}
			}
		case "on":
			haveOn = true
			p.parseOn(kv.value, wf)
		case "env":
			wf.env = p.parseEnv(kv.value, "env")
		case "jobs":
			haveJobs = true
			p.parseJobs(kv.value, wf)
		case "concurrency":
			wf.concurrency, wf.concurrencyN = p.parseConcurrency(kv.value, "concurrency")
		}
	}
	if !haveOn {
		p.errorf(root, "missing \"on\": a workflow needs at least one trigger (use \"manual: {}\" for one run by hand)")
	}
	if !haveJobs {
		p.errorf(root, "missing \"jobs\": a workflow needs at least one job")
	}
	if wf.jobCount > p.maxJobs {
		p.errorf(wf.jobsN, "workflow %q has %d jobs, over the limit of %d jobs per run", wf.name, wf.jobCount, p.maxJobs)
		return nil
	}
	return wf
}

// yamlError turns a parser error into positioned errors. go-yaml reports
// "yaml: line N: ..." without a column.
func (p *fileParser) yamlError(err error) {
	msgs := []string{err.Error()}
	if te, ok := err.(*yaml.TypeError); ok {
		msgs = te.Errors
	}
	for _, m := range msgs {
		m = strings.TrimPrefix(m, "yaml: ")
		line := 1
		if strings.HasPrefix(m, "line ") {
			var n int
			if _, scanErr := fmt.Sscanf(m, "line %d:", &n); scanErr == nil && n > 0 {
				line = n
				m = strings.TrimSpace(m[strings.Index(m, ":")+1:])
			}
		}
		p.errs = append(p.errs, &Error{File: p.file, Line: line, Col: 1, Msg: "invalid YAML: " + m})
	}
}

var triggerKeys = []string{TriggerPush, TriggerTag, TriggerPullRequest, TriggerManual, TriggerSchedule}

func (p *fileParser) parseOn(n *yaml.Node, wf *rawWorkflow) {
	pairs, ok := p.mapping(n, "on")
	if !ok {
		return
	}
	if len(pairs) == 0 {
		p.errorf(n, "on: no triggers given; known triggers: %s", strings.Join(triggerKeys, ", "))
	}
	p.checkKeys(pairs, "on", triggerKeys...)
	for _, kv := range pairs {
		what := "on." + kv.key
		switch kv.key {
		case TriggerPush:
			t := Trigger{Type: TriggerPush}
			fields, _ := p.mapping(kv.value, what)
			p.checkKeys(fields, what, "branches", "branches-ignore", "paths")
			for _, f := range fields {
				switch f.key {
				case "branches":
					t.Branches = p.globs(f.value, what+".branches", false)
				case "branches-ignore":
					t.BranchesIgnore = p.globs(f.value, what+".branches-ignore", false)
				case "paths":
					t.Paths = p.globs(f.value, what+".paths", true)
				}
			}
			wf.triggers = append(wf.triggers, t)
		case TriggerTag:
			t := Trigger{Type: TriggerTag}
			fields, _ := p.mapping(kv.value, what)
			p.checkKeys(fields, what, "tags")
			for _, f := range fields {
				t.Tags = p.globs(f.value, what+".tags", false)
			}
			wf.triggers = append(wf.triggers, t)
		case TriggerPullRequest:
			t := Trigger{Type: TriggerPullRequest}
			fields, _ := p.mapping(kv.value, what)
			p.checkKeys(fields, what, "branches", "types", "paths")
			for _, f := range fields {
				switch f.key {
				case "branches":
					t.Branches = p.globs(f.value, what+".branches", false)
				case "paths":
					t.Paths = p.globs(f.value, what+".paths", true)
				case "types":
					t.Types = p.prTypes(f.value, what+".types")
				}
			}
			wf.triggers = append(wf.triggers, t)
		case TriggerManual:
			t := Trigger{Type: TriggerManual}
			fields, _ := p.mapping(kv.value, what)
			p.checkKeys(fields, what, "inputs")
			for _, f := range fields {
				t.Inputs = p.parseInputs(f.value, what+".inputs", wf)
			}
			wf.triggers = append(wf.triggers, t)
		case TriggerSchedule:
			wf.triggers = append(wf.triggers, p.parseSchedule(kv.value, what)...)
		}
	}
}

// globs reads a pattern list and checks each pattern's syntax. With
// negation, a leading "!" marks an exclusion.
func (p *fileParser) globs(n *yaml.Node, what string, negation bool) []string {
	list, _ := p.strList(n, what)
	items := resolve(n).Content
	for i, g := range list {
		at := n
		if i < len(items) {
			at = items[i]
		}
		pat := g
		if negation {
			pat = strings.TrimPrefix(g, "!")
		} else if strings.HasPrefix(g, "!") {
			p.errorf(at, "%s: %q: \"!\" exclusions are not supported here; use branches-ignore", what, g)
			continue
		}
		if pat == "" {
			p.errorf(at, "%s: empty pattern", what)
			continue
		}
		if !doublestar.ValidatePattern(pat) {
			p.errorf(at, "%s: invalid glob %q", what, g)
		}
	}
	return list
}

// PullRequestActions are the pull-request actions a trigger may list.
var PullRequestActions = []string{"opened", "synchronize", "reopened", "closed", "edited", "ready_for_review", "labeled", "unlabeled"}

func (p *fileParser) prTypes(n *yaml.Node, what string) []string {
	list, _ := p.strList(n, what)
	items := resolve(n).Content
	for i, s := range list {
		known := false
		for _, a := range PullRequestActions {
			known = known || a == s
		}
		if !known {
			at := n
			if i < len(items) {
				at = items[i]
			}
			hint := ""
			if c := closest(s, PullRequestActions); c != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", c)
			}
			p.errorf(at, "%s: unknown pull request action %q%s; known: %s", what, s, hint, strings.Join(PullRequestActions, ", "))
		}
	}
	return list
}

var inputTypes = []string{InputString, InputBoolean, InputNumber, InputChoice}

func (p *fileParser) parseInputs(n *yaml.Node, what string, wf *rawWorkflow) []Input {
	pairs, ok := p.mapping(n, what)
	if !ok {
		return nil
	}
	out := make([]Input, 0, len(pairs))
	for _, kv := range pairs {
		iw := what + "." + kv.key
		if !nameRE.MatchString(kv.key) || len(kv.key) > maxNameLen {
			p.errorf(kv.keyN, "%s: invalid input name %q: use letters, digits, - and _, starting with a letter or _", what, kv.key)
			continue
		}
		in := Input{Name: kv.key, Type: InputString}
		fields, _ := p.mapping(kv.value, iw)
		p.checkKeys(fields, iw, "type", "description", "required", "default", "options")
		var defN, typeN *yaml.Node
		hasDefault := false
		for _, f := range fields {
			switch f.key {
			case "type":
				if s, ok := p.str(f.value, iw+".type"); ok {
					in.Type, typeN = s, f.value
				}
			case "description":
				in.Description, _ = p.str(f.value, iw+".description")
			case "required":
				in.Required, _ = p.boolean(f.value, iw+".required")
			case "default":
				in.Default, _ = p.scalar(f.value, iw+".default")
				defN, hasDefault = f.value, true
			case "options":
				in.Options, _ = p.strList(f.value, iw+".options")
			}
		}
		if typeN != nil {
			known := false
			for _, t := range inputTypes {
				known = known || t == in.Type
			}
			if !known {
				p.errorf(typeN, "%s.type: unknown input type %q; known: %s", iw, in.Type, strings.Join(inputTypes, ", "))
			}
		}
		if in.Type == InputChoice && len(in.Options) == 0 {
			p.errorf(kv.keyN, "%s: a choice input needs \"options\"", iw)
		}
		if in.Type != InputChoice && in.Options != nil {
			p.errorf(kv.keyN, "%s: \"options\" is only for inputs of type choice", iw)
		}
		if hasDefault {
			if err := CheckInputValue(in, in.Default); err != nil {
				p.errorf(defN, "%s.default: %v", iw, err)
			}
		}
		wf.inputs[in.Name] = true
		out = append(out, in)
	}
	return out
}

func (p *fileParser) parseSchedule(n *yaml.Node, what string) []Trigger {
	n = resolve(n)
	var entries []*yaml.Node
	switch n.Kind {
	case yaml.SequenceNode:
		entries = n.Content
	case yaml.MappingNode:
		entries = []*yaml.Node{n}
	default:
		p.errorf(n, "%s: expected a list of {cron: \"...\"}, got %s", what, kindName(n))
		return nil
	}
	if len(entries) == 0 {
		p.errorf(n, "%s: no cron entries", what)
	}
	var out []Trigger
	for _, e := range entries {
		fields, ok := p.mapping(e, what)
		if !ok {
			continue
		}
		p.checkKeys(fields, what, "cron")
		var spec string
		var specN *yaml.Node
		for _, f := range fields {
			spec, _ = p.str(f.value, what+".cron")
			specN = f.value
		}
		if specN == nil {
			p.errorf(e, "%s: missing \"cron\"", what)
			continue
		}
		if _, err := ParseCron(spec); err != nil {
			p.errorf(specN, "%s.cron: invalid cron spec %q: %v (expected five fields: minute hour day-of-month month day-of-week)", what, spec, err)
			continue
		}
		out = append(out, Trigger{Type: TriggerSchedule, Cron: spec})
	}
	return out
}

// parseEnv reads an env map in file order; values may be strings, numbers
// or booleans.
func (p *fileParser) parseEnv(n *yaml.Node, what string) []envEntry {
	pairs, ok := p.mapping(n, what)
	if !ok {
		return nil
	}
	out := make([]envEntry, 0, len(pairs))
	for _, kv := range pairs {
		if !envKeyRE.MatchString(kv.key) {
			p.errorf(kv.keyN, "%s: invalid variable name %q: use letters, digits and _, not starting with a digit", what, kv.key)
			continue
		}
		if strings.HasPrefix(strings.ToUpper(kv.key), "KICI_") {
			p.errorf(kv.keyN, "%s: %q: the KICI_ prefix is reserved for variables kici sets", what, kv.key)
			continue
		}
		v, ok := p.scalar(kv.value, what+"."+kv.key)
		if !ok {
			continue
		}
		out = append(out, envEntry{key: kv.key, value: v, n: kv.value})
	}
	return out
}

func (p *fileParser) parseJobs(n *yaml.Node, wf *rawWorkflow) {
	pairs, ok := p.mapping(n, "jobs")
	if !ok {
		return
	}
	if len(pairs) == 0 {
		p.errorf(n, "jobs: a workflow needs at least one job")
	}
	wf.jobCount, wf.jobsN = len(pairs), n
	if len(pairs) > p.maxJobs {
		return // parseFile reports it, with the workflow's name
	}
	for _, kv := range pairs {
		if !nameRE.MatchString(kv.key) || len(kv.key) > maxNameLen {
			p.errorf(kv.keyN, "jobs: invalid job name %q: use up to %d letters, digits, - and _, starting with a letter or _", kv.key, maxNameLen)
			continue
		}
		wf.jobs = append(wf.jobs, p.parseJob(kv))
	}
}

func (p *fileParser) parseJob(kv pair) *rawJob {
	j := &rawJob{name: kv.key, keyN: kv.keyN}
	what := "jobs." + kv.key
	fields, ok := p.mapping(kv.value, what)
	if !ok {
		return j
	}
	p.checkKeys(fields, what, "runs-on", "needs", "if", "matrix", "env", "timeout", "continue-on-error", "secrets", "steps",
		"concurrency", "retry", "environment", "image", "services", "cache", "artifacts")
	haveSteps := false
	for _, f := range fields {
		fw := what + "." + f.key
		switch f.key {
		case "runs-on":
			j.runsOn, _ = p.strList(f.value, fw)
			j.runsOnN = f.value
		case "needs":
			j.needs = p.parseNeeds(f.value, fw)
			j.needsN = f.value
		case "if":
			j.ifExpr, _ = p.scalar(f.value, fw)
			j.ifN = f.value
		case "matrix":
			j.matrix = p.parseMatrix(f.value, fw)
		case "env":
			j.env = p.parseEnv(f.value, fw)
		case "timeout":
			j.timeoutMS, _ = p.duration(f.value, fw)
		case "continue-on-error":
			j.continueOnError, _ = p.boolean(f.value, fw)
		case "secrets":
			list, _ := p.strList(f.value, fw)
			for _, s := range list {
				if !secretRE.MatchString(s) {
					p.errorf(f.value, "%s: invalid secret name %q: use upper-case letters, digits and _", fw, s)
					continue
				}
				j.secrets = append(j.secrets, s)
			}
		case "steps":
			haveSteps = true
			j.steps = p.parseSteps(f.value, fw)
		case "concurrency":
			j.concurrency, j.concurrencyN = p.parseConcurrency(f.value, fw)
		case "retry":
			j.retry = p.parseRetry(f.value, fw)
		case "environment":
			j.environment, _ = p.str(f.value, fw)
			if j.environment != "" && !ValidEnvironment(j.environment) {
				p.errorf(f.value, "%s: invalid environment name %q: use up to 64 letters, digits, _, . and -, starting with a letter or digit", fw, j.environment)
			}
		case "image":
			if c, _, ok := p.parseContainer(f.value, fw); ok {
				j.image, j.imageN = &c, f.value
			}
		case "services":
			j.services = p.parseServices(f.value, fw)
		case "cache":
			j.caches = p.parseCache(f.value, fw)
		case "artifacts":
			j.artifacts = p.parseArtifacts(f.value, fw)
		}
	}
	if !haveSteps {
		p.errorf(kv.keyN, "%s: a job needs at least one step", what)
	}
	return j
}

var needsConditions = []string{WhenSuccess, WhenFailure, WhenAlways, WhenSkipped}

func (p *fileParser) parseNeeds(n *yaml.Node, what string) []rawNeed {
	n = resolve(n)
	switch n.Kind {
	case yaml.ScalarNode, yaml.SequenceNode:
		list, _ := p.strList(n, what)
		out := make([]rawNeed, 0, len(list))
		for i, s := range list {
			at := n
			if n.Kind == yaml.SequenceNode {
				at = n.Content[i]
			}
			out = append(out, rawNeed{job: s, when: WhenSuccess, n: at})
		}
		return out
	case yaml.MappingNode:
		pairs, _ := p.mapping(n, what)
		out := make([]rawNeed, 0, len(pairs))
		for _, kv := range pairs {
			when, ok := p.str(kv.value, what+"."+kv.key)
			if !ok {
				continue
			}
			known := false
			for _, c := range needsConditions {
				known = known || c == when
			}
			if !known {
				p.errorf(kv.value, "%s.%s: unknown condition %q; expected one of %s", what, kv.key, when, strings.Join(needsConditions, ", "))
				continue
			}
			out = append(out, rawNeed{job: kv.key, when: when, n: kv.keyN})
		}
		return out
	}
	p.errorf(n, "%s: expected a list of job names or a map of job name to condition, got %s", what, kindName(n))
	return nil
}

// maxMatrixCombinations bounds the jobs one matrix may expand to.
const maxMatrixCombinations = 256

func (p *fileParser) parseMatrix(n *yaml.Node, what string) *rawMatrix {
	pairs, ok := p.mapping(n, what)
	if !ok {
		return nil
	}
	m := &rawMatrix{n: resolve(n)}
	for _, kv := range pairs {
		switch kv.key {
		case "fail-fast", "max-parallel":
			p.parseMatrixOption(m, kv, what)
		case "include", "exclude":
			entries := p.matrixEntries(kv.value, what+"."+kv.key)
			if kv.key == "include" {
				m.include = entries
			} else {
				m.exclude = entries
			}
		default:
			if !nameRE.MatchString(kv.key) {
				p.errorf(kv.keyN, "%s: invalid dimension name %q", what, kv.key)
				continue
			}
			v := resolve(kv.value)
			if v.Kind != yaml.SequenceNode {
				p.errorf(v, "%s.%s: expected a list of values, got %s", what, kv.key, kindName(v))
				continue
			}
			if len(v.Content) == 0 {
				p.errorf(v, "%s.%s: a dimension needs at least one value", what, kv.key)
				continue
			}
			d := matrixDim{name: kv.key, n: kv.keyN}
			seen := map[string]bool{}
			for _, c := range v.Content {
				s, ok := p.scalar(c, what+"."+kv.key)
				if !ok {
					continue
				}
				if seen[s] {
					p.errorf(c, "%s.%s: duplicate value %q", what, kv.key, s)
					continue
				}
				seen[s] = true
				d.values = append(d.values, s)
			}
			if len(d.values) > 0 {
				m.dims = append(m.dims, d)
			}
		}
	}
	if len(m.dims) == 0 && len(m.include) == 0 {
		p.errorf(n, "%s: a matrix needs at least one dimension or include entry", what)
		return nil
	}
	return m
}

func (p *fileParser) matrixEntries(n *yaml.Node, what string) []matrixEntry {
	n = resolve(n)
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, "%s: expected a list of mappings, got %s", what, kindName(n))
		return nil
	}
	var out []matrixEntry
	for _, e := range n.Content {
		pairs, ok := p.mapping(e, what)
		if !ok {
			continue
		}
		me := matrixEntry{values: map[string]string{}, n: resolve(e)}
		for _, kv := range pairs {
			if !nameRE.MatchString(kv.key) {
				p.errorf(kv.keyN, "%s: invalid dimension name %q", what, kv.key)
				continue
			}
			if s, ok := p.scalar(kv.value, what+"."+kv.key); ok {
				me.values[kv.key] = s
			}
		}
		out = append(out, me)
	}
	return out
}

func (p *fileParser) parseSteps(n *yaml.Node, what string) []*rawStep {
	n = resolve(n)
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, "%s: expected a list of steps, got %s", what, kindName(n))
		return nil
	}
	if len(n.Content) == 0 {
		p.errorf(n, "%s: a job needs at least one step", what)
	}
	out := make([]*rawStep, 0, len(n.Content))
	for i, sn := range n.Content {
		sw := fmt.Sprintf("%s[%d]", what, i)
		fields, ok := p.mapping(sn, sw)
		if !ok {
			continue
		}
		p.checkKeys(fields, sw, "name", "run", "shell", "working-directory", "env", "timeout", "if", "continue-on-error")
		s := &rawStep{name: fmt.Sprintf("step-%d", i+1)}
		for _, f := range fields {
			fw := sw + "." + f.key
			switch f.key {
			case "name":
				if v, ok := p.str(f.value, fw); ok {
					s.name, s.nameN = v, f.value
					if strings.TrimSpace(v) == "" || strings.ContainsAny(v, "\n\r") || len(v) > 200 {
						p.errorf(f.value, "%s: a step name is one line of 1 to 200 characters", fw)
					}
				}
			case "run":
				var ok bool
				s.run, ok = p.str(f.value, fw)
				s.runN = f.value
				if ok && strings.TrimSpace(s.run) == "" {
					p.errorf(f.value, "%s: empty script", fw)
				}
			case "shell":
				s.shell, _ = p.str(f.value, fw)
				s.shellN = f.value
				if strings.TrimSpace(s.shell) == "" {
					p.errorf(f.value, "%s: empty shell", fw)
				}
			case "working-directory":
				s.workDir, _ = p.str(f.value, fw)
				s.workDirN = f.value
			case "env":
				s.env = p.parseEnv(f.value, fw)
			case "timeout":
				s.timeoutMS, _ = p.duration(f.value, fw)
			case "if":
				s.ifExpr, _ = p.scalar(f.value, fw)
				s.ifN = f.value
			case "continue-on-error":
				s.continueOnError, _ = p.boolean(f.value, fw)
			}
		}
		if s.runN == nil {
			p.errorf(sn, "%s: missing \"run\": every step runs a shell script", sw)
		}
		out = append(out, s)
	}
	return out
}
