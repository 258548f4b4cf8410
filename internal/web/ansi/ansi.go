// Package ansi converts terminal output (job logs) to safe HTML.
//
// Job output is hostile: anyone who can push can print anything. Line
// therefore HTML-escapes every character of the input and only ever emits
// markup of its own: <span class="..."> elements carrying the SGR colours and
// styles, with class names drawn from a fixed, finite set (see CSS). Every
// other escape or control sequence is dropped, so cursor movement, window
// titles, OSC 8 hyperlinks and the like never reach the browser.
//
// Class names:
//
//	a-b  bold            a-d  dim (faint)      a-i  italic
//	a-u  underline       a-s  strikethrough    a-r  inverse (reverse video)
//	a-fgN, a-bgN     N = 0..15: the 16 base colours (themeable, light and dark)
//	a-fg-N, a-bg-N   N = 16..255: the rest of the xterm 256-colour palette
//
// Truecolour (38;2;r;g;b and 48;2;r;g;b) is mapped to the nearest entry of
// the 6x6x6 colour cube or the greyscale ramp of the 256-colour palette
// (indexes 16..255, never the themeable base colours), so the set of classes
// stays finite and no inline style attribute is ever needed.
//
// Work is linear in the input length. The output is valid UTF-8: invalid
// input bytes become U+FFFD.
package ansi

import (
	_ "embed"
	"strconv"
	"strings"
	"unicode/utf8"
)

//go:embed ansi.css
var css string

// CSS returns the stylesheet defining every class Line can emit. The 16 base
// colours are CSS custom properties (--ansi-0 … --ansi-15) with a light and a
// prefers-color-scheme: dark variant; the inverse class uses --ansi-default-fg
// and --ansi-default-bg (defaulting to CanvasText and Canvas), which a page can
// override to match its log viewer.
func CSS() string { return css }

// maxParams is the largest number of SGR parameters (counting colon
// sub-parameters) that is honoured; longer SGR sequences are dropped.
const maxParams = 32

// maxNumber caps the value of a numeric parameter so that parsing cannot
// overflow; any value this large is invalid for every SGR function anyway.
const maxNumber = 1 << 16

// Line converts one line of terminal output to HTML: every character is
// HTML-escaped first, and SGR colour/style escape sequences become
// <span class="..."> elements; every other escape or control sequence is
// dropped. The result is safe to insert as HTML.
//
// Tabs are kept; other C0 controls, DEL and C1 controls are dropped. Spans
// are never nested, never empty, and all closed by the end of the result.
func Line(s string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	var (
		cur  style // style set by the SGR sequences seen so far
		open style // style of the open span; zero when none is open
	)
	sc := scanner{s: s}
	for {
		kind, tok := sc.next()
		switch kind {
		case tokSGR:
			cur.apply(tok)
			continue
		case tokEnd:
			if open != (style{}) {
				b.WriteString("</span>")
			}
			return b.String()
		}
		// Spans are opened lazily, just before text, so none is ever empty.
		if cur != open {
			if open != (style{}) {
				b.WriteString("</span>")
			}
			if cur != (style{}) {
				b.WriteString(`<span class="`)
				cur.writeClasses(&b)
				b.WriteString(`">`)
			}
			open = cur
		}
		writeEscaped(&b, tok)
	}
}

// Strip returns s with every escape/control sequence removed (for search and
// plain text). It yields exactly the text content of Line(s): tabs are kept,
// other controls dropped, and invalid UTF-8 replaced by U+FFFD.
func Strip(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	sc := scanner{s: s}
	for {
		kind, tok := sc.next()
		switch kind {
		case tokText:
			b.WriteString(tok)
		case tokEnd:
			return b.String()
		}
	}
}

// writeEscaped writes s to b with & < > " ' escaped exactly as html.EscapeString
// does. Multi-byte UTF-8 sequences contain no ASCII bytes, so a byte-wise
// scan is correct.
func writeEscaped(b *strings.Builder, s string) {
	last := 0
	for i := 0; i < len(s); i++ {
		var e string
		switch s[i] {
		case '&':
			e = "&amp;"
		case '<':
			e = "&lt;"
		case '>':
			e = "&gt;"
		case '"':
			e = "&#34;"
		case '\'':
			e = "&#39;"
		default:
			continue
		}
		b.WriteString(s[last:i])
		b.WriteString(e)
		last = i + 1
	}
	b.WriteString(s[last:])
}

