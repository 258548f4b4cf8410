package protocol_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kici-dev/kici/internal/protocol"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz/FuzzDecode from samples() and extraSeeds")

// extraSeeds are hand-written corpus entries: one that Decode refuses per
// kind of error, and odd but valid ones.
var extraSeeds = map[string]string{
	"truncated_json":      `{"v":1,"type":"job.ack","job_id":`,
	"wrong_version":       `{"v":2,"type":"job.ack","job_id":"j1","seq":1}`,
	"missing_version":     `{"type":"heartbeat","time":"2025-03-01T12:00:00Z"}`,
	"unknown_type":        `{"v":1,"type":"job.explode","job_id":"j1"}`,
	"missing_job_id":      `{"v":1,"type":"job.status","seq":1,"status":"running"}`,
	"wrong_field_type":    `{"v":1,"type":"step.status","job_id":"j1","seq":"2","step":0,"status":"running"}`,
	"escapes_and_unknown": `{"v":1,"type":"log.chunk","job_id":"j\u00e9\ud83d\ude00","seq":1,"step":-1,"x":[null,{}],"lines":[{"ts":"2025-03-01T12:00:00+05:45","text":"\u0000\t\"\\"}]}`,
	"null":                `null`,
	"empty_lists":         `{"v":1,"type":"register","agent_id":"a","concurrency":1,"labels":[],"in_flight":[]}`,
	"dispatch_nulls":      `{"v":1,"type":"job.dispatch","job_id":"j","run_id":"r","attempt":1,"env":{},"secrets":null,"job":{"name":"n","runsOn":null,"matrix":{},"steps":[{"name":"s","run":"true","env":{}}]},"source":{"kind":"archive","archive_url":"/a","sha":"abc"}}`,
}

// FuzzDecode checks that Decode never panics, that it returns exactly one
// message or one error wrapping one of the package's sentinels, and that a
// message it accepts encodes and decodes to an equal value. Nil and empty
// slices and maps count as equal: the wire does not tell them apart.
//
// The one allowed re-encoding failure is ErrTooLarge: Decode turns each
// invalid UTF-8 byte into a three-byte U+FFFD, so an input close to the limit
// may grow past it.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		msg, err := protocol.Decode(data)
		if err != nil {
			if msg != nil {
				t.Fatalf("Decode: got message %v and error %v, want only the error", msg, err)
			}
			if !isDecodeError(err) {
				t.Fatalf("Decode: got error %v, want one wrapping a protocol sentinel", err)
			}
			return
		}
		out, err := protocol.Encode(msg)
		if errors.Is(err, protocol.ErrTooLarge) {
			return
		}
		if err != nil {
			t.Fatalf("Encode(Decode(%q)): got error %v, want nil", data, err)
		}
		again, err := protocol.Decode(out)
		if err != nil {
			t.Fatalf("Decode(%s): got error %v, want nil (input %q)", out, err, data)
		}
		if diff := cmp.Diff(msg, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("Decode(Encode(msg)) mismatch (-first +second) for input %q:\n%s", data, diff)
		}
	})
}

func isDecodeError(err error) bool {
	for _, s := range []error{
		protocol.ErrTooLarge, protocol.ErrMalformed, protocol.ErrVersion,
		protocol.ErrUnknownType, protocol.ErrInvalid,
	} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// TestUpdateFuzzCorpus rewrites the committed seed corpus when run with
// -update-corpus; otherwise it only checks that the corpus exists.
func TestUpdateFuzzCorpus(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if !*updateCorpus {
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) < len(samples()) {
			t.Fatalf("seed corpus %s: got %d entries (%v), want at least %d; run with -update-corpus",
				dir, len(entries), err, len(samples()))
		}
		return
	}
	seeds := map[string][]byte{}
	for _, s := range samples() {
		data, err := protocol.Encode(s.msg)
		if err != nil {
			t.Fatalf("Encode(%s): %v", s.name, err)
		}
		seeds[s.name] = data
	}
	for name, data := range extraSeeds {
		seeds[name] = []byte(data)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range seeds {
		entry := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(entry), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
