package runner_test

import (
	"bytes"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/agent/runner"
)

// TestMask covers the ways a step can print a secret so that a reader (or
// a terminal) sees it although it is not there byte for byte.
func TestMask(t *testing.T) {
	t.Parallel()
	const secret = "hunter2!pw"
	b64 := base64.StdEncoding.EncodeToString
	tests := []struct {
		name   string
		values []string
		in     string
		want   string
	}{
		{name: "plain", values: []string{secret}, in: "pw=" + secret + ".", want: "pw=***."},
		{name: "twice, and overlapping", values: []string{"abcabc"}, in: "abcabcabc abcabc", want: "*** ***"},
		{name: "base64 at offset 0", values: []string{secret}, in: b64([]byte(secret + "Z")), want: "***1o="},
		{name: "base64 at offset 1", values: []string{secret}, in: b64([]byte("x" + secret + "Z")), want: "eG***da"},
		{name: "base64 at offset 2", values: []string{secret}, in: b64([]byte("xy" + secret + "Z")), want: "eHl***Wg=="},
		{
			name:   "HTTP Basic auth",
			values: []string{secret},
			in:     "Authorization: Basic " + b64([]byte("user:"+secret)),
			want:   "Authorization: Basic dXNlcjp***",
		},
		{
			name:   "URL-safe base64",
			values: []string{"a?>~~?>b"},
			in:     "tok=" + base64.URLEncoding.EncodeToString([]byte("a?>~~?>b")),
			want:   "tok=***I=",
		},
		{name: "CR inside", values: []string{secret}, in: "hunter\r2!pw ok", want: "*** ok"},
		{name: "ANSI reset inside", values: []string{secret}, in: "hun\x1b[0mter2!pw", want: "***"},
		{name: "several controls inside", values: []string{secret}, in: "h\x00u\tn\x1b[1;31mt\x7fe\x1b(Br\x1b72\xc2\x9b!pw", want: "***"},
		{name: "empty OSC inside", values: []string{secret}, in: "hun\x1b]0;\x07ter2!pw", want: "***"},
		{name: "a window title holding a secret goes whole", values: []string{secret}, in: "\x1b]0;" + secret + "\x07 done", want: "*** done"},
		{name: "split inside a window title", values: []string{secret}, in: "\x1b]2;hun\rter2!pw\x1b\\ done", want: "*** done"},
		{name: "an OSC 52 clipboard write of it goes whole", values: []string{secret}, in: "\x1b]52;c;" + b64([]byte(secret)) + "\x07", want: "***"},
		{
			name:   "colours around a secret are kept",
			values: []string{secret},
			in:     "\x1b[31mERROR " + secret + "\x1b[0m",
			want:   "\x1b[31mERROR ***\x1b[0m",
		},
		{
			// Masking "secret" alone would leave "sec\x1b***Xret", which a
			// terminal shows as "secret" (ESC * * * X is one sequence).
			name:   "a sequence cut by the secret goes with it",
			values: []string{"secret"},
			in:     "sec\x1bsecretXret",
			want:   "sec***Xret",
		},
		{name: "a short value as a word", values: []string{"ab"}, in: "ab x=ab [ab]", want: "*** x=*** [***]"},
		{name: "a short value inside words is kept", values: []string{"ab"}, in: "about cab tabs", want: "about cab tabs"},
		{name: "a one-character value", values: []string{"a"}, in: "a banana: a", want: "*** banana: ***"},
		{name: "a value with a control of its own", values: []string{"pass\tword"}, in: "pass\tword password", want: "*** ***"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := runner.MaskForTest(tc.values...)(tc.in); got != tc.want {
				t.Errorf("mask(%q): got %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestOutputMasksAcrossCuts checks that a secret split by controls is
// masked also where a long line is cut into pieces.
func TestOutputMasksAcrossCuts(t *testing.T) {
	t.Parallel()
	const secret = "hunter2!pw"
	pad := strings.Repeat("x", runner.MaxLineBytes-4)
	tests := []struct {
		name   string
		writes []string
	}{
		{name: "ANSI reset inside, across the cut", writes: []string{pad + "hun\x1b[0mter2!pw tail\n"}},
		{name: "CR inside, across the cut and two writes", writes: []string{pad + "hunt", "er\r2!pw tail\n"}},
		{name: "the cut inside the sequence", writes: []string{pad[2:] + "hun\x1b[0;1;31;42mter2!pw tail\n"}},
		{
			// The secret is the first text the line shows.
			name:   "after 64 KiB of colour codes, CR inside, across the cut",
			writes: []string{strings.Repeat("\x1b[0m", (runner.MaxLineBytes-4)/4) + "hun\rter2!pw tail\n"},
		},
		{name: "base64 across the cut", writes: []string{pad + base64.StdEncoding.EncodeToString([]byte("x"+secret)) + " tail\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder()
			w, done := runner.NewOutputForTest(0, rec, 0, secret)
			for _, s := range tc.writes {
				if _, err := w.Write([]byte(s)); err != nil {
					t.Fatalf("Write: %v", err)
				}
			}
			done()
			lines := rec.lines[0]
			if len(lines) != 2 {
				t.Fatalf("got %d lines, want 2 (the line cut once)", len(lines))
			}
			joined := strings.Join(lines, "")
			if !strings.Contains(joined, runner.Mask) {
				t.Errorf("got pieces %q and %q, want the secret masked", tail(lines[0]), lines[1])
			}
			if shown := stripControls(joined); strings.Contains(shown, secret) || strings.Contains(shown, "h1bnRlcjIhcH") {
				t.Errorf("got pieces %q and %q, want no secret shown", tail(lines[0]), lines[1])
			}
		})
	}
}

func tail(s string) string { return s[max(0, len(s)-30):] }

// ctlRE matches the control characters and sequences the fuzz test puts
// into a secret, independently of the masker's own parser.
var ctlRE = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]|\x1b\\][^\x07]*\x07|\x1b\\(B|\x1b7|[\x00-\x1f\x7f]")

func stripControls(s string) string { return ctlRE.ReplaceAllString(s, "") }

// ctlPieces are what the fuzz test splits secrets with.
var ctlPieces = []string{"\r", "\x1b[0m", "\x1b[1;31m", "\x1b]0;\x07", "\x00", "\x08", "\t", "\x1b(B", "\x1b7", "\x1b[K"}

// printable keeps the printable ASCII of b, but '*' (a secret built from
// the Mask's own characters could be rebuilt around a Mask).
func printable(b []byte) string {
	var out strings.Builder
	for _, c := range b {
		if c >= 0x20 && c < 0x7f && c != '*' {
			out.WriteByte(c)
		}
	}
	return out.String()
}

// stableBase64 is the part of the base64 of v (std or URL alphabet) that
// is the same for every k bytes before v and every byte after it: found by
// encoding with all-zero and all-one neighbours and keeping where the two
// agree, not with the masker's arithmetic.
func stableBase64(enc *base64.Encoding, v []byte, k int) string {
	a := enc.EncodeToString(slicesConcat(bytes.Repeat([]byte{0}, k), v, []byte{0}))
	b := enc.EncodeToString(slicesConcat(bytes.Repeat([]byte{0xff}, k), v, []byte{0xff}))
	start := 0
	for start < len(a) && a[start] != b[start] {
		start++
	}
	end := start
	for end < len(a) && a[end] == b[end] {
		end++
	}
	return a[start:end]
}

func slicesConcat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// FuzzMask checks that a secret embedded in arbitrary output never shows
// after masking: not byte for byte, not once the controls splitting it are
// left out, and not as the stable part of its base64 at any offset.
func FuzzMask(f *testing.F) {
	f.Add("hunter2!pw", []byte("before "), []byte(" after"), uint8(0), uint16(3), uint8(1))
	f.Add("s3cr3t-VALUE", []byte("\x1b[0m"), []byte("\r\n"), uint8(1), uint16(0), uint8(2))
	f.Add("abcd", []byte("user:"), []byte{}, uint8(3), uint16(2), uint8(0))
	f.Add("żółć-ß", []byte("\xc2\x9b"), []byte("x"), uint8(5), uint16(4), uint8(5))
	f.Fuzz(func(t *testing.T, secret string, before, after []byte, ctl uint8, at uint16, prefix uint8) {
		if utf8.RuneCountInString(secret) < runner.MinMaskLen || len(secret) > 200 || strings.ContainsAny(secret, "*\r\n") || !utf8.ValidString(secret) {
			t.Skip()
		}
		mask := runner.MaskForTest(secret)
		if got := mask(string(before) + secret + string(after)); strings.Contains(got, secret) {
			t.Fatalf("raw: got %q, want %q masked", got, secret)
		}
		if stripControls(secret) != secret {
			return // the checks below split a secret free of controls
		}
		// Split the secret at a character boundary by one or two control
		// pieces.
		cut := int(at) % (len(secret) + 1)
		for cut > 0 && cut < len(secret) && !utf8.RuneStart(secret[cut]) {
			cut--
		}
		split := secret[:cut] + ctlPieces[int(ctl)%len(ctlPieces)] + secret[cut:]
		if ctl >= 128 {
			split = ctlPieces[int(ctl/16)%len(ctlPieces)] + split + ctlPieces[int(at)%len(ctlPieces)]
		}
		line := printable(before) + split + printable(after)
		if got := mask(line); strings.Contains(stripControls(got), secret) {
			t.Fatalf("split: mask(%q) = %q, which shows %q", line, got, secret)
		}
		// Its base64 with k bytes of before in front.
		k := int(prefix) % 6
		pre := append(bytes.Repeat([]byte{'u'}, k), before...)[:k]
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			stable := stableBase64(enc, []byte(secret), k%3)
			if len(stable) < runner.MinMaskLen {
				continue
			}
			line := printable(before) + enc.EncodeToString(slicesConcat(pre, []byte(secret), after)) + printable(after)
			if got := mask(line); strings.Contains(got, stable) {
				t.Fatalf("base64: mask(%q) = %q, which holds %q", line, got, stable)
			}
		}
	})
}

func TestStableBase64(t *testing.T) {
	t.Parallel()
	// The oracle of FuzzMask, against the forms worked out by hand for
	// TestMask.
	got := []string{
		stableBase64(base64.StdEncoding, []byte("hunter2!pw"), 0),
		stableBase64(base64.StdEncoding, []byte("hunter2!pw"), 1),
		stableBase64(base64.StdEncoding, []byte("hunter2!pw"), 2),
	}
	want := []string{"aHVudGVyMiFwd", "h1bnRlcjIhcH", "odW50ZXIyIXB3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stableBase64 (-want +got):\n%s", diff)
	}
}
