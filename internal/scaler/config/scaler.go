package config

import (
	"math"
	"regexp"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kici-dev/kici/internal/scaler"
)

// rawScaler is one scaler entry as read, with the positions that checks
// spanning entries and files point their errors at.
type rawScaler struct {
	s    Scaler
	path string
	// at is the entry itself; keys holds where each key present was
	// written; nameAt is where the name's value was.
	at     pos
	keys   map[string]pos
	nameAt pos
	sets   []*rawLabelSet
}

// ident names the scaler in errors about it: by name when it has a valid
// one, else by file and path.
func (r *rawScaler) ident() string {
	if r.s.Name != "" {
		return `"` + r.s.Name + `"`
	}
	return r.path + " of " + r.at.file
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// containerKeys are the scaler keys only a container scaler may set.
var containerKeys = []string{"host", "socketPath", "runtime", "extraHosts", "networkIsolation"}

var scalerSchema = schema{
	known: append([]string{
		"name", "type", "maxAgents", "maxConcurrentSpawns", "orchestratorUrl",
		"labelSets", "mandatoryLabels", "warmPool", "resourceCap", "failJobsAfter",
	}, append(containerKeys, firecrackerKeys...)...),
	unsupported: map[string]string{
		"platform":             notYet + " (agents are labelled kici:os:linux)",
		"roles":                notYet,
		"machinePool":          notYet,
		"enforceCgroups":       notYet,
		"requireSudo":          notYet,
		"provisioningTargets":  notYet + " (there is no event backend)",
		"claimTtlSeconds":      notYet + " (there is no event backend)",
		"agentTokenTtlSeconds": notYet + " (there is no event backend)",
	},
}

// scaler reads one scaler entry. It returns nil when the entry is not even
// a mapping.
func (p *parser) scaler(n *yaml.Node, path string) *rawScaler {
	n = resolve(n)
	if isNull(n) {
		p.errorf(n, path, "expected a scaler (a mapping with name, type, maxAgents and labelSets), got nothing")
		return nil
	}
	pairs, ok := p.mapping(n, path)
	if !ok {
		return nil
	}
	r := &rawScaler{path: path, at: p.at(n), keys: map[string]pos{}}
	r.s.MaxConcurrentSpawns = DefaultMaxConcurrentSpawns
	r.s.FailJobsAfter = DefaultFailJobsAfter
	r.s.WarmPool.IdleTimeout = DefaultWarmPoolIdleTimeout
	var setsN *yaml.Node
	warmSize := -1
	var warmSizeN *yaml.Node
	for _, kv := range p.check(pairs, path, scalerSchema) {
		r.keys[kv.key] = p.at(kv.keyN)
		what := join(path, kv.key)
		switch kv.key {
		case "name":
			if s, ok := p.str(kv.value, what); ok {
				if nameRE.MatchString(s) {
					r.s.Name, r.nameAt = s, p.at(resolve(kv.value))
				} else {
					p.errorf(kv.value, what, "invalid name %q: use 1 to 63 lower-case letters, digits and dashes, starting with a letter or digit", s)
				}
			}
		case "type":
			r.s.Type = p.scalerType(kv.value, what)
		case "maxAgents":
			r.s.MaxAgents, _ = p.integer(kv.value, what, 1, maxCount)
		case "maxConcurrentSpawns":
			if v, ok := p.integer(kv.value, what, 1, maxCount); ok {
				r.s.MaxConcurrentSpawns = v
			}
		case "orchestratorUrl":
			if s, ok := p.str(kv.value, what); ok {
				if msg := checkOrchestratorURL(s); msg != "" {
					p.errorf(kv.value, what, "%s", msg)
				} else {
					r.s.OrchestratorURL = s
				}
			}
		case "labelSets":
			setsN = kv.value
		case "mandatoryLabels":
			r.s.MandatoryLabels, _ = p.labels(kv.value, what, false)
		case "warmPool":
			warmSize, warmSizeN = p.warmPool(kv.value, what, &r.s.WarmPool)
		case "resourceCap":
			p.resourceCap(kv.value, what, &r.s.ResourceCap)
		case "failJobsAfter":
			if v, ok := p.integer(kv.value, what, 0, maxCount); ok {
				r.s.FailJobsAfter = v
			}
		case "firecrackerPath", "jailerPath", "kernelPath", "uid", "gid", "chrootBaseDir", "vcpuCount", "memSizeMib":
			p.firecrackerKey(kv, what, &r.s.Firecracker)
		default:
			p.containerKey(kv, what, &r.s.Container)
		}
	}
	for _, k := range []string{"name", "type", "maxAgents", "labelSets"} {
		if _, ok := r.keys[k]; !ok {
			p.errorf(n, path, "missing required key %q", k)
		}
	}
	if setsN != nil {
		p.labelSets(setsN, join(path, "labelSets"), r)
	}
	onlyFor := func(keys []string, typ string) {
		for _, k := range keys {
			if at, ok := r.keys[k]; ok {
				p.errorAt(at, join(path, k), "only for type %q scalers", typ)
			}
		}
	}
	switch r.s.Type {
	case TypeContainer:
		if r.s.Container.Runtime == "" {
			r.s.Container.Runtime = RuntimeAuto
		}
		onlyFor(firecrackerKeys, TypeFirecracker)
		r.s.Firecracker = Firecracker{}
	case TypeBareMetal:
		onlyFor(containerKeys, TypeContainer)
		onlyFor(firecrackerKeys, TypeFirecracker)
		r.s.Container, r.s.Firecracker = Container{}, Firecracker{}
	case TypeFirecracker:
		onlyFor(containerKeys, TypeContainer)
		r.s.Container = Container{}
		p.checkFirecrackerScaler(r, n)
	}
	for _, set := range r.sets {
		p.checkLabelSetType(set, r.s.Type)
		r.s.LabelSets = append(r.s.LabelSets, set.ls)
		if !set.labelsOK {
			continue
		}
		for _, m := range r.s.MandatoryLabels {
			if !contains(set.ls.Labels, m) {
				p.errorAt(set.labelsAt, join(set.path, "labels"), "missing mandatory label %q: every label set must carry the scaler's mandatoryLabels, or no job could be routed to it", m)
			}
		}
	}
	if warmSize > r.s.MaxAgents && r.s.MaxAgents > 0 {
		p.errorf(warmSizeN, join(join(path, "warmPool"), "size"), "%d exceeds maxAgents (%d): the pool could never fill", warmSize, r.s.MaxAgents)
	}
	return r
}

func (p *parser) scalerType(n *yaml.Node, path string) string {
	s, ok := p.str(n, path)
	if !ok {
		return ""
	}
	switch s {
	case TypeBareMetal, TypeContainer, TypeFirecracker:
		return s
	case "event", "kubernetes":
		p.errorf(n, path, "type %q is not supported yet; use %q, %q or %q", s, TypeBareMetal, TypeContainer, TypeFirecracker)
	default:
		if c := closest(s, []string{TypeBareMetal, TypeContainer, TypeFirecracker}); c != "" {
			p.errorf(n, path, "unknown type %q (did you mean %q?)", s, c)
		} else {
			p.errorf(n, path, "unknown type %q: use %q, %q or %q", s, TypeBareMetal, TypeContainer, TypeFirecracker)
		}
	}
	return ""
}

// warmPool reads a warmPool block and returns its size (-1 when not given
// or bad) and the size's node, for the check against maxAgents.
func (p *parser) warmPool(n *yaml.Node, path string, w *WarmPool) (int, *yaml.Node) {
	pairs, _ := p.mapping(n, path)
	size, sizeN := -1, (*yaml.Node)(nil)
	for _, kv := range p.check(pairs, path, schema{known: []string{"enabled", "size", "idleTimeoutSeconds"}}) {
		what := join(path, kv.key)
		switch kv.key {
		case "enabled":
			w.Enabled, _ = p.boolean(kv.value, what)
		case "size":
			if v, ok := p.integer(kv.value, what, 0, maxCount); ok {
				w.Size, size, sizeN = v, v, kv.value
			}
		case "idleTimeoutSeconds":
			if v, ok := p.integer(kv.value, what, 1, int(maxIdleTimeout/time.Second)); ok {
				w.IdleTimeout = time.Duration(v) * time.Second
			}
		}
	}
	return size, sizeN
}

func (p *parser) resourceCap(n *yaml.Node, path string, c *ResourceCap) {
	pairs, _ := p.mapping(n, path)
	for _, kv := range p.check(pairs, path, schema{known: []string{"maxCpu", "maxMemory"}}) {
		what := join(path, kv.key)
		switch kv.key {
		case "maxCpu":
			c.MaxCPUs, _ = p.number(kv.value, what, math.MaxFloat64)
		case "maxMemory":
			c.MaxMemoryBytes, _ = p.memory(kv.value, what)
		}
	}
}

// containerKey reads one of the container-only keys; whether the scaler
// is a container scaler is checked once its type is known.
func (p *parser) containerKey(kv pair, path string, c *Container) {
	switch kv.key {
	case "host":
		if s, ok := p.str(kv.value, path); ok {
			if msg := checkDaemonHost(s); msg != "" {
				p.errorf(kv.value, path, "%s", msg)
			} else {
				c.Host = s
			}
		}
	case "socketPath":
		if s, ok := p.str(kv.value, path); ok {
			if msg := checkHostPath(s); msg != "" {
				p.errorf(kv.value, path, "%s", msg)
			} else {
				c.SocketPath = s
			}
		}
	case "runtime":
		if s, ok := p.str(kv.value, path); ok {
			if s == RuntimeAuto || s == RuntimeDocker || s == RuntimePodman {
				c.Runtime = s
			} else {
				p.errorf(kv.value, path, "unknown runtime %q: use %q, %q or %q", s, RuntimeAuto, RuntimeDocker, RuntimePodman)
			}
		}
	case "extraHosts":
		items, _ := p.list(kv.value, path)
		for i, item := range items {
			what := index(path, i)
			if s, ok := p.str(item, what); ok {
				if msg := checkExtraHost(s); msg != "" {
					p.errorf(item, what, "%s", msg)
				} else {
					c.ExtraHosts = append(c.ExtraHosts, s)
				}
			}
		}
	case "networkIsolation":
		if b, ok := p.boolean(kv.value, path); ok && b {
			p.errorf(kv.value, path, "network isolation is not implemented yet: set it to false or leave it out")
		}
	}
	if c.Host != "" && c.SocketPath != "" && (kv.key == "host" || kv.key == "socketPath") {
		p.errorf(kv.keyN, path, "set host (a remote daemon) or socketPath (a local one), not both")
	}
}

// labels reads a list of labels, checks each, and returns them
// normalised: lower-cased, de-duplicated and sorted. atLeastOne makes an
// empty list a problem.
func (p *parser) labels(n *yaml.Node, path string, atLeastOne bool) ([]string, bool) {
	items, ok := p.list(n, path)
	if !ok {
		return nil, false
	}
	if atLeastOne && len(items) == 0 {
		p.errorf(n, path, "needs at least one label")
		return nil, false
	}
	raw := make([]string, 0, len(items))
	for i, item := range items {
		what := index(path, i)
		s, good := p.str(item, what)
		if !good {
			ok = false
			continue
		}
		if msg := checkLabel(s); msg != "" {
			p.errorf(item, what, "%s", msg)
			ok = false
			continue
		}
		raw = append(raw, s)
	}
	out := scaler.NormalizeLabels(raw)
	if len(out) == 0 {
		return nil, ok
	}
	return out, ok
}
