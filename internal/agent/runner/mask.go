package runner

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"slices"
	"strings"
	"unicode/utf8"
)

// Mask is what every masked value is replaced with.
const Mask = "***"

// MinMaskLen is the length, in characters, from which a value is masked
// wherever it appears. A shorter value (the orchestrator refuses to store
// a secret that short, but an older one may exist, and a job mask may be
// short) is masked only where it stands as a whole word, so that a
// one-character secret does not mask every such character of the output.
const MinMaskLen = 4

// masker replaces secret values in output lines with Mask. It is immutable
// once built, so safe for concurrent use.
//
// A value is looked for three ways in each line: in the raw bytes, in what
// a terminal would print of them (control characters and escape sequences
// left out, see visible), and in that view with the payloads of string
// sequences (window titles, OSC 52) kept. Where a value is found, the raw
// bytes it covers, control sequences inside or overlapping it included, are
// replaced by one Mask. Besides each value, the parts of its base64
// encoding (standard and URL alphabet) that do not depend on the bytes
// around it are values too, at each of the three byte offsets the value can
// have in encoded data (base64("user:" + password) of HTTP Basic auth).
type masker struct {
	raw    []needle // matched against the raw line
	shown  []needle // matched against the visible text
	maxLen int      // the longest needle, in bytes
}

// needle is one byte string to mask.
type needle struct {
	b     []byte
	whole bool // shorter than MinMaskLen: only as a whole word
}

// newMasker masks each non-empty value. A value of several lines is masked
// line by line, since output is cut into lines before masking.
func newMasker(values ...string) *masker {
	raw, shown := map[string]bool{}, map[string]bool{}
	for _, v := range values {
		if strings.TrimSpace(v) == "" {
			continue
		}
		for part := range strings.SplitSeq(v, "\n") {
			part = strings.TrimSuffix(part, "\r")
			if strings.TrimSpace(part) == "" {
				continue
			}
			raw[part] = true
			if s := string(visible([]byte(part), false).text); strings.TrimSpace(s) != "" {
				shown[s] = true
			}
			for _, enc := range base64Forms([]byte(part)) {
				raw[enc] = true
			}
		}
		for _, enc := range base64Forms([]byte(v)) {
			raw[enc] = true
		}
	}
	m := &masker{raw: needles(raw), shown: needles(shown)}
	for _, n := range slices.Concat(m.raw, m.shown) {
		m.maxLen = max(m.maxLen, len(n.b))
	}
	return m
}

// needles sorts a set of values, longest first, into needles.
func needles(set map[string]bool) []needle {
	list := make([]string, 0, len(set))
	for s := range set {
		list = append(list, s)
	}
	slices.SortFunc(list, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
	})
	out := make([]needle, len(list))
	for i, s := range list {
		out[i] = needle{b: []byte(s), whole: utf8.RuneCountInString(s) < MinMaskLen}
	}
	return out
}

// base64Forms returns the parts of v's base64 encodings that are the same
// whatever bytes come before and after v, for v at each of the three
// offsets modulo 3 in the encoded data, in the standard and the URL
// alphabet. A form shorter than MinMaskLen characters is left out, and so
// are all forms of a value shorter than MinMaskLen.
func base64Forms(v []byte) []string {
	if utf8.RuneCount(v) < MinMaskLen {
		return nil
	}
	var out []string
	for k := range 3 {
		buf := make([]byte, k+len(v))
		copy(buf[k:], v)
		enc := base64.RawStdEncoding.EncodeToString(buf)
		// Character i holds bits [6i, 6i+6) of buf; it depends on v alone
		// when all of them lie in v's bits [8k, 8(k+len(v))).
		start, end := (8*k+5)/6, 8*(k+len(v))/6
		if end-start < MinMaskLen {
			continue
		}
		std := enc[start:end]
		out = append(out, std)
		if url := strings.NewReplacer("+", "-", "/", "_").Replace(std); url != std {
			out = append(out, url)
		}
	}
	return out
}

// apply returns s with every value replaced by Mask.
func (m *masker) apply(s string) string {
	if len(m.raw) == 0 {
		return s
	}
	b := []byte(s)
	spans := m.find(b)
	if len(spans) == 0 {
		return s
	}
	var out strings.Builder
	out.Grow(len(s))
	last := 0
	for _, sp := range spans {
		out.Write(b[last:sp.start])
		out.WriteString(Mask)
		last = sp.end
	}
	out.Write(b[last:])
	return out.String()
}

