package protocol_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/workflow"
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

// TestInlineArchive checks which archives a dispatch inlines: one within
// MaxInlineArchiveBytes whose dispatch still fits MaxMessageBytes, with its
// SHA-256, surviving the round trip; never a larger one, one that would
// push the message over the limit, or one for a git source.
func TestInlineArchive(t *testing.T) {
	t.Parallel()
	dispatch := func(kind string, envBytes int) *protocol.JobDispatch {
		d := &protocol.JobDispatch{
			JobID: "j1", RunID: "r1", Attempt: 1,
			Job:    workflow.Job{Name: "build", Steps: []workflow.Step{{Name: "s", Run: "true"}}},
			Source: protocol.Source{Kind: kind, ArchiveURL: "/a", CloneURL: "https://x/y.git", SHA: "abc"},
		}
		if envBytes > 0 {
			d.Env = map[string]string{"BIG": strings.Repeat("x", envBytes)}
		}
		return d
	}
	// Random-looking bytes, so nothing about the size depends on content.
	archive := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + i/251)
		}
		return b
	}
	tests := []struct {
		name string
		d    *protocol.JobDispatch
		data []byte
		want bool
	}{
		{"small", dispatch(protocol.SourceArchive, 0), archive(1000), true},
		{"at the limit", dispatch(protocol.SourceArchive, 0), archive(protocol.MaxInlineArchiveBytes), true},
		{"over the limit", dispatch(protocol.SourceArchive, 0), archive(protocol.MaxInlineArchiveBytes + 1), false},
		{"empty", dispatch(protocol.SourceArchive, 0), nil, false},
		{"git source", dispatch(protocol.SourceGit, 0), archive(1000), false},
		// 700 KiB of env plus 256 KiB of archive (342 KiB in base64) would
		// be over 1 MiB.
		{"message would be too large", dispatch(protocol.SourceArchive, 700<<10), archive(protocol.MaxInlineArchiveBytes), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.d.InlineArchive(tc.data); got != tc.want {
				t.Fatalf("InlineArchive(%d bytes): got %v, want %v", len(tc.data), got, tc.want)
			}
			data, err := protocol.Encode(tc.d)
			if err != nil {
				t.Fatalf("Encode after InlineArchive: got error %v, want nil", err)
			}
			msg, err := protocol.Decode(data)
			if err != nil {
				t.Fatalf("Decode: got error %v, want nil", err)
			}
			src := msg.(*protocol.JobDispatch).Source
			if !tc.want {
				if src.ArchiveInline != nil || src.ArchiveSHA256 != "" {
					t.Errorf("source: got inline archive of %d bytes, sha256 %q, want none", len(src.ArchiveInline), src.ArchiveSHA256)
				}
				return
			}
			sum := sha256.Sum256(tc.data)
			if got, want := src.ArchiveSHA256, hex.EncodeToString(sum[:]); got != want {
				t.Errorf("archive_sha256: got %q, want %q", got, want)
			}
			if diff := cmp.Diff(tc.data, src.ArchiveInline); diff != "" {
				t.Errorf("archive_inline after the round trip (-want +got):\n%s", diff)
			}
			t.Logf("dispatch with %d bytes of archive: %d bytes of %d", len(tc.data), len(data), protocol.MaxMessageBytes)
		})
	}
}
