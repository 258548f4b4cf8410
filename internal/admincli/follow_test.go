package admincli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kici-dev/kici/internal/apiv1"
)

// TestFollowGivesUp covers the streams a follower cannot use: one that
// keeps ending quietly while the run goes on, and one that sends an event
// that does not decode.
func TestFollowGivesUp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// stream is the whole body of every events request.
		stream      string
		wantStreams int32
		wantErr     string
	}{
		{
			name:        "stream keeps ending",
			stream:      ": nothing\n\n",
			wantStreams: maxReconnects + 1,
			wantErr:     `kici-admin: watch run "r-1": gave up after 5 reconnects: the event stream ended before the run did`,
		},
		{
			name:        "bad event",
			stream:      "event: job\ndata: {not json\n\n",
			wantStreams: 1,
			wantErr:     `kici-admin: watch run "r-1": bad event: decode "job" event: invalid character 'n' looking for beginning of object key string`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var streams atomic.Int32
			mux := http.NewServeMux()
			mux.HandleFunc("GET /api/v1/runs/r-1", func(w http.ResponseWriter, r *http.Request) {
				_ = json.NewEncoder(w).Encode(apiv1.Run{ID: "r-1", Status: runRunning})
			})
			mux.HandleFunc("GET /api/v1/runs/r-1/events", func(w http.ResponseWriter, r *http.Request) {
				streams.Add(1)
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, tt.stream)
			})
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			_, stderr, code := runCLI(t.Context(), []string{"runs", "watch", "r-1"}, map[string]string{envURL: srv.URL})
			if code != exitFailed {
				t.Errorf("exit status: got %d, want %d", code, exitFailed)
			}
			if got := strings.TrimSpace(stderr); got != tt.wantErr {
				t.Errorf("stderr: got %q, want %q", got, tt.wantErr)
			}
			if got := streams.Load(); got != tt.wantStreams {
				t.Errorf("got %d streams opened, want %d", got, tt.wantStreams)
			}
		})
	}
}
