package protocol_test

import (
	"testing"

	"github.com/kici-dev/kici/internal/protocol"
)

func TestCloseCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		code          int
		wantReason    string
		wantReconnect bool
	}{
		{"unauthorized", protocol.CloseUnauthorized, "unauthorized", false},
		{"register timeout", protocol.CloseRegisterTimeout, "register timeout", true},
		{"labels not allowed", protocol.CloseLabelsNotAllowed, "labels not allowed by token", false},
		{"heartbeat timeout", protocol.CloseHeartbeatTimeout, "heartbeat timeout", true},
		{"version mismatch", protocol.CloseVersionMismatch, "protocol version mismatch", false},
		{"replaced", protocol.CloseReplaced, "replaced by a newer connection of the same agent id", false},
		{"token revoked", protocol.CloseTokenRevoked, "token revoked", false},
		{"malformed", protocol.CloseMalformed, "malformed message", true},
		{"unexpected message", protocol.CloseUnexpectedMessage, "unexpected message", true},
		{"ack timeout", protocol.CloseAckTimeout, "dispatch ack timeout", true},
		{"unknown scaler agent", protocol.CloseUnknownScalerAgent, "unknown scaler agent", false},
		{"shutting down", protocol.CloseShuttingDown, "server shutting down", true},
		{"normal closure", 1000, "", true},
		{"going away", 1001, "", true},
		{"abnormal closure", 1006, "", true},
		{"undefined application code", 4999, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := protocol.CloseReason(tc.code); got != tc.wantReason {
				t.Errorf("CloseReason(%d): got %q, want %q", tc.code, got, tc.wantReason)
			}
			if got := protocol.CloseReconnects(tc.code); got != tc.wantReconnect {
				t.Errorf("CloseReconnects(%d): got %t, want %t", tc.code, got, tc.wantReconnect)
			}
		})
	}
}

// TestCloseCodesFitTheFrame checks every defined code against the WebSocket
// rules: application range 4000–4999 and a reason of at most 123 bytes.
func TestCloseCodesFitTheFrame(t *testing.T) {
	t.Parallel()
	for _, code := range protocol.CloseCodes() {
		if code < 4000 || code > 4999 {
			t.Errorf("close code %d: got outside 4000-4999, want inside", code)
		}
		if r := protocol.CloseReason(code); r == "" || len(r) > 123 {
			t.Errorf("CloseReason(%d): got %q (%d bytes), want 1-123 bytes", code, r, len(r))
		}
	}
}

func TestDecodeCloseCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data string
		want int
	}{
		{"wrong version", `{"v":2,"type":"job.ack"}`, protocol.CloseVersionMismatch},
		{"missing version", `{"type":"job.ack"}`, protocol.CloseVersionMismatch},
		{"bad json", `{`, protocol.CloseMalformed},
		{"unknown type", `{"v":1,"type":"nope"}`, protocol.CloseMalformed},
		{"invalid", `{"v":1,"type":"job.ack"}`, protocol.CloseMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := protocol.Decode([]byte(tc.data))
			if err == nil {
				t.Fatalf("Decode(%s): got nil error, want one", tc.data)
			}
			if got := protocol.DecodeCloseCode(err); got != tc.want {
				t.Errorf("DecodeCloseCode(%v): got %d, want %d", err, got, tc.want)
			}
		})
	}
}
