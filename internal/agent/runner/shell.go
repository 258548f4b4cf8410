package runner

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// defaultShell is the interpreter of a step without `shell`: bash with -e and
// pipefail, or sh -e where bash is not on PATH.
func defaultShell() []string {
	if _, err := exec.LookPath("bash"); err == nil {
		return []string{"bash", "-eo", "pipefail"}
	}
	return []string{"sh", "-e"}
}

// shellCommand returns the command line that runs a step's script file: the
// step's shell split into words (or the default shell), then the script.
func shellCommand(shell, script string) ([]string, error) {
	if strings.TrimSpace(shell) == "" {
		return append(defaultShell(), script), nil
	}
	words, err := splitWords(shell)
	if err != nil {
		return nil, fmt.Errorf("shell %q: %w", shell, err)
	}
	return append(words, script), nil
}

// splitWords splits s into words at unquoted white space. Single quotes keep
// everything literally; double quotes keep white space and allow \" and \\;
// a backslash outside quotes escapes the next character.
func splitWords(s string) ([]string, error) {
	var (
		words   []string
		cur     strings.Builder
		inWord  bool
		quote   rune
		escaped bool
	)
	for _, c := range s {
		switch {
		case escaped:
			cur.WriteRune(c)
			escaped = false
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteRune(c)
			}
		case quote == '"':
			switch c {
			case '"':
				quote = 0
			case '\\':
				escaped = true
			default:
				cur.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == '\\':
			escaped, inWord = true, true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(c)
			inWord = true
		}
	}
	switch {
	case escaped:
		return nil, errors.New("ends with a backslash")
	case quote != 0:
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, errors.New("no command")
	}
	return words, nil
}
