package runner

import (
	"bytes"
	"fmt"
	"time"
	"unicode/utf8"
)

// MaxLineBytes is the longest line the runner reports; a longer line is cut
// into pieces of at most this size. It keeps every line well inside a
// protocol log chunk.
const MaxLineBytes = 64 << 10

// output turns one step's raw output into masked, capped lines for a
// Reporter. It is an io.Writer for the goroutine that copies the step's
// pipe; Write and close must not be called concurrently.
type output struct {
	step    int
	rep     Reporter
	mask    *masker
	limit   int64 // <= 0: no cap
	now     func() time.Time
	written int64
	capped  bool
	buf     []byte // the unfinished line
}

func newOutput(step int, rep Reporter, mask *masker, limit int64) *output {
	return &output{step: step, rep: rep, mask: mask, limit: limit, now: time.Now}
}

// Write reports every complete line of p (and of what came before it), and
// cuts a line that grew past MaxLineBytes without ending.
func (o *output) Write(p []byte) (int, error) {
	o.buf = append(o.buf, p...)
	rest := o.buf
	for {
		if i := bytes.IndexByte(rest, '\n'); i >= 0 && i <= MaxLineBytes {
			o.line(bytes.TrimSuffix(rest[:i], []byte("\r")))
			rest = rest[i+1:]
			continue
		}
		if len(rest) <= MaxLineBytes {
			break
		}
		cut := runeCut(rest, o.mask.safeCut(rest, MaxLineBytes))
		o.line(rest[:cut])
		rest = rest[cut:]
	}
	o.buf = append(o.buf[:0], rest...)
	return len(p), nil
}

// close reports the last line if the output did not end with a newline.
func (o *output) close() {
	if len(o.buf) > 0 {
		o.line(bytes.TrimSuffix(o.buf, []byte("\r")))
		o.buf = o.buf[:0]
	}
}

// note reports a line of the runner's own, prefixed "[kici] ".
func (o *output) note(format string, args ...any) {
	o.line([]byte("[kici] " + fmt.Sprintf(format, args...)))
}

// line masks one line and reports it, in pieces if masking made it longer
// than MaxLineBytes, unless the cap is reached.
func (o *output) line(raw []byte) {
	if o.capped {
		return
	}
	text := o.mask.apply(string(raw))
	for {
		piece := text
		if len(piece) > MaxLineBytes {
			piece = piece[:runeCut([]byte(piece), MaxLineBytes)]
		}
		text = text[len(piece):]
		if o.limit > 0 && o.written+int64(len(piece)) > o.limit {
			o.capped = true
			o.rep.Log(o.step, Line{TS: o.now(), Text: fmt.Sprintf("[kici] log limit of %s reached; further output discarded", formatBytes(o.limit))})
			o.rep.LogTruncated(o.step)
			return
		}
		o.written += int64(len(piece))
		o.rep.Log(o.step, Line{TS: o.now(), Text: piece})
		if text == "" {
			return
		}
	}
}

// runeCut moves cut left, by at most three bytes, to the start of a UTF-8
// sequence, so that a cut does not split a character.
func runeCut(b []byte, cut int) int {
	for i := cut; i > 0 && i > cut-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return cut
}

// formatBytes writes n as "10 MiB", "64 KiB" or "1000 bytes".
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
