package agent

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/coder/websocket"

	"github.com/kici-dev/kici/internal/protocol"
)

// StopError is what Run returns when the orchestrator refused the agent in a
// way reconnecting cannot fix until an operator acts (a bad or revoked
// token, labels outside the token's scope, another process with the same
// agent id, another protocol version): a close code for which
// protocol.CloseReconnects is false, or HTTP 401 on the upgrade.
type StopError struct {
	// Code is the WebSocket close code (4001 for an HTTP 401).
	Code int
	// Reason is the reason the code stands for.
	Reason string
}

// Error names the code and its reason.
func (e *StopError) Error() string {
	return fmt.Sprintf("orchestrator refused the agent: close code %d (%s); reconnecting cannot help until an operator acts", e.Code, e.Reason)
}

// stopErrorFor returns the StopError for a close code that says "stop", or
// nil for one that says "reconnect".
func stopErrorFor(code int) *StopError {
	if protocol.CloseReconnects(code) {
		return nil
	}
	return &StopError{Code: code, Reason: protocol.CloseReason(code)}
}

// closeCodeOf returns the close code carried by err (a close frame the
// orchestrator sent, or one the agent sent itself), or -1.
func closeCodeOf(err error) int {
	var pe *protocolError
	if errors.As(err, &pe) {
		return pe.code
	}
	return int(websocket.CloseStatus(err))
}

// classify says what a session's end means: a *StopError (the agent stops)
// or nil (it reconnects).
func classify(err error) error {
	var se *StopError
	if errors.As(err, &se) {
		return se
	}
	if code := closeCodeOf(err); code >= 0 {
		if se := stopErrorFor(code); se != nil {
			return se
		}
	}
	return nil
}

// protocolError is a session ending because the agent closes the connection
// with code, e.g. after a message it could not decode.
type protocolError struct {
	code int
	err  error
}

func (e *protocolError) Error() string {
	return fmt.Sprintf("close %d (%s): %v", e.code, protocol.CloseReason(e.code), e.err)
}

func (e *protocolError) Unwrap() error { return e.err }

// backoff is the wait before reconnect attempt n (0-based), per
// docs/protocol.md: min(base × 1.5^n × (1 + jitter), limit), with jitter
// drawn from [0, 0.5).
func backoff(attempt int, base, limit time.Duration, jitter float64) time.Duration {
	d := float64(base) * math.Pow(1.5, float64(attempt)) * (1 + jitter)
	if d >= float64(limit) || math.IsInf(d, 0) || math.IsNaN(d) {
		return limit
	}
	return time.Duration(d)
}
