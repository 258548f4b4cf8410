package workflow

import "go.yaml.in/yaml/v3"

// MaxAliasNodes bounds the YAML nodes that aliases add to one workflow
// file. go-yaml keeps an alias as a pointer to its anchor, so parsing
// costs what the text holds; it is reading the tree that repeats the
// anchor once per alias. Without a bound, a 357 KB file (an anchor of
// 2,000 env keys and 5,000 jobs aliasing it) made the compiler build ten
// million env entries and take gigabytes. A real workflow reuses a few
// steps or an env map a few dozen times, far below the bound.
const MaxAliasNodes = 100_000

// checkAliases measures what the document's aliases expand to before
// anything reads the tree through them. It reports, at the alias where it
// happens, the first alias that takes the added nodes past MaxAliasNodes
// and any alias that refers to a node containing it (which would expand
// without end). It returns false when it reported a problem.
//
// One post-order walk of the tree as parsed is enough: YAML defines an
// anchor before its aliases, so when the walk meets an alias, the anchored
// node is either finished (its expanded size is known) or an ancestor of
// the alias (a cycle). Sizes saturate just past the bound, so nested
// aliases that double at every level cannot overflow.
func (p *fileParser) checkAliases(doc *yaml.Node) bool {
	w := aliasWalk{p: p, size: map[*yaml.Node]int{}, open: map[*yaml.Node]bool{}}
	w.walk(doc)
	return !w.failed
}

// aliasWalk is the state of one checkAliases call.
type aliasWalk struct {
	p *fileParser
	// size is the expanded node count of every finished node, at most
	// MaxAliasNodes+1.
	size map[*yaml.Node]int
	// open holds the nodes whose walk has begun but not ended: the
	// ancestors of the node being walked.
	open map[*yaml.Node]bool
	// added counts the nodes that the aliases met so far expand to.
	added  int
	failed bool
}

// walk returns the expanded size of n, or 0 once a problem is reported.
func (w *aliasWalk) walk(n *yaml.Node) int {
	if w.failed || n == nil {
		return 0
	}
	if n.Kind == yaml.AliasNode {
		target := n.Alias
		if target == nil {
			return 1
		}
		if w.open[target] {
			w.p.errorf(n, "alias *%s refers to a node that contains it", n.Value)
			w.failed = true
			return 0
		}
		s, done := w.size[target]
		if !done {
			// Not reachable with go-yaml's trees (an anchor comes before its
			// aliases); walk it so the count stays right if it ever is.
			s = w.walk(target)
			if w.failed {
				return 0
			}
		}
		w.added = saturatingAdd(w.added, s)
		if w.added > MaxAliasNodes {
			w.p.errorf(n, "alias *%s: YAML aliases expand this file by more than %d nodes; write the repeated parts out or alias less", n.Value, MaxAliasNodes)
			w.failed = true
			return 0
		}
		return s
	}
	if s, done := w.size[n]; done {
		return s
	}
	w.open[n] = true
	s := 1
	for _, c := range n.Content {
		s = saturatingAdd(s, w.walk(c))
		if w.failed {
			return 0
		}
	}
	delete(w.open, n)
	w.size[n] = s
	return s
}

// saturatingAdd adds two node counts, stopping just past MaxAliasNodes.
func saturatingAdd(a, b int) int {
	if a+b > MaxAliasNodes {
		return MaxAliasNodes + 1
	}
	return a + b
}
