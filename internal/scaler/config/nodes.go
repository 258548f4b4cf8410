package config

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/agnivade/levenshtein"
	"go.yaml.in/yaml/v3"
)

// pos is where something was written: a file and a 1-based line and
// column. Checks that span files (unique names, overlapping label sets)
// keep positions rather than nodes.
type pos struct {
	file      string
	line, col int
}

func (a pos) String() string { return fmt.Sprintf("%s:%d:%d", a.file, a.line, a.col) }

// parser reads the YAML nodes of the configuration files and collects
// every problem it meets instead of stopping at the first. file is the
// file being read.
type parser struct {
	file string
	errs ErrorList
}

func (p *parser) at(n *yaml.Node) pos {
	if n == nil || n.Line <= 0 {
		return pos{file: p.file, line: 1, col: 1}
	}
	return pos{file: p.file, line: n.Line, col: max(n.Column, 1)}
}

// errorf records a problem at node n of the current file.
func (p *parser) errorf(n *yaml.Node, path, format string, args ...any) {
	p.errorAt(p.at(n), path, format, args...)
}

// errorAt records a problem at a position kept from an earlier read.
func (p *parser) errorAt(at pos, path, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: at.file, Line: at.line, Col: at.col, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// resolve follows an alias to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// maxExpandedNodes bounds the size of a document once its aliases are
// followed, so that a few nested anchors cannot make the loader walk
// billions of nodes ("billion laughs").
const maxExpandedNodes = 1_000_000

// expandedSize returns the number of nodes the document would have with
// every alias replaced by what it names, saturating past
// maxExpandedNodes. It runs in time linear in the document.
func expandedSize(n *yaml.Node, memo map[*yaml.Node]int) int {
	if n == nil {
		return 0
	}
	if n.Kind == yaml.AliasNode {
		return expandedSize(n.Alias, memo)
	}
	if s, ok := memo[n]; ok {
		return s
	}
	// A node being measured counts as too large, so that a cycle (which
	// go-yaml should refuse anyway) cannot recurse for ever.
	memo[n] = maxExpandedNodes + 1
	size := 1
	for _, c := range n.Content {
		size += expandedSize(c, memo)
		if size > maxExpandedNodes {
			size = maxExpandedNodes + 1
			break
		}
	}
	memo[n] = size
	return size
}

// pair is one key/value of a YAML mapping.
type pair struct {
	key   string
	keyN  *yaml.Node
	value *yaml.Node
}

var plainKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// join extends a document path with a mapping key.
func join(path, key string) string {
	if !plainKeyRE.MatchString(key) {
		return fmt.Sprintf("%s[%q]", path, key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// index extends a document path with a list index.
func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// kindName describes a node for "expected X, got Y" messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "nothing (null)"
		case "!!bool":
			return "a boolean"
		case "!!int", "!!float":
			return "a number"
		case "!!str":
			return "a string"
		case "!!timestamp":
			return "a timestamp"
		case "!!binary":
			return "binary data"
		}
		return "a value tagged " + n.Tag
	}
	return "an unsupported YAML node"
}

// quoteHint suggests quoting a scalar that YAML read as something other
// than a string (`name: 123`, `image: 2024-01-01`).
func quoteHint(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" && n.Tag != "!!str" {
		return fmt.Sprintf(" (quote it to make it one: %q)", n.Value)
	}
	return ""
}

// isNull reports whether n is an empty value (`key:` with nothing after).
func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// mapping returns the pairs of a mapping node, reporting duplicate keys,
// merge keys and keys that are not strings. A null node is an empty
// mapping (`warmPool:` with nothing after it).
func (p *parser) mapping(n *yaml.Node, path string) ([]pair, bool) {
	n = resolve(n)
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, path, "expected a mapping, got %s", kindName(n))
		return nil, false
	}
	first := make(map[string]*yaml.Node, len(n.Content)/2)
	out := make([]pair, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errorf(k, path, "keys must be strings, got %s", kindName(k))
			continue
		}
		if k.Tag == "!!merge" {
			p.errorf(k, path, "merge keys (<<) are not supported; write the keys out")
			continue
		}
		if f, dup := first[k.Value]; dup {
			p.errorf(k, join(path, k.Value), "duplicate key (first at line %d)", f.Line)
			continue
		}
		first[k.Value] = k
		out = append(out, pair{key: k.Value, keyN: k, value: v})
	}
	return out, true
}

