package runner

// visibleText is what a terminal prints of a line: the line without its
// control characters and escape sequences. It is what the masker matches
// secrets against besides the raw line, so that a secret split by a CR, a
// colour reset or a zero-length escape sequence is still found.
type visibleText struct {
	text []byte // the printed bytes
	idx  []int  // idx[i] is the offset in the raw line of text[i]
	seqs []span // every run of raw bytes left out, in order
}

// span is a half-open range [start, end) of byte offsets.
type span struct{ start, end int }

// hasControls reports whether b holds a byte that visible would drop: a C0
// control (tab included), DEL, ESC, or the lead byte of a C1 control.
func hasControls(b []byte) bool {
	for i, c := range b {
		if c < 0x20 || c == 0x7f || c == 0xc2 && i+1 < len(b) && b[i+1] >= 0x80 && b[i+1] <= 0x9f {
			return true
		}
	}
	return false
}

// hasStrings reports whether b holds an escape sequence that carries a
// string (OSC, DCS, SOS, PM, APC): only then do the two ways visible reads
// them differ.
func hasStrings(b []byte) bool {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == 0x1b && isStringIntro(b[i+1]) {
			return true
		}
	}
	return false
}

func isStringIntro(c byte) bool { return c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_' }

// visible returns what a terminal shows of b: C0 controls and DEL, C1
// controls (U+0080 to U+009F), and ESC sequences (CSI, two-byte and nF
// escapes, and the string sequences OSC, DCS, SOS, PM and APC up to their
// BEL or ST) are dropped. With keepStrings, a string sequence drops only
// its introducer and terminator and keeps its payload: a terminal does not
// print a window title, but a secret may still be hidden in one split by
// other controls. An unterminated sequence runs to the end of b.
func visible(b []byte, keepStrings bool) visibleText {
	v := visibleText{text: make([]byte, 0, len(b)), idx: make([]int, 0, len(b))}
	drop := func(start, end int) {
		if n := len(v.seqs); n > 0 && v.seqs[n-1].end == start {
			v.seqs[n-1].end = end
			return
		}
		v.seqs = append(v.seqs, span{start, end})
	}
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == 0x1b:
			end := escapeEnd(b, i)
			if keepStrings && i+1 < len(b) && isStringIntro(b[i+1]) {
				// Keep the payload: drop the introducer, and the
				// terminator when there is one.
				drop(i, i+2)
				payloadEnd := stringPayloadEnd(b, i+2)
				for j := i + 2; j < payloadEnd; j++ {
					if b[j] < 0x20 || b[j] == 0x7f {
						drop(j, j+1)
						continue
					}
					v.text = append(v.text, b[j])
					v.idx = append(v.idx, j)
				}
				if payloadEnd < end {
					drop(payloadEnd, end)
				}
				i = end
				continue
			}
			drop(i, end)
			i = end
		case c < 0x20 || c == 0x7f:
			drop(i, i+1)
			i++
		case c == 0xc2 && i+1 < len(b) && b[i+1] >= 0x80 && b[i+1] <= 0x9f:
			drop(i, i+2)
			i += 2
		default:
			v.text = append(v.text, c)
			v.idx = append(v.idx, i)
			i++
		}
	}
	return v
}

// escapeEnd returns where the escape sequence that starts with the ESC at
// b[i] ends (exclusive).
func escapeEnd(b []byte, i int) int {
	j := i + 1
	if j >= len(b) {
		return j
	}
	switch c := b[j]; {
	case c == '[': // CSI: parameters, intermediates, one final byte
		j++
		for j < len(b) && b[j] >= 0x20 && b[j] <= 0x3f {
			j++
		}
		if j < len(b) && b[j] >= 0x40 && b[j] <= 0x7e {
			j++
		}
		return j
	case isStringIntro(c): // up to BEL or ST (ESC \)
		end := stringPayloadEnd(b, j+1)
		switch {
		case end < len(b) && b[end] == 0x07:
			return end + 1
		case end+1 < len(b) && b[end] == 0x1b && b[end+1] == '\\':
			return end + 2
		}
		return end
	case c >= 0x20 && c <= 0x2f: // nF: intermediates, then a final byte
		for j < len(b) && b[j] >= 0x20 && b[j] <= 0x2f {
			j++
		}
		if j < len(b) && b[j] >= 0x30 && b[j] <= 0x7e {
			j++
		}
		return j
	case c >= 0x30 && c <= 0x7e: // a two-byte escape
		return j + 1
	}
	return j // a lone ESC
}

// stringPayloadEnd returns where the payload of a string sequence starting
// at b[j] ends: at its BEL, at its ST, or at the end of b.
func stringPayloadEnd(b []byte, j int) int {
	for ; j < len(b); j++ {
		if b[j] == 0x07 || b[j] == 0x1b && j+1 < len(b) && b[j+1] == '\\' {
			return j
		}
	}
	return j
}
