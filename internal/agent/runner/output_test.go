package runner_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/agent/runner"
)

func TestOutput(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-VALUE"
	long := strings.Repeat("a", runner.MaxLineBytes)
	straddle := strings.Repeat("x", runner.MaxLineBytes-3) + secret + "tail"
	tests := []struct {
		name          string
		writes        []string
		limit         int64
		masks         []string
		want          []string
		wantTruncated bool
	}{
		{
			name:   "lines across writes, CRLF, last line without newline",
			writes: []string{"one\r\ntw", "o\n\nthr", "ee"},
			want:   []string{"one", "two", "", "three"},
		},
		{
			name:   "a long line is cut into pieces",
			writes: []string{long + long + "bc\n"},
			want:   []string{long, long, "bc"},
		},
		{
			name:   "a secret is masked, also when it straddles a cut",
			writes: []string{"token " + secret + " end\n", straddle + "\n"},
			masks:  []string{secret},
			want:   []string{"token *** end", strings.Repeat("x", runner.MaxLineBytes-3), "***tail"},
		},
		{
			// A step that prints a secret in pieces (two writes, which the
			// agent may read and batch into log chunks far apart) still
			// gets it masked: lines are masked whole, before batching.
			name:   "a secret split across two writes is masked",
			writes: []string{"before s3cr", "3t-VALUE after\n", "s3cr3t-", "VALUE"},
			masks:  []string{secret},
			want:   []string{"before *** after", "***"},
		},
		{
			name:   "each line of a multi-line secret is masked",
			writes: []string{"first-line and second-line\n"},
			masks:  []string{"first-line\nsecond-line\n"},
			want:   []string{"*** and ***"},
		},
		{
			name:          "the cap adds one marker and drops the rest",
			writes:        []string{strings.Repeat("0123456789012345678901234567\n", 10)},
			limit:         100,
			want:          append(slicesRepeat("0123456789012345678901234567", 3), "[kici] log limit of 100 bytes reached; further output discarded"),
			wantTruncated: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder()
			w, done := runner.NewOutputForTest(2, rec, tc.limit, tc.masks...)
			for _, s := range tc.writes {
				if _, err := w.Write([]byte(s)); err != nil {
					t.Fatalf("Write: %v", err)
				}
			}
			done()
			if diff := cmp.Diff(tc.want, rec.lines[2]); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
			if rec.truncated[2] != tc.wantTruncated {
				t.Errorf("truncated: got %v, want %v", rec.truncated[2], tc.wantTruncated)
			}
		})
	}
}

// TestOutputKeepsUTF8 checks that cutting a long line never splits a
// character.
func TestOutputKeepsUTF8(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	w, done := runner.NewOutputForTest(0, rec, 0)
	in := strings.Repeat("é", runner.MaxLineBytes) // two bytes each
	if _, err := w.Write([]byte(in)); err != nil {
		t.Fatal(err)
	}
	done()
	var joined strings.Builder
	for _, l := range rec.lines[0] {
		if !utf8.ValidString(l) || len(l) > runner.MaxLineBytes {
			t.Errorf("piece of %d bytes: got invalid UTF-8 or too long, want valid and <= %d", len(l), runner.MaxLineBytes)
		}
		joined.WriteString(l)
	}
	if joined.String() != in {
		t.Errorf("joined pieces: got %d bytes, want the %d bytes written", joined.Len(), len(in))
	}
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestSplitWords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr string
	}{
		{name: "plain", in: "bash -eo pipefail", want: []string{"bash", "-eo", "pipefail"}},
		{name: "extra blanks", in: "  python3\t-u  ", want: []string{"python3", "-u"}},
		{name: "single quotes", in: `sh -c 'echo "$0" x'`, want: []string{"sh", "-c", `echo "$0" x`}},
		{name: "double quotes and escapes", in: `a "b c" d\ e "f\"g"`, want: []string{"a", "b c", "d e", `f"g`}},
		{name: "empty quotes are a word", in: `a ''`, want: []string{"a", ""}},
		{name: "unterminated", in: `sh -c 'x`, wantErr: "unterminated ' quote"},
		{name: "trailing backslash", in: `sh \`, wantErr: "ends with a backslash"},
		{name: "nothing", in: "   ", wantErr: "no command"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := runner.SplitWords(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("SplitWords(%q): got error %v, want %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("SplitWords(%q): got error %v, want nil", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("SplitWords(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}