// Token kinds returned by scanner.next.
const (
	tokEnd  = iota // end of input
	tokText        // printable, valid UTF-8 text (not yet HTML-escaped)
	tokSGR         // the parameter bytes of an SGR sequence (ESC [ params m)
)

// scanner splits terminal output into printable text and SGR sequences,
// silently consuming every other escape sequence and control character.
// Every input byte is examined a bounded number of times, so a full scan is
// linear in the input length.
type scanner struct {
	s string
	i int
}

// next returns the next token. For tokText the token is a non-empty run of
// printable text; for tokSGR it is the SGR parameter string (digits, ';' and
// ':' only, possibly empty).
func (sc *scanner) next() (kind int, tok string) {
	for sc.i < len(sc.s) {
		if t := sc.text(); t != "" {
			return tokText, t
		}
		// sc.s[sc.i] is an ESC, another control, or an invalid byte.
		switch c := sc.s[sc.i]; {
		case c == 0x1b:
			if params, ok := sc.escape(); ok {
				return tokSGR, params
			}
		case c < utf8.RuneSelf:
			sc.i++ // C0 control or DEL
		default:
			r, size := utf8.DecodeRuneInString(sc.s[sc.i:])
			sc.i += size
			if r == utf8.RuneError {
				return tokText, "\uFFFD" // invalid UTF-8
			}
			// Otherwise a C1 control (U+0080..U+009F): dropped.
		}
	}
	return tokEnd, ""
}

// text consumes and returns the longest run of printable text at sc.i:
// tab, ASCII graphic characters and valid UTF-8 outside the C1 range
// (a literal U+FFFD in the input is valid and kept).
func (sc *scanner) text() string {
	s, start := sc.s, sc.i
	i := start
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			if (c < 0x20 && c != '\t') || c == 0x7f {
				break
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || (r >= 0x80 && r <= 0x9f) {
			break
		}
		i += size
	}
	sc.i = i
	return s[start:i]
}

// escape consumes the escape sequence starting with the ESC at sc.i. It
// reports the parameters and true if the sequence is a well-formed SGR
// sequence; everything else is consumed and dropped. A byte that cannot
// continue the sequence ends it and is left to be scanned again (so an ESC
// starts a new sequence and text stays text). A sequence cut off by the end
// of the input is dropped whole.
func (sc *scanner) escape() (params string, sgr bool) {
	s := sc.s
	i := sc.i + 1
	if i >= len(s) {
		sc.i = i // lone ESC at the end
		return "", false
	}
	switch c := s[i]; {
	case c == '[':
		return sc.csi(i + 1)
	case c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_':
		// OSC, DCS, SOS, PM, APC: a control string ended by BEL or ST.
		sc.controlString(i + 1)
	case c >= 0x20 && c <= 0x2f:
		// nF escape: intermediates, then a final byte 0x30..0x7E.
		for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
			i++
		}
		if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
			i++
		}
		sc.i = i
	case c >= 0x30 && c <= 0x7e:
		sc.i = i + 1 // two-byte escape such as ESC 7 or ESC c
	default:
		sc.i = i // not an escape sequence: drop the ESC alone
	}
	return "", false
}

// csi consumes a control sequence whose parameters start at i (just after
// "ESC ["): parameter and intermediate bytes 0x20..0x3F, then a final byte
// 0x40..0x7E. Only "ESC [ <digits ; :> m" with at most maxParams parameters
// is reported as SGR.
func (sc *scanner) csi(i int) (params string, sgr bool) {
	s := sc.s
	start := i
	plain := true // only digits, ';' and ':' so far
	n := 1        // number of parameters
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
		case c == ';' || c == ':':
			n++
		case c >= 0x20 && c <= 0x3f:
			plain = false // private marker (< = > ?) or intermediate byte
		case c >= 0x40 && c <= 0x7e:
			sc.i = i + 1
			if c == 'm' && plain && n <= maxParams {
				return s[start:i], true
			}
			return "", false
		default:
			sc.i = i // aborted by a control or non-ASCII byte
			return "", false
		}
	}
	sc.i = i // truncated
	return "", false
}

