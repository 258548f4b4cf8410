package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unicode"
)

// envTokenFD names the file descriptor HideToken hands the token over; it
// is private to kici-agent.
const envTokenFD = "KICI_AGENT_TOKEN_FD"

// maxTokenBytes bounds an agent token (kici's are under 100 bytes); it also
// keeps HideToken's pipe write from ever blocking.
const maxTokenBytes = 4096

// readToken returns the agent token from KICI_AGENT_TOKEN,
// KICI_AGENT_TOKEN_FILE or KICI_AGENT_TOKEN_FD (see FromEnv), or "" when
// none is set.
func readToken(getenv func(string) string) (string, error) {
	env, file, fd := getenv("KICI_AGENT_TOKEN"), getenv("KICI_AGENT_TOKEN_FILE"), getenv(envTokenFD)
	if file != "" && (env != "" || fd != "") {
		return "", errors.New("KICI_AGENT_TOKEN and KICI_AGENT_TOKEN_FILE are both set: set one of them")
	}
	var tok string
	var err error
	switch {
	case fd != "":
		tok, err = readTokenFD(fd)
	case file != "":
		tok, err = readTokenFile(file)
	default:
		tok = env
		if err := checkToken(tok); err != nil {
			return "", fmt.Errorf("KICI_AGENT_TOKEN: %w", err)
		}
	}
	return tok, err
}

// readTokenFile reads the token file path, trimmed of white space. It
// refuses a file that anyone but its owner may read or write.
func readTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("KICI_AGENT_TOKEN_FILE: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("KICI_AGENT_TOKEN_FILE: %w", err)
	}
	if perm := fi.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		return "", fmt.Errorf("KICI_AGENT_TOKEN_FILE %q: mode %04o gives group or others access to the token; want it readable by its owner only (chmod 600 %s)", path, perm, path)
	}
	tok, err := readBounded(f)
	if err != nil {
		return "", fmt.Errorf("KICI_AGENT_TOKEN_FILE %q: %w", path, err)
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return "", fmt.Errorf("KICI_AGENT_TOKEN_FILE %q: the file is empty", path)
	}
	if err := checkToken(tok); err != nil {
		return "", fmt.Errorf("KICI_AGENT_TOKEN_FILE %q: %w", path, err)
	}
	return tok, nil
}

// readTokenFD reads the token from the descriptor HideToken left open, and
// closes it.
func readTokenFD(text string) (string, error) {
	n, err := strconv.Atoi(text)
	if err != nil || n < 3 {
		return "", fmt.Errorf("%s=%q: want a file descriptor >= 3 (the variable is kici-agent's own; do not set it)", envTokenFD, text)
	}
	f := os.NewFile(uintptr(n), "agent token")
	defer f.Close()
	tok, err := readBounded(f)
	if err != nil {
		return "", fmt.Errorf("%s=%q: %w", envTokenFD, text, err)
	}
	if err := checkToken(tok); err != nil {
		return "", fmt.Errorf("KICI_AGENT_TOKEN: %w", err)
	}
	return tok, nil
}

// readBounded reads r to its end, refusing more than maxTokenBytes.
func readBounded(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxTokenBytes+1))
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	if len(b) > maxTokenBytes {
		return "", fmt.Errorf("token longer than %d bytes", maxTokenBytes)
	}
	return string(b), nil
}

// checkToken refuses a token that could not be a header value.
func checkToken(tok string) error {
	if len(tok) > maxTokenBytes {
		return fmt.Errorf("token longer than %d bytes", maxTokenBytes)
	}
	if strings.ContainsFunc(tok, unicode.IsControl) {
		return errors.New("token holds a control character")
	}
	return nil
}
