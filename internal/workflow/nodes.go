package workflow

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agnivade/levenshtein"
	"github.com/expr-lang/expr/conf"
	"go.yaml.in/yaml/v3"
)

// maxFileBytes bounds one workflow file. Real workflows are a few KiB; the
// bound keeps a hostile repository from making the orchestrator parse
// megabytes of YAML on every push.
const maxFileBytes = 1 << 20

// maxDuration bounds every timeout a workflow may ask for.
const maxDuration = 7 * 24 * time.Hour

// fileParser reads the YAML nodes of one file and collects every problem
// it meets instead of stopping at the first.
type fileParser struct {
	file string
	// maxJobs is the most jobs, matrix expansions included, the file's
	// workflow may have.
	maxJobs int
	errs    ErrorList
	cfg     *conf.Config // built on first use by exprConfig
}

func (p *fileParser) exprConfig() *conf.Config {
	if p.cfg == nil {
		p.cfg = newCheckConfig()
	}
	return p.cfg
}

func (p *fileParser) errorf(n *yaml.Node, format string, args ...any) {
	line, col := 1, 1
	if n != nil && n.Line > 0 {
		line, col = n.Line, n.Column
	}
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)})
}

// resolve follows an alias to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// pair is one key/value of a YAML mapping.
type pair struct {
	key   string
	keyN  *yaml.Node
	value *yaml.Node
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "null"
		case "!!bool":
			return "a boolean"
		case "!!int", "!!float":
			return "a number"
		}
		return "a string"
	}
	return "an unsupported YAML node"
}

// mapping returns the pairs of a mapping node, reporting duplicate keys and
// merge keys. A null node is an empty mapping (`manual:` with no value).
func (p *fileParser) mapping(n *yaml.Node, what string) ([]pair, bool) {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "%s: expected a mapping, got %s", what, kindName(n))
		return nil, false
	}
	seen := make(map[string]bool, len(n.Content)/2)
	out := make([]pair, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errorf(k, "%s: keys must be strings, got %s", what, kindName(k))
			continue
		}
		if k.Tag == "!!merge" {
			p.errorf(k, "%s: merge keys (<<) are not supported; write the keys out", what)
			continue
		}
		if seen[k.Value] {
			p.errorf(k, "%s: duplicate key %q", what, k.Value)
			continue
		}
		seen[k.Value] = true
		out = append(out, pair{key: k.Value, keyN: k, value: v})
	}
	return out, true
}

// checkKeys reports every key not in known, suggesting the closest one.
func (p *fileParser) checkKeys(pairs []pair, what string, known ...string) {
	for _, kv := range pairs {
		ok := false
		for _, k := range known {
			if kv.key == k {
				ok = true
				break
			}
		}
		if ok {
			continue
		}
		if s := closest(kv.key, known); s != "" {
			p.errorf(kv.keyN, "%s: unknown key %q (did you mean %q?)", what, kv.key, s)
		} else {
			p.errorf(kv.keyN, "%s: unknown key %q (known keys: %s)", what, kv.key, strings.Join(known, ", "))
		}
	}
}

// closest returns the candidate nearest to s when it is near enough to be a
// plausible typo, or "".
func closest(s string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		d := levenshtein.ComputeDistance(strings.ToLower(s), c)
		if d < bestD {
			best, bestD = c, d
		}
	}
	limit := len(s) / 3
	if limit < 2 {
		limit = 2
	}
	if bestD <= limit {
		return best
	}
	return ""
}

// str reads a scalar that must be a string.
func (p *fileParser) str(n *yaml.Node, what string) (string, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		p.errorf(n, "%s: expected a string, got %s", what, kindName(n))
		return "", false
	}
	return n.Value, true
}

// scalar reads any non-null scalar as its text, for values such as env
// entries and matrix cells where `1.26` and `true` are meant as strings.
func (p *fileParser) scalar(n *yaml.Node, what string) (string, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.errorf(n, "%s: expected a string, number or boolean, got %s", what, kindName(n))
		return "", false
	}
	return n.Value, true
}

// strList reads a list of strings; a lone string is a list of one.
func (p *fileParser) strList(n *yaml.Node, what string) ([]string, bool) {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		return []string{n.Value}, true
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, "%s: expected a list of strings, got %s", what, kindName(n))
		return nil, false
	}
	out := make([]string, 0, len(n.Content))
	ok := true
	for _, c := range n.Content {
		s, good := p.str(c, what)
		if !good {
			ok = false
			continue
		}
		out = append(out, s)
	}
	return out, ok
}

func (p *fileParser) boolean(n *yaml.Node, what string) (bool, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		p.errorf(n, "%s: expected true or false, got %s", what, kindName(n))
		return false, false
	}
	b, err := strconv.ParseBool(n.Value)
	if err != nil {
		// YAML 1.1 spellings such as "yes" carry the !!bool tag only when
		// written with an explicit tag; refuse them plainly.
		p.errorf(n, "%s: expected true or false, got %q", what, n.Value)
		return false, false
	}
	return b, true
}

// duration reads a Go duration string ("90s", "10m", "1h30m") and returns
// it in milliseconds.
func (p *fileParser) duration(n *yaml.Node, what string) (int64, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.errorf(n, "%s: expected a duration such as 90s or 10m, got %s", what, kindName(n))
		return 0, false
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		p.errorf(n, "%s: invalid duration %q: expected a number with a unit such as 90s, 10m or 1h30m", what, n.Value)
		return 0, false
	}
	if d <= 0 {
		p.errorf(n, "%s: duration %q must be positive", what, n.Value)
		return 0, false
	}
	if d > maxDuration {
		p.errorf(n, "%s: duration %q exceeds the maximum of %s", what, n.Value, maxDuration)
		return 0, false
	}
	if d%time.Millisecond != 0 {
		p.errorf(n, "%s: duration %q is finer than a millisecond", what, n.Value)
		return 0, false
	}
	return d.Milliseconds(), true
}

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
	envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	secretRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
)

// maxNameLen bounds job and input names, which end up in URLs and labels.
const maxNameLen = 100