// find returns the ranges of b to mask, in order and not overlapping.
func (m *masker) find(b []byte) []span {
	var found []span
	found = appendMatches(found, b, nil, m.raw)
	if hasControls(b) {
		v := visible(b, false)
		found = appendMatches(found, v.text, v.idx, m.shown)
		if hasStrings(b) {
			vs := visible(b, true)
			found = appendMatches(found, vs.text, vs.idx, m.shown)
		}
		if len(found) > 0 {
			// A masked range takes whole every control sequence it
			// touches, so that what is left around the Mask reads the
			// same as before and cannot join into a secret on a terminal.
			return widen(merge(found), v.seqs)
		}
	}
	return merge(found)
}

// appendMatches appends, as ranges of the raw line, every occurrence
// (overlapping ones too) of each needle in text, whose byte i is the raw
// line's byte idx[i] (idx nil: text is the raw line).
func appendMatches(out []span, text []byte, idx []int, list []needle) []span {
	for _, n := range list {
		for from := 0; from+len(n.b) <= len(text); {
			i := bytes.Index(text[from:], n.b)
			if i < 0 {
				break
			}
			start, end := from+i, from+i+len(n.b)
			from = start + 1
			if n.whole && !(wordEdge(text, start) && wordEdge(text, end)) {
				continue
			}
			if idx == nil {
				out = append(out, span{start, end})
			} else {
				out = append(out, span{idx[start], idx[end-1] + 1})
			}
		}
	}
	return out
}

// wordEdge reports whether offset i of text is not inside a word: a word
// is a run of ASCII letters, digits, _ and non-ASCII bytes.
func wordEdge(text []byte, i int) bool {
	return i == 0 || i == len(text) || !isWordByte(text[i-1]) || !isWordByte(text[i])
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80
}

// widen grows each range of found (sorted and apart, as merge leaves
// them) to take whole every sequence of seqs (sorted and apart) it
// overlaps, and merges again. It is linear in both.
func widen(found, seqs []span) []span {
	j := 0
	for i, f := range found {
		for j < len(seqs) && seqs[j].end <= f.start {
			j++
		}
		for k := j; k < len(seqs) && seqs[k].start < f.end; k++ {
			f.start, f.end = min(f.start, seqs[k].start), max(f.end, seqs[k].end)
		}
		found[i] = f
	}
	return merge(found)
}

// merge sorts ranges and joins those that overlap; ranges that only touch
// stay apart, each to become its own Mask.
func merge(found []span) []span {
	if len(found) < 2 {
		return found
	}
	slices.SortFunc(found, func(a, b span) int { return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.end, b.end)) })
	out := found[:1]
	for _, f := range found[1:] {
		last := &out[len(out)-1]
		if f.start < last.end {
			last.end = max(last.end, f.end)
			continue
		}
		out = append(out, f)
	}
	return out
}

// safeCut returns where to cut b, at most limit bytes in (0 < limit <
// len(b)), so that no masked value straddles the cut, in the raw bytes or
// in what a terminal shows of them, and no control sequence is cut in two:
// if one starts before the cut and does not end before it (or might
// continue after b's end), the cut moves to its start, and the value stays
// whole in the next piece. A value longer than limit cannot be kept whole;
// the cut then stays where it is.
func (m *masker) safeCut(b []byte, limit int) int {
	cut := limit
	var views []visibleText
	if hasControls(b) {
		views = append(views, visible(b, false))
		if hasStrings(b) {
			views = append(views, visible(b, true))
		}
	}
	for range len(m.raw) + len(m.shown) + 2 { // each pass moves the cut left, or stops
		moved := false
		if p := straddle(b, cut, m.raw); p > 0 {
			cut, moved = p, true
		}
		for _, v := range views {
			// The visible bytes before the cut are text[:vcut].
			vcut, _ := slices.BinarySearch(v.idx, cut)
			if p := straddle(v.text, vcut, m.shown); p >= 0 && v.idx[p] > 0 && v.idx[p] < cut {
				cut, moved = v.idx[p], true
			}
			for _, q := range v.seqs {
				if q.start < cut && cut < q.end && q.start > 0 {
					cut, moved = q.start, true
				}
			}
		}
		if !moved {
			break
		}
	}
	return cut
}

// straddle returns the leftmost start, before cut, of a needle that
// begins before cut and does not end before it (it may be cut short by
// the end of text), or -1.
func straddle(text []byte, cut int, list []needle) int {
	best := -1
	for _, n := range list {
		for p := max(0, cut-len(n.b)+1); p < cut; p++ {
			rest := text[p:]
			if bytes.HasPrefix(rest, n.b) || len(rest) < len(n.b) && bytes.HasPrefix(n.b, rest) {
				if best < 0 || p < best {
					best = p
				}
				break
			}
		}
	}
	return best
}
