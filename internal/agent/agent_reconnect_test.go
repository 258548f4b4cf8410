package agent

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/kici-dev/kici/internal/protocol"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		attempt int
		jitter  float64
		want    time.Duration
	}{
		{name: "first attempt, no jitter", attempt: 0, jitter: 0, want: time.Second},
		{name: "first attempt, most jitter", attempt: 0, jitter: 0.4999, want: 1499900 * time.Microsecond},
		{name: "grows by 1.5", attempt: 2, jitter: 0, want: 2250 * time.Millisecond},
		{name: "jitter scales the grown delay", attempt: 2, jitter: 0.2, want: 2700 * time.Millisecond},
		{name: "capped", attempt: 20, jitter: 0, want: time.Minute},
		{name: "capped even with overflow", attempt: 5000, jitter: 0.3, want: time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := backoff(tc.attempt, DefaultReconnectMin, DefaultReconnectMax, tc.jitter)
			if d := got - tc.want; d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("backoff(%d, jitter %v): got %s, want %s", tc.attempt, tc.jitter, got, tc.want)
			}
		})
	}
}

// TestClassify is the table of what ends a session for good (the agent
// stops) and what makes it reconnect.
func TestClassify(t *testing.T) {
	t.Parallel()
	closeErr := func(code int) error {
		return fmt.Errorf("read: %w", websocket.CloseError{Code: websocket.StatusCode(code), Reason: "x"})
	}
	tests := []struct {
		name     string
		err      error
		wantStop int // 0: reconnect
	}{
		{name: "4001 unauthorized", err: closeErr(protocol.CloseUnauthorized), wantStop: 4001},
		{name: "4002 register timeout", err: closeErr(protocol.CloseRegisterTimeout)},
		{name: "4003 labels not allowed", err: closeErr(protocol.CloseLabelsNotAllowed), wantStop: 4003},
		{name: "4004 heartbeat timeout", err: closeErr(protocol.CloseHeartbeatTimeout)},
		{name: "4008 version mismatch", err: closeErr(protocol.CloseVersionMismatch), wantStop: 4008},
		{name: "4009 replaced", err: closeErr(protocol.CloseReplaced), wantStop: 4009},
		{name: "4010 token revoked", err: closeErr(protocol.CloseTokenRevoked), wantStop: 4010},
		{name: "4011 malformed", err: closeErr(protocol.CloseMalformed)},
		{name: "4012 unexpected", err: closeErr(protocol.CloseUnexpectedMessage)},
		{name: "4031 ack timeout", err: closeErr(protocol.CloseAckTimeout)},
		{name: "4040 unknown scaler agent", err: closeErr(protocol.CloseUnknownScalerAgent), wantStop: 4040},
		{name: "4100 shutting down", err: closeErr(protocol.CloseShuttingDown)},
		{name: "1000 normal", err: closeErr(1000)},
		{name: "1001 going away", err: closeErr(1001)},
		{name: "1011 internal error", err: closeErr(1011)},
		{name: "connection lost", err: errors.New("read: EOF")},
		{name: "dial failed", err: errors.New("dial: connection refused")},
		{name: "we refuse another version", err: &protocolError{code: protocol.CloseVersionMismatch, err: protocol.ErrVersion}, wantStop: 4008},
		{name: "we refuse a malformed message", err: &protocolError{code: protocol.CloseMalformed, err: protocol.ErrMalformed}},
		{name: "HTTP 401", err: &StopError{Code: protocol.CloseUnauthorized, Reason: "HTTP 401"}, wantStop: 4001},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := classify(tc.err)
			var se *StopError
			switch {
			case tc.wantStop == 0 && got != nil:
				t.Errorf("classify(%v): got %v, want nil (reconnect)", tc.err, got)
			case tc.wantStop != 0 && (!errors.As(got, &se) || se.Code != tc.wantStop):
				t.Errorf("classify(%v): got %v, want a StopError with code %d", tc.err, got, tc.wantStop)
			}
		})
	}
}
