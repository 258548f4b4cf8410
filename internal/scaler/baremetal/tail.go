package baremetal

import (
	"bytes"
	"io"
	"os"
	"strings"
)

// Bounds of the output tail.
const (
	// maxLineBytes cuts longer lines: a failure detail stays readable.
	maxLineBytes = 4 << 10
	// tailReadBytes is how much of the end of a log file lastLines reads.
	tailReadBytes = 64 << 10
)

// ring keeps the last lines written to it. It is not safe for concurrent
// use.
type ring struct {
	lines   []string
	next    int // where the next line goes once lines is full
	max     int
	partial []byte // the unterminated last line so far
}

func newRing(n int) *ring { return &ring{max: n} }

// Write splits p into lines (dropping "\n" and a "\r" before it).
func (r *ring) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			r.partial = appendCapped(r.partial, p)
			break
		}
		r.partial = appendCapped(r.partial, p[:i])
		r.push(string(bytes.TrimSuffix(r.partial, []byte("\r"))))
		r.partial = r.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

func appendCapped(dst, p []byte) []byte {
	if room := maxLineBytes - len(dst); len(p) > room {
		p = p[:max(room, 0)]
	}
	return append(dst, p...)
}

func (r *ring) push(line string) {
	if len(r.lines) < r.max {
		r.lines = append(r.lines, line)
		return
	}
	r.lines[r.next] = line
	r.next = (r.next + 1) % r.max
}

// String returns the kept lines, oldest first, joined with "\n"; an
// unterminated last line counts as a line.
func (r *ring) String() string {
	lines := append(append([]string(nil), r.lines[r.next:]...), r.lines[:r.next]...)
	if len(r.partial) > 0 {
		lines = append(lines, string(bytes.TrimSuffix(r.partial, []byte("\r"))))
		if len(lines) > r.max {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// lastLines returns the last n lines of the file at path (at most
// tailReadBytes of it), or "" when it cannot be read.
func lastLines(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-tailReadBytes, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, off, tailReadBytes))
	if err != nil {
		return ""
	}
	if off > 0 {
		// The read started inside a line: drop that piece.
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	r := newRing(n)
	_, _ = r.Write(data)
	return r.String()
}
