package container

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOutputTail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		writes []string // written to stdout, in order
		want   string
	}{
		{name: "empty", want: ""},
		{name: "lines split across writes", writes: []string{"hel", "lo\nwor", "ld\n"}, want: "hello\nworld"},
		{name: "crlf", writes: []string{"a\r\nb\r\n"}, want: "a\nb"},
		{name: "last line without newline", writes: []string{"a\nb"}, want: "a\nb"},
		{name: "empty lines kept", writes: []string{"a\n\nb\n"}, want: "a\n\nb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tail := newOutputTail(nil)
			w := tail.writer("stdout")
			for _, s := range tt.writes {
				if _, err := w.Write([]byte(s)); err != nil {
					t.Fatal(err)
				}
			}
			w.flush()
			if got := tail.String(); got != tt.want {
				t.Errorf("tail = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestOutputTailKeepsLast50(t *testing.T) {
	t.Parallel()
	var seen []string
	tail := newOutputTail(func(stream, line string) { seen = append(seen, stream+":"+line) })
	out, errw := tail.writer("stdout"), tail.writer("stderr")
	for i := range 120 {
		w := out
		if i%2 == 1 {
			w = errw
		}
		fmt.Fprintf(w, "line %d\n", i)
	}
	var want []string
	for i := 70; i < 120; i++ {
		want = append(want, fmt.Sprintf("line %d", i))
	}
	if diff := cmp.Diff(strings.Join(want, "\n"), tail.String()); diff != "" {
		t.Errorf("tail (-want +got):\n%s", diff)
	}
	if got, want := len(seen), 120; got != want {
		t.Errorf("onLine called %d times, want %d", got, want)
	}
	if got, want := seen[1], "stderr:line 1"; got != want {
		t.Errorf("second line seen = %q, want %q", got, want)
	}
}

func TestOutputTailCutsLongLines(t *testing.T) {
	t.Parallel()
	tail := newOutputTail(nil)
	w := tail.writer("stdout")
	fmt.Fprint(w, strings.Repeat("x", maxLineBytes*2+3)+"\n")
	w.flush()
	var got []int
	for _, l := range strings.Split(tail.String(), "\n") {
		got = append(got, len(l))
	}
	want := []int{maxLineBytes, maxLineBytes, 3}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("line lengths (-want +got):\n%s", diff)
	}
}

func TestOutputTailLineOfExactlyMax(t *testing.T) {
	t.Parallel()
	tail := newOutputTail(nil)
	w := tail.writer("stdout")
	fmt.Fprint(w, strings.Repeat("x", maxLineBytes))
	fmt.Fprint(w, "\nend\n")
	if got, want := tail.String(), strings.Repeat("x", maxLineBytes)+"\nend"; got != want {
		t.Errorf("tail has %d bytes, want %d (one full line, then \"end\")", len(got), len(want))
	}
}

func TestWithTail(t *testing.T) {
	t.Parallel()
	if got, want := withTail("boom", ""), "boom"; got != want {
		t.Errorf("withTail(no tail) = %q, want %q", got, want)
	}
	if got, want := withTail("boom", "a\nb"), "boom\n--- captured output ---\na\nb"; got != want {
		t.Errorf("withTail = %q, want %q", got, want)
	}
}
