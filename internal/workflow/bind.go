package workflow

import (
	"maps"
)

// RuntimeEnv returns the variables that carry an event and the manual
// inputs into every step: KICI_EVENT_<FIELD> for each event field and
// KICI_INPUT_<NAME> for each input. Scripts read event data through these,
// never through text pasted into the script.
func RuntimeEnv(ev EventVars, inputs map[string]string) map[string]string {
	env := make(map[string]string, len(eventFields)+len(inputs))
	for _, f := range eventFields {
		env[runtimeVar("event", f)] = ev.field(f)
	}
	for k, v := range inputs {
		env[runtimeVar("inputs", k)] = v
	}
	return env
}

// Bind returns a copy of the job for one run: the event.* and inputs.*
// references left in env values, step names and working directories are
// replaced by the event's values, and RuntimeEnv is added to the job's
// environment. Values are inserted as they are, in a single pass, so an
// event value that itself looks like a reference stays literal text.
func (j Job) Bind(ev EventVars, inputs map[string]string) Job {
	fill := func(s string) string { return bindString(s, ev, inputs) }
	out := j
	out.Env = RuntimeEnv(ev, inputs)
	for k, v := range j.Env {
		out.Env[k] = fill(v)
	}
	if j.Concurrency != nil {
		c := *j.Concurrency
		c.Group = c.BindGroup(ev, inputs)
		out.Concurrency = &c
	}
	if len(j.Cache) > 0 {
		out.Cache = make([]Cache, len(j.Cache))
		for i, c := range j.Cache {
			c.Key = fill(c.Key)
			if c.RestoreKeys != nil {
				keys := make([]string, len(c.RestoreKeys))
				for k, rk := range c.RestoreKeys {
					keys[k] = fill(rk)
				}
				c.RestoreKeys = keys
			}
			out.Cache[i] = c
		}
	}
	out.Steps = make([]Step, len(j.Steps))
	for i, s := range j.Steps {
		s.Name = fill(s.Name)
		s.WorkingDirectory = fill(s.WorkingDirectory)
		if s.Env != nil {
			env := maps.Clone(s.Env)
			for k, v := range env {
				env[k] = fill(v)
			}
			s.Env = env
		}
		out.Steps[i] = s
	}
	return out
}

// DefaultInputs returns the default of every declared manual input, the
// values inputs.* take in runs started by other events.
func (wf *Workflow) DefaultInputs() map[string]string {
	out := map[string]string{}
	for _, t := range wf.Triggers {
		for _, in := range t.Inputs {
			if _, ok := out[in.Name]; !ok {
				out[in.Name] = in.Default
			}
		}
	}
	return out
}
