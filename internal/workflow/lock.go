package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrLockVersion is returned (wrapped) by ParseLock for a lock file written
// by a kici with another plan schema.
var ErrLockVersion = errors.New("lock file schema version mismatch")

// ParseLock reads a committed .kici/kici.lock.json. The schema version is
// checked before anything else, so a lock from another kici version is
// refused with a message that says how to regenerate it rather than being
// partly understood.
func ParseLock(data []byte) (*Plan, error) {
	var head struct {
		SchemaVersion *int `json:"schemaVersion"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("%s: not valid JSON: %w", LockPath, err)
	}
	if head.SchemaVersion == nil {
		return nil, fmt.Errorf("%s: missing \"schemaVersion\"; regenerate it with `kici compile > %s`", LockPath, LockPath)
	}
	if *head.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("%s: schema version %d, but this kici reads version %d; regenerate it with `kici compile > %s`: %w",
			LockPath, *head.SchemaVersion, SchemaVersion, LockPath, ErrLockVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var plan Plan
	if err := dec.Decode(&plan); err != nil {
		return nil, fmt.Errorf("%s: %w", LockPath, err)
	}
	if err := plan.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", LockPath, err)
	}
	return &plan, nil
}

// Check verifies the invariants the scheduler relies on, for a plan that
// did not come straight out of Compile (a committed lock file, a run row
// read back from the database): unique names, known needs, no cycles, a
// step in every job.
func (p *Plan) Check() error {
	names := map[string]bool{}
	for _, wf := range p.Workflows {
		if wf.Name == "" {
			return errors.New("a workflow has no name")
		}
		if names[wf.Name] {
			return fmt.Errorf("workflow %q appears twice", wf.Name)
		}
		names[wf.Name] = true
		if err := wf.Check(); err != nil {
			return err
		}
	}
	return nil
}

// Check verifies one workflow; see Plan.Check.
func (wf *Workflow) Check() error {
	if c := wf.Concurrency; c != nil && (strings.TrimSpace(c.Group) == "" || len(c.Group) > maxGroupLen) {
		return fmt.Errorf("workflow %q: concurrency group must have 1 to %d bytes", wf.Name, maxGroupLen)
	}
	jobs := make(map[string]*Job, len(wf.Jobs))
	for i := range wf.Jobs {
		j := &wf.Jobs[i]
		if j.Name == "" {
			return fmt.Errorf("workflow %q: a job has no name", wf.Name)
		}
		if jobs[j.Name] != nil {
			return fmt.Errorf("workflow %q: job %q appears twice", wf.Name, j.Name)
		}
		if len(j.Steps) == 0 {
			return fmt.Errorf("workflow %q: job %q has no steps", wf.Name, j.Name)
		}
		if err := j.checkFeatures(); err != nil {
			return fmt.Errorf("workflow %q: %w", wf.Name, err)
		}
		jobs[j.Name] = j
	}
	for _, j := range wf.Jobs {
		for _, n := range j.Needs {
			if jobs[n.Job] == nil {
				return fmt.Errorf("workflow %q: job %q needs unknown job %q", wf.Name, j.Name, n.Job)
			}
		}
	}
	// Kahn's algorithm: every job must be reachable in a topological order.
	indeg := make(map[string]int, len(jobs))
	down := make(map[string][]string, len(jobs))
	for _, j := range wf.Jobs {
		indeg[j.Name] += 0
		for _, n := range j.Needs {
			indeg[j.Name]++
			down[n.Job] = append(down[n.Job], j.Name)
		}
	}
	var ready []string
	for name, d := range indeg {
		if d == 0 {
			ready = append(ready, name)
		}
	}
	seen := 0
	for len(ready) > 0 {
		n := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		seen++
		for _, d := range down[n] {
			indeg[d]--
			if indeg[d] == 0 {
				ready = append(ready, d)
			}
		}
	}
	if seen != len(jobs) {
		return fmt.Errorf("workflow %q: the needs of its jobs form a cycle", wf.Name)
	}
	return nil
}

// Marshal renders a plan as indented JSON with a final newline, the form
// `kici compile` prints and a lock file holds.
func (p *Plan) Marshal() ([]byte, error) {
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode plan: %w", err)
	}
	return append(data, '\n'), nil
}
