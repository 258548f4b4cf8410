package worker

import (
	"strings"
	"testing"
	"time"
)

func TestNewChecksItsConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"no coordinator", Config{CredentialFile: "c"}, "no coordinator URL"},
		{"a WebSocket URL", Config{CoordinatorURLs: []string{"ws://c:4000/ws"}, CredentialFile: "c"}, `"ws://c:4000/ws": want http:// or https://`},
		{"no credential file", Config{CoordinatorURLs: []string{"http://c:4000"}}, "no credential file"},
		{"heartbeat too slow", Config{CoordinatorURLs: []string{"http://c:4000"}, CredentialFile: "c", Heartbeat: time.Minute}, "at most 20s"},
		{"fine", Config{CoordinatorURLs: []string{"http://c:4000", "https://d/"}, CredentialFile: "c"}, ""},
	}
	for _, tt := range tests {
		_, err := New(tt.cfg)
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: got %v, want an error containing %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestPeerURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://c:4000":               "ws://c:4000/ws/peer",
		"https://ci.example.com/":     "wss://ci.example.com/ws/peer",
		"https://ci.example.com/kici": "wss://ci.example.com/kici/ws/peer",
	} {
		if got, err := peerURL(in); err != nil || got != want {
			t.Errorf("peerURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
