package ansi

import (
	"fmt"
	"html"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLine(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		// Plain text and escaping.
		{"empty", "", ""},
		{"plain", "hello world", "hello world"},
		{"escape", `a & b < c > d "e" 'f'`, `a &amp; b &lt; c &gt; d &#34;e&#34; &#39;f&#39;`},
		{"unicode", "naïve ✓ 日本", "naïve ✓ 日本"},

		// Basic colours and styles.
		{"fg red", "\x1b[31mred\x1b[0m", `<span class="a-fg1">red</span>`},
		{"fg bright", "\x1b[91mx", `<span class="a-fg9">x</span>`},
		{"bg", "\x1b[42mx", `<span class="a-bg2">x</span>`},
		{"bg bright", "\x1b[107mx", `<span class="a-bg15">x</span>`},
		{"fg black", "\x1b[30mx", `<span class="a-fg0">x</span>`},
		{"bold", "\x1b[1mx", `<span class="a-b">x</span>`},
		{"dim", "\x1b[2mx", `<span class="a-d">x</span>`},
		{"italic", "\x1b[3mx", `<span class="a-i">x</span>`},
		{"underline", "\x1b[4mx", `<span class="a-u">x</span>`},
		{"strike", "\x1b[9mx", `<span class="a-s">x</span>`},
		{"combined", "\x1b[1;4;33;44mx", `<span class="a-b a-u a-fg3 a-bg4">x</span>`},
		{"separate sequences accumulate", "\x1b[1m\x1b[31mx", `<span class="a-b a-fg1">x</span>`},
		{"text escaped inside span", "\x1b[31m<b>&", `<span class="a-fg1">&lt;b&gt;&amp;</span>`},

		// Resets.
		{"reset 0", "\x1b[31ma\x1b[0mb", `<span class="a-fg1">a</span>b`},
		{"reset empty", "\x1b[31ma\x1b[mb", `<span class="a-fg1">a</span>b`},
		{"reset leading zeros", "\x1b[31ma\x1b[000mb", `<span class="a-fg1">a</span>b`},
		{"reset then colour in one", "\x1b[1ma\x1b[0;32mb", `<span class="a-b">a</span><span class="a-fg2">b</span>`},
		{"empty param is reset", "\x1b[1ma\x1b[;32mb", `<span class="a-b">a</span><span class="a-fg2">b</span>`},
		{"22 clears bold and dim", "\x1b[1;2;3ma\x1b[22mb", `<span class="a-b a-d a-i">a</span><span class="a-i">b</span>`},
		{"23", "\x1b[3;31ma\x1b[23mb", `<span class="a-i a-fg1">a</span><span class="a-fg1">b</span>`},
		{"24", "\x1b[4ma\x1b[24mb", `<span class="a-u">a</span>b`},
		{"29", "\x1b[9ma\x1b[29mb", `<span class="a-s">a</span>b`},
		{"39 default fg", "\x1b[31;42ma\x1b[39mb", `<span class="a-fg1 a-bg2">a</span><span class="a-bg2">b</span>`},
		{"49 default bg", "\x1b[31;42ma\x1b[49mb", `<span class="a-fg1 a-bg2">a</span><span class="a-fg1">b</span>`},
		{"later colour wins", "\x1b[31;32mx", `<span class="a-fg2">x</span>`},
		{"unknown params ignored", "\x1b[5;31;8;53mx", `<span class="a-fg1">x</span>`},

		// Span structure: no empty spans, no redundant spans, closed at end.
		{"no empty span", "\x1b[31m\x1b[0mx", "x"},
		{"trailing sgr", "x\x1b[31m", "x"},
		{"same style continues", "\x1b[31ma\x1b[31mb", `<span class="a-fg1">ab</span>`},
		{"style round trip", "\x1b[31ma\x1b[1m\x1b[22mb", `<span class="a-fg1">ab</span>`},
		{"dropped sequence keeps span", "\x1b[31ma\x1b[2Kb", `<span class="a-fg1">ab</span>`},
		{"switch", "\x1b[31ma\x1b[32mb\x1b[0mc", `<span class="a-fg1">a</span><span class="a-fg2">b</span>c`},

		// Inverse swaps the colour roles.
		{"inverse", "\x1b[7mx", `<span class="a-r">x</span>`},
		{"inverse fg", "\x1b[7;31mx", `<span class="a-r a-bg1">x</span>`},
		{"inverse fg bg", "\x1b[31;42;7mx", `<span class="a-r a-fg2 a-bg1">x</span>`},
		{"27", "\x1b[7;31ma\x1b[27mb", `<span class="a-r a-bg1">a</span><span class="a-fg1">b</span>`},

		// 256 colours.
		{"256 base", "\x1b[38;5;1mx", `<span class="a-fg1">x</span>`},
		{"256 bright base", "\x1b[38;5;15mx", `<span class="a-fg15">x</span>`},
		{"256 cube", "\x1b[38;5;196mx", `<span class="a-fg-196">x</span>`},
		{"256 grey bg", "\x1b[48;5;255mx", `<span class="a-bg-255">x</span>`},
		{"256 both", "\x1b[38;5;16;48;5;231mx", `<span class="a-fg-16 a-bg-231">x</span>`},
		{"256 then more", "\x1b[38;5;100;1mx", `<span class="a-b a-fg-100">x</span>`},
		{"256 out of range ignored", "\x1b[31;38;5;256mx", `<span class="a-fg1">x</span>`},
		{"256 huge ignored", "\x1b[31;38;5;99999999999999999999999mx", `<span class="a-fg1">x</span>`},
		{"256 truncated", "\x1b[1;38;5mx", `<span class="a-b">x</span>`},
		{"256 colon", "\x1b[38:5:202mx", `<span class="a-fg-202">x</span>`},
		{"extended unknown mode stops", "\x1b[1;38;9;31mx", `<span class="a-b">x</span>`},
		{"underline colour consumed", "\x1b[58;5;1mx", "x"},
		{"underline colour rgb consumed", "\x1b[58;2;1;3;4mx", "x"},

		// Truecolour maps to the nearest 256-palette entry (16..255).
		{"rgb red", "\x1b[38;2;255;0;0mx", `<span class="a-fg-196">x</span>`},
		{"rgb black", "\x1b[38;2;0;0;0mx", `<span class="a-fg-16">x</span>`},
		{"rgb white", "\x1b[48;2;255;255;255mx", `<span class="a-bg-231">x</span>`},
		{"rgb grey", "\x1b[38;2;128;128;128mx", `<span class="a-fg-244">x</span>`},
		{"rgb near cube", "\x1b[38;2;100;140;170mx", `<span class="a-fg-67">x</span>`},
		{"rgb colon", "\x1b[38:2:255:135:0mx", `<span class="a-fg-208">x</span>`},
		{"rgb colon colourspace", "\x1b[48:2::255:135:0mx", `<span class="a-bg-208">x</span>`},
		{"rgb out of range", "\x1b[38;2;256;0;0mx", "x"},
		{"rgb truncated", "\x1b[38;2;1;2mx", "x"},
		{"4:3 curly underline", "\x1b[4:3mx", `<span class="a-u">x</span>`},
		{"4:0 no underline", "\x1b[4m\x1b[4:0mx", "x"},

		// Dropped sequences.
		{"cursor up", "a\x1b[2Ab", "ab"},
		{"erase line", "\x1b[2Kprogress", "progress"},
		{"cursor position", "a\x1b[10;20Hb", "ab"},
		{"private mode", "a\x1b[?25lb\x1b[?25h", "ab"},
		{"private m is not sgr", "a\x1b[>4;2mb", "ab"},
		{"intermediate m is not sgr", "a\x1b[1 mb", "ab"},
		{"osc title bel", "\x1b]0;evil title\x07text", "text"},
		{"osc title st", "\x1b]2;title\x1b\\text", "text"},
		{"osc 8 link", "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\", "click"},
		{"osc 8 javascript link", "\x1b]8;;javascript:alert(1)\x07x\x1b]8;;\x07", "x"},
		{"osc ended by other esc", "\x1b]0;t\x1b[31mx", `<span class="a-fg1">x</span>`},
		{"dcs", "a\x1bPq#0;2;0;0;0\x1b\\b", "ab"},
		{"apc", "a\x1b_payload\x1b\\b", "ab"},
		{"charset", "a\x1b(Bb", "ab"},
		{"two byte escapes", "a\x1b7\x1b8\x1bcb\x1b=", "ab"},
		{"esc followed by text byte", "a\x1b\x01b", "ab"},
		{"esc esc", "a\x1b\x1b[31mb", `a<span class="a-fg1">b</span>`},
		{"csi aborted by control", "a\x1b[3\x01b", "ab"},
		{"csi aborted by non-ascii", "a\x1b[3é", "aé"},
		{"too many params", "\x1b[" + strings.Repeat("1;", 32) + "31mx", "x"},
		{"max params", "\x1b[" + strings.Repeat("1;", 31) + "31mx", `<span class="a-b a-fg1">x</span>`},

		// Control characters.
		{"tab kept", "a\tb", "a\tb"},
		{"c0 dropped", "a\x00b\x07c\x08d\re\nf\x7fg", "abcdefg"},
		{"c1 dropped", "a\u009bb\u0085c", "abc"},

		// Truncated sequences at the end.
		{"lone esc", "ab\x1b", "ab"},
		{"truncated csi", "ab\x1b[", "ab"},
		{"truncated csi params", "ab\x1b[31;4", "ab"},
		{"truncated osc", "ab\x1b]8;;http://x", "ab"},
		{"truncated st", "ab\x1b]0;t\x1b", "ab"},
		{"truncated nF", "ab\x1b(", "ab"},
		{"truncated in span", "\x1b[31ma\x1b[", `<span class="a-fg1">a</span>`},

		// Invalid UTF-8.
		{"invalid byte", "a\xffb", "a\uFFFDb"},
		{"truncated rune", "a\xe6\x97", "a\uFFFD\uFFFD"},
		{"surrogate", "\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"},
		{"raw 8-bit csi", "a\x9b31mb", "a\uFFFD31mb"},
		{"literal replacement char", "\uFFFD", "\uFFFD"},
		{"invalid inside span", "\x1b[1m\xc0", `<span class="a-b">` + "\uFFFD</span>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Line(tt.in)
			if got != tt.want {
				t.Errorf("Line(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			checkLine(t, tt.in, got)
		})
	}
}

func TestStrip(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain <b>", "plain <b>"},
		{"\x1b[1;31mred\x1b[0m and \x1b[38;2;1;2;3mrgb", "red and rgb"},
		{"\x1b]8;;https://x/\x1b\\link\x1b]8;;\x1b\\", "link"},
		{"a\tb\r\n", "a\tb"},
		{"\x1b[2K\x1b[1Gprogress 50%", "progress 50%"},
		{"bad\xff", "bad\uFFFD"},
		{"trunc\x1b[3", "trunc"},
	}
	for _, tt := range tests {
		if got := Strip(tt.in); got != tt.want {
			t.Errorf("Strip(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestXSS(t *testing.T) {
	tests := []string{
		`<script>alert(1)</script>`,
		`"><img src=x onerror=alert(1)>`,
		`'><svg onload=alert(1)>`,
		"<scr\x1b[31mipt>alert(1)</scr\x1b[0mipt>",
		"\x1b[31m<\x1b[32mscript\x1b[0m>",
		"<\x1b]0;x\x07img src=x onerror=alert(1)>",
		"\x1b]8;;javascript:alert(1)\x1b\\<a href=x>click</a>\x1b]8;;\x1b\\",
		"<\x00script>",
		"&lt;script&gt;",
		"<span class=\"a-fg1\">forged</span>",
		"\x1b[31m</span><script>x</script>",
		"<!--\x1b[1m--><![CDATA[x]]>",
		"\x1b[38;5;1\"><script>m",
	}
	for _, in := range tests {
		out := Line(in)
		checkLine(t, in, out)
		if strings.Contains(strings.ToLower(out), "<script") || strings.Contains(out, "<img") ||
			strings.Contains(out, "<a ") || strings.Contains(out, "<svg") {
			t.Errorf("Line(%q) = %q contains markup from the input", in, out)
		}
	}
	// An escape inside a tag name must not let the halves join into a tag.
	got := Line("<scr\x1b[31mipt>")
	if want := `&lt;scr<span class="a-fg1">ipt&gt;</span>`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestEveryClassHasCSS checks that the stylesheet defines every class that
// Line can emit, and light and dark values for the 16 base colours.
func TestEveryClassHasCSS(t *testing.T) {
	css := CSS()
	classes := []string{"a-b", "a-d", "a-i", "a-u", "a-s", "a-r"}
	for i := range 256 {
		classes = append(classes, fgClass[i], bgClass[i])
	}
	for _, c := range classes {
		if !regexp.MustCompile(`(?m)^\.` + regexp.QuoteMeta(c) + ` \{`).MatchString(css) {
			t.Errorf("CSS has no rule for .%s", c)
		}
	}
	dark := css[strings.Index(css, "@media (prefers-color-scheme: dark)"):]
	for i := range 16 {
		v := fmt.Sprintf("--ansi-%d:", i)
		if strings.Count(css, v) != 2 || !strings.Contains(dark, v) {
			t.Errorf("CSS must define %s for light and dark", v)
		}
	}
	if strings.Contains(css, "style=") || strings.Contains(css, "url(") || strings.Contains(css, "@import") {
		t.Error("CSS must be self-contained")
	}
}

func TestNearest256(t *testing.T) {
	// Every palette colour maps to itself (ties in the cube/grey overlap
	// may resolve to the equal-valued twin).
	for i := 16; i < 256; i++ {
		r, g, b := paletteRGB(i)
		got := nearest256(r, g, b)
		gr, gg, gb := paletteRGB(got)
		if gr != r || gg != g || gb != b {
			t.Errorf("nearest256(%d,%d,%d) = %d, want %d", r, g, b, got, i)
		}
	}
	// Exhaustive over a coarse grid: the result is at least as close as any
	// palette entry 16..255.
	for r := 0; r < 256; r += 15 {
		for g := 0; g < 256; g += 15 {
			for b := 0; b < 256; b += 15 {
				got := nearest256(r, g, b)
				gr, gg, gb := paletteRGB(got)
				d := dist2(r, g, b, gr, gg, gb)
				for i := 16; i < 256; i++ {
					pr, pg, pb := paletteRGB(i)
					// The cube/grey heuristic is within a small margin of optimal.
					if best := dist2(r, g, b, pr, pg, pb); best*3 < d {
						t.Fatalf("nearest256(%d,%d,%d) = %d (d=%d), but %d has d=%d", r, g, b, got, d, i, best)
					}
				}
			}
		}
	}
}

// paletteRGB returns the xterm RGB value of palette index 16..255.
func paletteRGB(i int) (r, g, b int) {
	if i >= 232 {
		v := 8 + 10*(i-232)
		return v, v, v
	}
	i -= 16
	return cubeLevels[i/36], cubeLevels[i/6%6], cubeLevels[i%6]
}

func TestLinear(t *testing.T) {
	// Pathological inputs of 1 MiB must convert quickly and with bounded
	// output; a quadratic algorithm would take minutes here.
	const size = 1 << 20
	for _, in := range []string{
		strings.Repeat("\x1b[", size/2),
		strings.Repeat("\x1b]", size/2),
		"\x1b]" + strings.Repeat("\x1b", size),
		strings.Repeat("\x1b[1m<\x1b[22m>", size/12),
		"\x1b[" + strings.Repeat("9", size) + "m",
		strings.Repeat("\xff", size),
		strings.Repeat("\x1b[38;2;1;2;3mx", size/14),
	} {
		out := Line(in)
		if len(out) > 20*len(in) {
			t.Errorf("output %d bytes for %d bytes of input", len(out), len(in))
		}
		if s := Strip(in); len(s) > 3*len(in) {
			t.Errorf("strip output %d bytes for %d bytes of input", len(s), len(in))
		}
	}
}

// spanOpen matches the only opening tag Line may produce.
var spanOpen = regexp.MustCompile(`^<span class="(a-[a-z0-9-]+(?: a-[a-z0-9-]+)*)">`)

// validClasses is the set of class names Line may emit.
var validClasses = func() map[string]bool {
	m := map[string]bool{"a-b": true, "a-d": true, "a-i": true, "a-u": true, "a-s": true, "a-r": true}
	for i := range 256 {
		m[fgClass[i]] = true
		m[bgClass[i]] = true
	}
	return m
}()

// entity matches the only character references Line may produce.
var entity = regexp.MustCompile(`^&(?:amp|lt|gt|#34|#39);`)

// parseLine checks the safety properties of Line's output and returns its
// text content (still escaped). Every '<' must start one of our own span
// tags, spans must be balanced, unnested and non-empty, and the text must
// contain no '>', quotes, or '&' other than the five entities.
func parseLine(out string) (text string, err error) {
	if !utf8.ValidString(out) {
		return "", fmt.Errorf("invalid UTF-8")
	}
	var b strings.Builder
	open, empty := false, false
	for i := 0; i < len(out); {
		rest := out[i:]
		switch rest[0] {
		case '<':
			if strings.HasPrefix(rest, "</span>") {
				if !open {
					return "", fmt.Errorf("unbalanced </span> at %d", i)
				}
				if empty {
					return "", fmt.Errorf("empty span at %d", i)
				}
				open = false
				i += len("</span>")
				continue
			}
			m := spanOpen.FindStringSubmatch(rest)
			if m == nil {
				return "", fmt.Errorf("foreign markup at %d: %.40q", i, rest)
			}
			if open {
				return "", fmt.Errorf("nested span at %d", i)
			}
			for _, c := range strings.Fields(m[1]) {
				if !validClasses[c] {
					return "", fmt.Errorf("unknown class %q", c)
				}
			}
			open, empty = true, true
			i += len(m[0])
		case '>', '"', '\'':
			return "", fmt.Errorf("unescaped %q at %d", rest[0], i)
		case '&':
			m := entity.FindString(rest)
			if m == "" {
				return "", fmt.Errorf("bare & at %d: %.20q", i, rest)
			}
			b.WriteString(m)
			empty = false
			i += len(m)
		default:
			if rest[0] < 0x20 && rest[0] != '\t' || rest[0] == 0x7f {
				return "", fmt.Errorf("control byte %#x at %d", rest[0], i)
			}
			b.WriteByte(rest[0])
			empty = false
			i++
		}
	}
	if open {
		return "", fmt.Errorf("unclosed span")
	}
	return b.String(), nil
}

// checkLine asserts every property Line(in) == out must have.
func checkLine(t *testing.T, in, out string) {
	t.Helper()
	text, err := parseLine(out)
	if err != nil {
		t.Fatalf("Line(%q) = %q: %v", in, out, err)
	}
	strip := Strip(in)
	if got := html.UnescapeString(text); got != strip {
		t.Fatalf("text of Line(%q) = %q, Strip = %q", in, got, strip)
	}
	if got, want := Line(strip), html.EscapeString(strip); got != want {
		t.Fatalf("Line(Strip(%q)) = %q, want %q", in, got, want)
	}
	if Strip(strip) != strip {
		t.Fatalf("Strip not idempotent for %q", in)
	}
}

func FuzzLine(f *testing.F) {
	for _, s := range []string{
		"", "plain", "\x1b[1;31mred\x1b[0m", "\x1b[38;5;200;48;2;1;2;3mx",
		"\x1b[38:2::1:2:3mx", "\x1b]8;;http://x\x1b\\l\x1b]8;;\x07",
		"<scr\x1b[31mipt>", `"><img src=x onerror=alert(1)>`, "a\xffb\x1b",
		"\x1b[?25l\x1b[2K\r\t", "\x1bP\x1b\\\x1b(B\x1b7", "\u009b31m",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := Line(in)
		checkLine(t, in, out)
		if strings.ContainsRune(Strip(in), 0x1b) {
			t.Fatalf("Strip(%q) contains ESC", in)
		}
	})
}

func BenchmarkLine(b *testing.B) {
	var sb strings.Builder
	for i := 0; sb.Len() < 200; i++ {
		fmt.Fprintf(&sb, "\x1b[%d;1m[%02d] ok\x1b[0m <build> ", 31+i%7, i)
	}
	line := sb.String()[:200]
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		Line(line)
	}
}

func BenchmarkStrip(b *testing.B) {
	line := strings.Repeat("\x1b[32mok\x1b[0m plain text ", 10)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		Strip(line)
	}
}
