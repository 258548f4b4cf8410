package admincli

import (
	"errors"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func TestReadSSE(t *testing.T) {
	t.Parallel()
	type ev struct{ Name, Data string }
	tests := []struct {
		name    string
		stream  string
		want    []ev
		wantErr bool
	}{
		{
			name:   "named events",
			stream: "event: run\ndata: {\"a\":1}\n\nevent: log\ndata: x\n\n",
			want:   []ev{{"run", `{"a":1}`}, {"log", "x"}},
		},
		{
			name:   "comments and unknown fields are skipped",
			stream: ": keep-alive\n\nid: 7\nretry: 100\nevent: job\ndata: y\n\n",
			want:   []ev{{"job", "y"}},
		},
		{
			name:   "data lines join with newlines",
			stream: "data: one\ndata:two\ndata:  three\n\n",
			want:   []ev{{"", "one\ntwo\n three"}},
		},
		{
			name:   "CRLF line ends",
			stream: "event: run\r\ndata: z\r\n\r\n",
			want:   []ev{{"run", "z"}},
		},
		{
			name:   "an event without data is not dispatched",
			stream: "event: run\n\nevent: job\ndata: a\n\n",
			want:   []ev{{"job", "a"}},
		},
		{
			name:   "an event cut off by the end is dropped",
			stream: "event: run\ndata: a\n\nevent: job\ndata: b\n",
			want:   []ev{{"run", "a"}},
		},
		{
			name:   "empty stream",
			stream: "",
			want:   nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []ev
			err := readSSE(iotest.OneByteReader(strings.NewReader(tt.stream)), func(e sseEvent) error {
				got = append(got, ev{e.name, string(e.data)})
				return nil
			})
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events differ (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadSSEStops(t *testing.T) {
	t.Parallel()
	stop := errors.New("stop")
	calls := 0
	err := readSSE(strings.NewReader("data: a\n\ndata: b\n\n"), func(sseEvent) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("got error %v after %d calls, want %v after 1", err, calls, stop)
	}
	readErr := errors.New("connection reset")
	err = readSSE(iotest.ErrReader(readErr), func(sseEvent) error { return nil })
	if !errors.Is(err, readErr) {
		t.Errorf("got error %v, want %v", err, readErr)
	}
}
