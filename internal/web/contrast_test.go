package web

import (
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kici-dev/kici/internal/web/ansi"
)

// themes reads the colour custom properties of a style sheet: those of
// its first :root block (the light theme) and, over them, those of its
// prefers-color-scheme: dark block.
func themes(t *testing.T, css string) (light, dark map[string]string) {
	t.Helper()
	prop := regexp.MustCompile(`--([a-z0-9-]+):\s*(#[0-9a-fA-F]{6})\b`)
	read := func(block string) map[string]string {
		m := map[string]string{}
		for _, p := range prop.FindAllStringSubmatch(block, -1) {
			m[p[1]] = strings.ToLower(p[2])
		}
		return m
	}
	before, after, ok := strings.Cut(css, "@media (prefers-color-scheme: dark)")
	if !ok {
		t.Fatal("the style sheet has no prefers-color-scheme: dark block")
	}
	darkBlock, _, _ := strings.Cut(after, "}\n}")
	light, dark = read(before), map[string]string{}
	for k, v := range light {
		dark[k] = v
	}
	for k, v := range read(darkBlock) {
		dark[k] = v
	}
	return light, dark
}

// luminance is a colour's relative luminance, as WCAG 2 defines it.
func luminance(t *testing.T, hex string) float64 {
	t.Helper()
	v, err := strconv.ParseUint(strings.TrimPrefix(hex, "#"), 16, 32)
	if err != nil {
		t.Fatalf("colour %q: %v", hex, err)
	}
	var l float64
	for i, w := range []float64{0.2126, 0.7152, 0.0722} {
		c := float64(v>>(16-8*i)&0xff) / 255
		if c <= 0.04045 {
			c /= 12.92
		} else {
			c = math.Pow((c+0.055)/1.055, 2.4)
		}
		l += w * c
	}
	return l
}

func contrast(t *testing.T, a, b string) float64 {
	la, lb := luminance(t, a), luminance(t, b)
	return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)
}

// TestTextContrastMeetsWCAGAA: in both themes, every text colour of the
// dashboard reads at 4.5:1 or more on the backgrounds it is drawn on (the
// page and the panels), and so does every base colour a log line can ask
// for on the log's background.
func TestTextContrastMeetsWCAGAA(t *testing.T) {
	page, err := os.ReadFile("static/kici.css")
	if err != nil {
		t.Fatal(err)
	}
	pageLight, pageDark := themes(t, string(page))
	ansiLight, ansiDark := themes(t, ansi.CSS())
	for _, th := range []struct {
		name       string
		page, ansi map[string]string
	}{{"light", pageLight, ansiLight}, {"dark", pageDark, ansiDark}} {
		checked := 0
		for _, bg := range []string{"bg", "panel"} {
			for _, fg := range []string{"fg", "muted", "link", "ok", "bad", "warn", "run"} {
				a, b := th.page[fg], th.page[bg]
				if a == "" || b == "" {
					t.Fatalf("%s theme: --%s or --%s is not a #rrggbb colour in kici.css", th.name, fg, bg)
				}
				if r := contrast(t, a, b); r < 4.5 {
					t.Errorf("%s theme: --%s %s on --%s %s has contrast %.2f, want 4.5 or more", th.name, fg, a, bg, b, r)
				}
				checked++
			}
		}
		for n := range 16 {
			a := th.ansi["ansi-"+strconv.Itoa(n)]
			if a == "" {
				t.Fatalf("%s theme: --ansi-%d is not a #rrggbb colour", th.name, n)
			}
			if r := contrast(t, a, th.page["bg"]); r < 4.5 {
				t.Errorf("%s theme: log colour --ansi-%d %s on the log's background %s has contrast %.2f, want 4.5 or more", th.name, n, a, th.page["bg"], r)
			}
			checked++
		}
		if checked != 30 {
			t.Errorf("%s theme: %d pairs checked, want 30", th.name, checked)
		}
	}
}

// TestContrastFormula pins the contrast function on known pairs.
func TestContrastFormula(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want float64
	}{{"#000000", "#ffffff", 21}, {"#777777", "#ffffff", 4.48}, {"#ffffff", "#ffffff", 1}} {
		if got := contrast(t, c.a, c.b); math.Abs(got-c.want) > 0.01 {
			t.Errorf("contrast(%s, %s) = %.3f, want %.2f", c.a, c.b, got, c.want)
		}
	}
}
