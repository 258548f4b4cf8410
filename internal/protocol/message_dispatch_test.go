package protocol_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/kici-dev/kici/internal/protocol"
)

// TestJobDispatchRedacts checks that printing or logging a dispatch shows
// none of its secret values, its job token or its masks.
func TestJobDispatchRedacts(t *testing.T) {
	t.Parallel()
	var d *protocol.JobDispatch
	for _, s := range samples() {
		if s.name == "job_dispatch_git" {
			d = s.msg.(*protocol.JobDispatch)
		}
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("dispatch", "msg", d, "value", *d)

	outputs := []struct {
		name string
		text string
	}{
		{"fmt pointer", fmt.Sprint(d)},
		{"fmt value", fmt.Sprintf("%v %+v %s", *d, *d, *d)},
		{"slog", logged.String()},
	}
	hidden := []string{d.Secrets["NPM_TOKEN"], d.JobToken, d.Masks[0]}
	for _, tc := range outputs {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			t.Log(tc.text)
			if !strings.Contains(tc.text, d.JobID) {
				t.Errorf("output: got %q, want it to name job %q", tc.text, d.JobID)
			}
			for _, h := range hidden {
				if strings.Contains(tc.text, h) {
					t.Errorf("output: got %q, want it without %q", tc.text, h)
				}
			}
		})
	}
}
