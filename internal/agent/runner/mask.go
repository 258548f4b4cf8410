package runner

import (
	"bytes"
	"cmp"
	"slices"
	"strings"
)

// Mask is what every masked value is replaced with.
const Mask = "***"

// masker replaces secret values in output lines with Mask. It is immutable
// once built, so safe for concurrent use.
type masker struct {
	values   [][]byte // longest first
	maxLen   int
	replacer *strings.Replacer // nil when there is nothing to mask
}

// newMasker masks each non-empty value. A value of several lines is masked
// line by line, since output is cut into lines before masking.
func newMasker(values ...string) *masker {
	seen := map[string]bool{}
	var list []string
	for _, v := range values {
		for part := range strings.SplitSeq(v, "\n") {
			part = strings.TrimSuffix(part, "\r")
			if strings.TrimSpace(part) == "" || seen[part] {
				continue
			}
			seen[part] = true
			list = append(list, part)
		}
	}
	// Longest first: where two values overlap, the longer one wins.
	slices.SortFunc(list, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
	})
	m := &masker{}
	pairs := make([]string, 0, 2*len(list))
	for _, v := range list {
		m.values = append(m.values, []byte(v))
		m.maxLen = max(m.maxLen, len(v))
		pairs = append(pairs, v, Mask)
	}
	if len(pairs) > 0 {
		m.replacer = strings.NewReplacer(pairs...)
	}
	return m
}

// apply returns s with every value replaced by Mask.
func (m *masker) apply(s string) string {
	if m.replacer == nil {
		return s
	}
	return m.replacer.Replace(s)
}

// safeCut returns where to cut b, at most limit bytes in (0 < limit <
// len(b)), so that no masked value straddles the cut: if one starts before
// the cut and does not end before it (or might continue after b's end), the
// cut moves to its start, and the value stays whole in the next piece. A
// value longer than limit cannot be kept whole; the cut then stays at limit.
func (m *masker) safeCut(b []byte, limit int) int {
	cut := limit
	for range len(m.values) + 1 { // each pass moves the cut left, or stops
		moved := false
		for _, v := range m.values {
			for p := max(0, cut-len(v)+1); p < cut; p++ {
				rest := b[p:]
				if bytes.HasPrefix(rest, v) || len(rest) < len(v) && bytes.HasPrefix(v, rest) {
					if p > 0 {
						cut, moved = p, true
					}
					break
				}
			}
		}
		if !moved {
			break
		}
	}
	return cut
}