// controlString consumes the body of an OSC/DCS/SOS/PM/APC string starting
// at i, up to and including its terminator: BEL or ST (ESC \). An ESC not
// followed by '\' ends the string and is scanned again. An unterminated
// string runs to the end of the input.
func (sc *scanner) controlString(i int) {
	s := sc.s
	j := strings.IndexAny(s[i:], "\x07\x1b")
	switch {
	case j < 0:
		sc.i = len(s)
	case s[i+j] == 0x07:
		sc.i = i + j + 1
	case i+j+1 < len(s) && s[i+j+1] == '\\':
		sc.i = i + j + 2
	default:
		sc.i = i + j
	}
}

// Style flags.
const (
	bold = 1 << iota
	dim
	italic
	underline
	strike
	inverse
)

// color is a palette colour: 0 means the default colour, n+1 means index n
// of the 256-colour palette.
type color uint16

// style is the SGR state. The zero value is the default style (no span).
type style struct {
	flags  uint8
	fg, bg color
}

// apply updates st with an SGR parameter string. Empty parameters count as
// 0. Colour parameters out of range are ignored; an unknown extended colour
// form stops processing of the rest of the sequence.
func (st *style) apply(params string) {
	var (
		v   [maxParams]int  // parameter values
		sub [maxParams]bool // v[k] followed a ':' (is a sub-parameter)
		n   = 1
	)
	for i := 0; i < len(params); i++ {
		c := params[i]
		if c == ';' || c == ':' {
			if n == maxParams {
				return // too many parameters (scanner.csi already rejects these)
			}
			sub[n] = c == ':'
			n++
			continue
		}
		v[n-1] = min(v[n-1]*10+int(c-'0'), maxNumber)
	}

	for k := 0; k < n; {
		// A parameter and its colon sub-parameters form one group.
		end := k + 1
		for end < n && sub[end] {
			end++
		}
		if end > k+1 {
			st.applyColon(v[k:end])
			k = end
			continue
		}
		switch p := v[k]; p {
		case 38, 48, 58: // extended colour: 5;n or 2;r;g;b
			var c color
			var ok bool
			switch {
			case k+2 < n && v[k+1] == 5:
				c, ok = indexColor(v[k+2])
				k += 3
			case k+4 < n && v[k+1] == 2:
				c, ok = rgbColor(v[k+2], v[k+3], v[k+4])
				k += 5
			default:
				return // malformed: ignore the rest
			}
			if ok {
				st.setColor(p, c)
			}
		default:
			st.applySimple(p)
			k++
		}
	}
}

// applyColon applies a parameter with colon sub-parameters (ITU T.416 form):
// 38:5:n, 38:2:r:g:b, 38:2:cs:r:g:b (and 48, 58), and 4:n underline styles.
// Other groups are ignored.
func (st *style) applyColon(g []int) {
	switch g[0] {
	case 4:
		if g[1] == 0 {
			st.flags &^= underline
		} else {
			st.flags |= underline
		}
	case 38, 48, 58:
		var c color
		var ok bool
		switch {
		case g[1] == 5 && len(g) == 3:
			c, ok = indexColor(g[2])
		case g[1] == 2 && len(g) == 5:
			c, ok = rgbColor(g[2], g[3], g[4])
		case g[1] == 2 && len(g) == 6: // with colour-space id
			c, ok = rgbColor(g[3], g[4], g[5])
		}
		if ok {
			st.setColor(g[0], c)
		}
	}
}

// setColor sets the foreground (38) or background (48) colour. Underline
// colour (58) is parsed so its arguments are consumed, but not rendered.
func (st *style) setColor(which int, c color) {
	switch which {
	case 38:
		st.fg = c
	case 48:
		st.bg = c
	}
}

