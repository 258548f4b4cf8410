package admincli

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// escapeControls returns s with every character that could drive a
// terminal written out as an escape: ESC as \x1b, CR as \r, LF as \n, the
// other C0 controls and DEL as \xHH, C1 controls (U+0080 to U+009F) as
// \uHHHH, and bytes that are not UTF-8 as \xHH. Tab is kept. Job output is
// written by whoever pushed the workflow: printed raw, it could set the
// window title, write the clipboard (OSC 52) or overwrite what is on the
// screen (CR). A backslash is left alone, so the escapes do not round-trip.
func escapeControls(s string) string {
	i := strings.IndexFunc(s, needsEscape)
	if i < 0 && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x20 && r != '\t' || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

func needsEscape(r rune) bool {
	return r < 0x20 && r != '\t' || r >= 0x7f && r <= 0x9f
}

// printLine writes one line of output from the server: its text escaped
// (unless raw) and a newline.
func printLine(w io.Writer, raw bool, format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	if !raw {
		text = escapeControls(text)
	}
	fmt.Fprintln(w, text)
}
