package config

import (
	"fmt"
	"math/big"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kici-dev/kici/internal/scaler"
)

var memoryRE = regexp.MustCompile(`^(\d+(\.\d+)?)\s*([kmgKMG])$`)

// ParseMemory reads a memory size: a number, whole or decimal, and a unit
// k, m or g (either case) meaning KiB, MiB and GiB, such as "512m",
// "1.5g" or "64 k". The result is floored to whole bytes and must be at
// least one byte. There is no t, no Mi/Gi and no bare number.
func ParseMemory(s string) (int64, error) {
	if len(s) > 64 {
		return 0, fmt.Errorf("invalid memory size %.20q...: too long", s)
	}
	m := memoryRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("invalid memory size %q: use a number and a unit k, m or g (powers of 1024), such as 512m or 1.5g", s)
	}
	var r big.Rat
	if _, ok := r.SetString(m[1]); !ok {
		return 0, fmt.Errorf("invalid memory size %q", s)
	}
	shift := uint(10)
	switch strings.ToLower(m[3]) {
	case "m":
		shift = 20
	case "g":
		shift = 30
	}
	r.Mul(&r, new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), shift)))
	bytes := new(big.Int).Quo(r.Num(), r.Denom()) // both positive: floors
	if bytes.Sign() == 0 {
		return 0, fmt.Errorf("memory size %q is less than one byte", s)
	}
	if !bytes.IsInt64() {
		return 0, fmt.Errorf("memory size %q is too large", s)
	}
	return bytes.Int64(), nil
}

// memory reads a memory string at n.
func (p *parser) memory(n *yaml.Node, path string) (int64, bool) {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float") {
		p.errorf(n, path, "expected a memory size such as 512m or 2g, got the bare number %s: add a unit (k, m or g)", n.Value)
		return 0, false
	}
	s, ok := p.str(n, path)
	if !ok {
		return 0, false
	}
	v, err := ParseMemory(s)
	if err != nil {
		p.errorf(n, path, "%v", err)
		return 0, false
	}
	return v, true
}

// specRead is one side (requests or limits) as read, with the nodes of
// its dimensions.
type specRead struct {
	spec        scaler.Spec
	cpusN, memN *yaml.Node
}

var specSchema = schema{known: []string{"cpus", "memory"}}

// spec reads the cpus and memory of pairs that were checked already.
func (p *parser) spec(pairs []pair, path string) specRead {
	var s specRead
	for _, kv := range pairs {
		what := join(path, kv.key)
		switch kv.key {
		case "cpus":
			s.spec.CPUs, _ = p.number(kv.value, what, maxCPUs)
			s.cpusN = kv.value
		case "memory":
			s.spec.MemoryBytes, _ = p.memory(kv.value, what)
			s.memN = kv.value
		}
	}
	return s
}

// resources reads one layer of resources, in the nested form
// {requests: {cpus, memory}, limits: {cpus, memory}} or the flat form
// {cpus, memory} (the same for both sides), and applies the mirror rule.
// It reports false when the layer had a problem.
func (p *parser) resources(n *yaml.Node, path string) (Resources, bool) {
	errs := len(p.errs)
	pairs, ok := p.mapping(n, path)
	if !ok {
		return Resources{}, false
	}
	pairs = p.check(pairs, path, schema{known: []string{"requests", "limits", "cpus", "memory"}})
	var nested, flat bool
	for _, kv := range pairs {
		switch kv.key {
		case "requests", "limits":
			nested = true
		default:
			flat = true
		}
	}
	if nested && flat {
		p.errorf(n, path, "mixes the nested form (requests, limits) with the flat form (cpus, memory): use one")
		return Resources{}, false
	}
	var r Resources
	if flat {
		s := p.spec(pairs, path)
		r = Resources{Requests: s.spec, Limits: s.spec}
		return r, len(p.errs) == errs
	}
	var req, lim specRead
	for _, kv := range pairs {
		what := join(path, kv.key)
		sides, _ := p.mapping(kv.value, what)
		s := p.spec(p.check(sides, what, specSchema), what)
		if kv.key == "requests" {
			req = s
		} else {
			lim = s
		}
	}
	if len(p.errs) != errs {
		return Resources{}, false
	}
	if req.spec.CPUs > 0 && lim.spec.CPUs > 0 && req.spec.CPUs > lim.spec.CPUs {
		p.errorf(req.cpusN, join(join(path, "requests"), "cpus"), "%g exceeds limits.cpus (%g)", req.spec.CPUs, lim.spec.CPUs)
	}
	if req.spec.MemoryBytes > 0 && lim.spec.MemoryBytes > 0 && req.spec.MemoryBytes > lim.spec.MemoryBytes {
		p.errorf(req.memN, join(join(path, "requests"), "memory"), "%s exceeds limits.memory (%s)", memoryText(req.spec.MemoryBytes), memoryText(lim.spec.MemoryBytes))
	}
	r = Resources{Requests: req.spec, Limits: lim.spec}
	switch {
	case r.Requests == scaler.Spec{}:
		r.Requests = r.Limits
	case r.Limits == scaler.Spec{}:
		r.Limits = r.Requests
	}
	return r, len(p.errs) == errs
}

// effective resolves a label set's layer over the defaults layer: each
// side and dimension independently, the label set first.
func effective(layer, defaults Resources) Resources {
	pick := func(a, b scaler.Spec) scaler.Spec {
		if a.CPUs == 0 {
			a.CPUs = b.CPUs
		}
		if a.MemoryBytes == 0 {
			a.MemoryBytes = b.MemoryBytes
		}
		return a
	}
	return Resources{Requests: pick(layer.Requests, defaults.Requests), Limits: pick(layer.Limits, defaults.Limits)}
}

// exceeds names the first dimension whose request is over its limit,
// both declared, or returns "".
func (r Resources) exceeds() string {
	if r.Requests.CPUs > 0 && r.Limits.CPUs > 0 && r.Requests.CPUs > r.Limits.CPUs {
		return fmt.Sprintf("requests.cpus (%g) exceeds limits.cpus (%g)", r.Requests.CPUs, r.Limits.CPUs)
	}
	if r.Requests.MemoryBytes > 0 && r.Limits.MemoryBytes > 0 && r.Requests.MemoryBytes > r.Limits.MemoryBytes {
		return fmt.Sprintf("requests.memory (%s) exceeds limits.memory (%s)", memoryText(r.Requests.MemoryBytes), memoryText(r.Limits.MemoryBytes))
	}
	return ""
}

// memoryText writes a byte count the way a memory string would, when it
// is a whole number of one of the units.
func memoryText(b int64) string {
	for _, u := range []struct {
		shift uint
		unit  string
	}{{30, "g"}, {20, "m"}, {10, "k"}} {
		if b%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", b>>u.shift, u.unit)
		}
	}
	return fmt.Sprintf("%d bytes", b)
}
