package container

import (
	"bytes"
	"strings"
	"sync"
)

// Output capture limits.
const (
	// tailLines is how many of an agent's last output lines a failure
	// report carries.
	tailLines = 50
	// maxLineBytes cuts longer lines, so that a stream without newlines
	// cannot grow a line without bound.
	maxLineBytes = 16 << 10
)

// outputTail keeps the last tailLines lines of an agent's output (stdout
// and stderr interleaved as they arrive). It is safe for concurrent use.
type outputTail struct {
	mu     sync.Mutex
	lines  []string // ring of at most tailLines
	next   int      // where the next line goes once the ring is full
	onLine func(stream, line string)
}

func newOutputTail(onLine func(stream, line string)) *outputTail {
	return &outputTail{onLine: onLine}
}

func (t *outputTail) add(stream, line string) {
	t.mu.Lock()
	if len(t.lines) < tailLines {
		t.lines = append(t.lines, line)
	} else {
		t.lines[t.next] = line
		t.next = (t.next + 1) % tailLines
	}
	t.mu.Unlock()
	if t.onLine != nil {
		t.onLine(stream, line)
	}
}

// String returns the kept lines, oldest first, joined by newlines.
func (t *outputTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	ordered := append(append([]string(nil), t.lines[t.next:]...), t.lines[:t.next]...)
	return strings.Join(ordered, "\n")
}

// writer returns an io.Writer that cuts what it is given into lines
// (without "\n" or "\r\n") and adds them to t. Call flush at the end of
// the stream for a last line without a newline.
func (t *outputTail) writer(stream string) *lineWriter {
	return &lineWriter{tail: t, stream: stream}
}

// lineWriter is one stream of an outputTail. It is not safe for
// concurrent use (one stream has one writer).
type lineWriter struct {
	tail    *outputTail
	stream  string
	partial []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.partial = append(w.partial, p...)
			w.cut()
			break
		}
		w.partial = append(w.partial, p[:i]...)
		p = p[i+1:]
		w.cut()
		w.emit()
	}
	return n, nil
}

// cut adds the pieces of a too long line, keeping at most maxLineBytes
// pending.
func (w *lineWriter) cut() {
	for len(w.partial) > maxLineBytes {
		w.tail.add(w.stream, string(w.partial[:maxLineBytes]))
		w.partial = append(w.partial[:0], w.partial[maxLineBytes:]...)
	}
}

func (w *lineWriter) emit() {
	line := strings.TrimSuffix(string(w.partial), "\r")
	w.partial = w.partial[:0]
	w.tail.add(w.stream, line)
}

// flush adds the last line if it had no newline.
func (w *lineWriter) flush() {
	if len(w.partial) > 0 {
		w.emit()
	}
}

// withTail appends an agent's captured output to a failure's detail.
func withTail(detail, tail string) string {
	if tail == "" {
		return detail
	}
	return detail + "\n--- captured output ---\n" + tail
}
