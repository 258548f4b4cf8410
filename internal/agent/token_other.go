//go:build !linux

package agent

// HideToken does nothing on this system: it has no /proc/<pid>/environ for
// steps to read the token from (ps -E on some BSDs may show it; prefer
// KICI_AGENT_TOKEN_FILE there).
func HideToken(args, environ []string) error { return nil }