// schema is the keys a mapping may hold: known keys are read; unsupported
// keys exist in the reference design but not in kici yet, and map to the
// reason given to the user.
type schema struct {
	known       []string
	unsupported map[string]string
}

// check reports every key the schema does not know, suggesting the
// closest known one, and returns the known pairs.
func (p *parser) check(pairs []pair, path string, s schema) []pair {
	out := pairs[:0:0]
	for _, kv := range pairs {
		if contains(s.known, kv.key) {
			out = append(out, kv)
			continue
		}
		if why, ok := s.unsupported[kv.key]; ok {
			p.errorf(kv.keyN, join(path, kv.key), "%s", why)
			continue
		}
		if c := closest(kv.key, s.known); c != "" {
			p.errorf(kv.keyN, join(path, kv.key), "unknown key (did you mean %q?)", c)
		} else {
			p.errorf(kv.keyN, join(path, kv.key), "unknown key (known keys: %s)", strings.Join(s.known, ", "))
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// closest returns the candidate nearest to s when it is near enough to be
// a plausible typo, or "". Case is ignored: "labelsets" is "labelSets".
func closest(s string, candidates []string) string {
	if len(s) > 64 {
		return ""
	}
	best, bestD := "", math.MaxInt
	for _, c := range candidates {
		d := levenshtein.ComputeDistance(strings.ToLower(s), strings.ToLower(c))
		if d < bestD {
			best, bestD = c, d
		}
	}
	if bestD <= max(len(s)/3, 2) {
		return best
	}
	return ""
}

// str reads a scalar that must be a string.
func (p *parser) str(n *yaml.Node, path string) (string, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		p.errorf(n, path, "expected a string, got %s%s", kindName(n), quoteHint(n))
		return "", false
	}
	return n.Value, true
}

// text reads any non-null scalar as its text, for env values where
// `1.26` and `true` are meant as strings.
func (p *parser) text(n *yaml.Node, path string) (string, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.errorf(n, path, "expected a string, number or boolean, got %s", kindName(n))
		return "", false
	}
	return n.Value, true
}

// list returns the items of a sequence node. A null node is an empty list.
func (p *parser) list(n *yaml.Node, path string) ([]*yaml.Node, bool) {
	n = resolve(n)
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, path, "expected a list, got %s", kindName(n))
		return nil, false
	}
	return n.Content, true
}

// strList reads a list of strings.
func (p *parser) strList(n *yaml.Node, path string) ([]string, bool) {
	items, ok := p.list(n, path)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(items))
	for i, c := range items {
		s, good := p.str(c, index(path, i))
		if !good {
			ok = false
			continue
		}
		out = append(out, s)
	}
	return out, ok
}

// integer reads a whole number in [lo, hi].
func (p *parser) integer(n *yaml.Node, path string, lo, hi int) (int, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		p.errorf(n, path, "expected a whole number, got %s", describe(n))
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil || v < int64(lo) || v > int64(hi) {
		p.errorf(n, path, "must be %s, got %s", rangeText(lo, hi), n.Value)
		return 0, false
	}
	return int(v), true
}

func rangeText(lo, hi int) string {
	switch lo {
	case 0:
		return fmt.Sprintf("0 or more (at most %d)", hi)
	case 1:
		return fmt.Sprintf("a positive number (at most %d)", hi)
	}
	return fmt.Sprintf("between %d and %d", lo, hi)
}

// number reads a number (whole or not) that is positive and at most hi.
func (p *parser) number(n *yaml.Node, path string, hi float64) (float64, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		p.errorf(n, path, "expected a number, got %s", describe(n))
		return 0, false
	}
	var v float64
	if err := n.Decode(&v); err != nil || !(v > 0 && v <= hi) {
		if hi == math.MaxFloat64 {
			p.errorf(n, path, "must be a positive number, got %s", n.Value)
		} else {
			p.errorf(n, path, "must be a positive number of at most %g, got %s", hi, n.Value)
		}
		return 0, false
	}
	return v, true
}

// describe names a node's kind, with the text of a scalar.
func describe(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		return fmt.Sprintf("%s (%q)", kindName(n), n.Value)
	}
	return kindName(n)
}

func (p *parser) boolean(n *yaml.Node, path string) (bool, bool) {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && n.Tag == "!!bool" {
		if b, err := strconv.ParseBool(n.Value); err == nil {
			return b, true
		}
	}
	p.errorf(n, path, "expected true or false, got %s", describe(n))
	return false, false
}