// applySimple applies a single-number SGR parameter. Unsupported ones
// (blink, conceal, fonts, …) are ignored.
func (st *style) applySimple(p int) {
	switch {
	case p == 0:
		*st = style{}
	case p == 1:
		st.flags |= bold
	case p == 2:
		st.flags |= dim
	case p == 3:
		st.flags |= italic
	case p == 4:
		st.flags |= underline
	case p == 7:
		st.flags |= inverse
	case p == 9:
		st.flags |= strike
	case p == 22:
		st.flags &^= bold | dim
	case p == 23:
		st.flags &^= italic
	case p == 24:
		st.flags &^= underline
	case p == 27:
		st.flags &^= inverse
	case p == 29:
		st.flags &^= strike
	case p >= 30 && p <= 37:
		st.fg = color(p - 30 + 1)
	case p == 39:
		st.fg = 0
	case p >= 40 && p <= 47:
		st.bg = color(p - 40 + 1)
	case p == 49:
		st.bg = 0
	case p >= 90 && p <= 97:
		st.fg = color(p - 90 + 8 + 1)
	case p >= 100 && p <= 107:
		st.bg = color(p - 100 + 8 + 1)
	}
}

// writeClasses writes the space-separated class list for a non-zero style.
// With inverse, the foreground and background colours swap roles.
func (st style) writeClasses(b *strings.Builder) {
	sep := ""
	add := func(class string) {
		b.WriteString(sep)
		b.WriteString(class)
		sep = " "
	}
	for _, f := range [...]struct {
		flag  uint8
		class string
	}{{bold, "a-b"}, {dim, "a-d"}, {italic, "a-i"}, {underline, "a-u"}, {strike, "a-s"}, {inverse, "a-r"}} {
		if st.flags&f.flag != 0 {
			add(f.class)
		}
	}
	fg, bg := st.fg, st.bg
	if st.flags&inverse != 0 {
		fg, bg = bg, fg
	}
	if fg != 0 {
		add(fgClass[fg-1])
	}
	if bg != 0 {
		add(bgClass[bg-1])
	}
}

// fgClass and bgClass hold the class names of the 256 palette colours:
// a-fgN / a-bgN for the 16 base colours, a-fg-N / a-bg-N for 16..255.
var fgClass, bgClass = paletteClasses("a-fg"), paletteClasses("a-bg")

func paletteClasses(prefix string) (c [256]string) {
	for i := range c {
		if i < 16 {
			c[i] = prefix + strconv.Itoa(i)
		} else {
			c[i] = prefix + "-" + strconv.Itoa(i)
		}
	}
	return c
}

// indexColor returns palette colour n, if it is in 0..255.
func indexColor(n int) (color, bool) {
	if n < 0 || n > 255 {
		return 0, false
	}
	return color(n + 1), true
}

// rgbColor returns the 256-colour palette entry nearest to a truecolour
// value, if every component is in 0..255. Only the fixed part of the palette
// (the 6x6x6 cube, 16..231, and the grey ramp, 232..255) is considered; the
// 16 base colours depend on the theme.
func rgbColor(r, g, b int) (color, bool) {
	if r > 255 || g > 255 || b > 255 {
		return 0, false
	}
	return color(nearest256(r, g, b) + 1), true
}

// cubeLevels are the channel intensities of the xterm 6x6x6 colour cube.
var cubeLevels = [6]int{0, 95, 135, 175, 215, 255}

// nearest256 returns the index (16..255) of the palette colour closest to
// r, g, b in squared RGB distance, comparing the nearest cube colour with
// the nearest grey.
func nearest256(r, g, b int) int {
	ri, gi, bi := cubeIndex(r), cubeIndex(g), cubeIndex(b)
	cubeDist := dist2(r, g, b, cubeLevels[ri], cubeLevels[gi], cubeLevels[bi])

	grey := min(max((r+g+b)/3-3, 0)/10, 23) // grey ramp: 8 + 10*i
	gv := 8 + 10*grey
	if dist2(r, g, b, gv, gv, gv) < cubeDist {
		return 232 + grey
	}
	return 16 + 36*ri + 6*gi + bi
}

// cubeIndex returns the index of the cube level nearest to v (0..255).
func cubeIndex(v int) int {
	switch {
	case v < 48:
		return 0
	case v < 115:
		return 1
	default:
		return (v - 35) / 40
	}
}

// dist2 is the squared Euclidean distance between two RGB colours.
func dist2(r1, g1, b1, r2, g2, b2 int) int {
	dr, dg, db := r1-r2, g1-g2, b1-b2
	return dr*dr + dg*dg + db*db
}
