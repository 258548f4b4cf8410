package baremetal

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/kici-dev/kici/internal/scaler"
)

// TestRecoverReportsGone: a handle whose process cannot be proven the same
// is reported gone, its PID is never signalled (the test process's own PID
// stands in for a reused one: a signal would end the test), and the work
// dir is removed only where this backend would have put it.
func TestRecoverReportsGone(t *testing.T) {
	t.Parallel()
	self, err := procStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	tests := []struct {
		name string
		// rec builds the record; dir is the backend's agent dir for the id.
		rec         func(dir string) record
		blob        []byte // instead of rec
		wantDirGone bool
	}{
		{name: "start time differs (pid reused)", wantDirGone: true, rec: func(dir string) record {
			return record{V: 1, PID: os.Getpid(), StartTime: self.StartTime + 1, BootID: bootID(), WorkDir: dir}
		}},
		{name: "another boot", wantDirGone: true, rec: func(dir string) record {
			return record{V: 1, PID: os.Getpid(), StartTime: self.StartTime, BootID: "another-boot", WorkDir: dir}
		}},
		{name: "this very process", wantDirGone: true, rec: func(dir string) record {
			return record{V: 1, PID: os.Getpid(), StartTime: self.StartTime, BootID: bootID(), WorkDir: dir}
		}},
		{name: "no start time", wantDirGone: true, rec: func(dir string) record {
			return record{V: 1, PID: os.Getpid(), BootID: bootID(), WorkDir: dir}
		}},
		{name: "work dir outside the backend's", rec: func(string) record {
			return record{V: 1, PID: os.Getpid(), StartTime: self.StartTime + 1, BootID: bootID(), WorkDir: outside}
		}},
		{name: "another version", blob: []byte(`{"v":2,"pid":1234}`)},
		{name: "pid 1", blob: []byte(`{"v":1,"pid":1,"start_time":1}`)},
		{name: "not json", blob: []byte(`garbage`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := New(slog.New(slog.NewTextHandler(t.Output(), nil)), Config{Name: "test", WorkDir: t.TempDir()})
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			id := "scaler-bare-metal-gone"
			dir := b.agentDir(id)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			blob := tc.blob
			if tc.rec != nil {
				blob = tc.rec(dir).encode()
			}
			got, err := b.Recover(t.Context(), []scaler.Handle{{AgentID: id, Blob: blob}})
			if err != nil || len(got) != 0 {
				t.Errorf("Recover: got %v, %v; want no handle, nil", got, err)
			}
			if _, err := os.Stat(dir); os.IsNotExist(err) != tc.wantDirGone {
				t.Errorf("work dir: got stat error %v, want removed %t", err, tc.wantDirGone)
			}
			if _, err := os.Stat(outside); err != nil {
				t.Errorf("a directory outside the work dir: got %v, want it untouched", err)
			}
			if cs, _ := b.List(t.Context()); len(cs) != 0 {
				t.Errorf("List: got %v, want none", cs)
			}
			if err := b.Destroy(t.Context(), id); err != nil {
				t.Errorf("Destroy: got %v, want nil", err)
			}
		})
	}
}
