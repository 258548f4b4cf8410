package admincli

import "testing"

func TestEscapeControls(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{name: "plain text is kept", in: "ok  all tests passed – ünïcode", want: "ok  all tests passed – ünïcode"},
		{name: "tab is kept", in: "a\tb", want: "a\tb"},
		{name: "OSC 52 clipboard write", in: "\x1b]52;c;ZWNobyBoaQ==\x07", want: `\x1b]52;c;ZWNobyBoaQ==\x07`},
		{name: "window title with ST", in: "\x1b]0;pwned\x1b\\", want: `\x1b]0;pwned\x1b\`},
		{name: "CR and LF", in: "10%\r100%\nnext", want: `10%\r100%\nnext`},
		{name: "colour", in: "\x1b[31mred\x1b[0m", want: `\x1b[31mred\x1b[0m`},
		{name: "NUL, backspace and DEL", in: "a\x00b\x08c\x7f", want: `a\x00b\x08c\x7f`},
		{name: "C1 CSI", in: "x\u009b2Jy", want: `x\u009b2Jy`},
		{name: "a byte that is not UTF-8", in: "x\x9by", want: `x\x9by`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := escapeControls(tc.in); got != tc.want {
				t.Errorf("escapeControls(%q): got %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
