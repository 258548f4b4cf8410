package protocol_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/workflow"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range samples() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			data, err := protocol.Encode(tc.msg)
			if err != nil {
				t.Fatalf("Encode: got error %v, want nil", err)
			}
			prefix := fmt.Sprintf(`{"v":1,"type":%q`, tc.msg.Type())
			if !bytes.HasPrefix(data, []byte(prefix)) {
				t.Errorf("Encode: got %s, want prefix %s", data, prefix)
			}
			got, err := protocol.Decode(data)
			if err != nil {
				t.Fatalf("Decode(%s): got error %v, want nil", data, err)
			}
			if diff := cmp.Diff(tc.msg, got); diff != "" {
				t.Errorf("Decode(Encode(msg)) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSamplesCoverEveryType(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, s := range samples() {
		seen[s.msg.Type()] = true
	}
	for _, typ := range protocol.RegisteredTypes() {
		if !seen[typ] {
			t.Errorf("samples: got no message of type %q, want at least one", typ)
		}
	}
}

// TestWireForm pins the JSON names and layout peers rely on.
func TestWireForm(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		msg  protocol.Message
		want string
	}{
		{
			name: "job status",
			msg:  &protocol.JobStatus{JobID: "j1", Seq: 7, Status: protocol.JobFailure, Error: "boom", ExitCode: 2},
			want: `{"v":1,"type":"job.status","job_id":"j1","seq":7,"status":"failure","error":"boom","exit_code":2}`,
		},
		{
			name: "step status omits zero times",
			msg:  &protocol.StepStatus{JobID: "j1", Seq: 3, Step: 0, Status: protocol.StepSkipped},
			want: `{"v":1,"type":"step.status","job_id":"j1","seq":3,"step":0,"status":"skipped"}`,
		},
		{
			name: "log chunk keeps html characters and nanoseconds",
			msg: &protocol.LogChunk{JobID: "j1", Seq: 4, Step: -1, Lines: []protocol.LogLine{
				{TS: t0, Text: "<a> & b"},
			}},
			want: `{"v":1,"type":"log.chunk","job_id":"j1","seq":4,"step":-1,` +
				`"lines":[{"ts":"2025-03-01T12:00:00.123456789Z","text":"<a> & b"}]}`,
		},
		{
			name: "register",
			msg: &protocol.Register{AgentID: "a1", Labels: []string{"linux"}, Concurrency: 1,
				InFlight: []protocol.InFlightJob{{JobID: "j1", LastSeq: 3}}, ScalerAgent: true},
			want: `{"v":1,"type":"register","agent_id":"a1","labels":["linux"],"concurrency":1,` +
				`"in_flight":[{"job_id":"j1","last_seq":3}],"scaler_agent":true}`,
		},
		{
			name: "registered",
			msg: &protocol.Registered{AgentID: "a1", HeartbeatIntervalMS: 30000,
				Resume: []protocol.ResumeJob{{JobID: "j1", AckSeq: 2}}},
			want: `{"v":1,"type":"registered","agent_id":"a1","heartbeat_interval_ms":30000,` +
				`"resume":[{"job_id":"j1","ack_seq":2}]}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := protocol.Encode(tc.msg)
			if err != nil {
				t.Fatalf("Encode: got error %v, want nil", err)
			}
			if string(got) != tc.want {
				t.Errorf("Encode:\ngot  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestDecodeAcceptsUnknownFields(t *testing.T) {
	t.Parallel()
	got, err := protocol.Decode([]byte(`{"v":1,"type":"job.ack","job_id":"j1","seq":1,"added_in_future":{"x":[1]}}`))
	if err != nil {
		t.Fatalf("Decode: got error %v, want nil", err)
	}
	if diff := cmp.Diff(&protocol.JobAck{JobID: "j1", Seq: 1}, got); diff != "" {
		t.Errorf("Decode mismatch (-want +got):\n%s", diff)
	}
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	oversize := append([]byte(`{"v":1,"type":"job.ack","job_id":"j1","seq":1,"pad":"`),
		bytes.Repeat([]byte("x"), protocol.MaxMessageBytes)...)
	oversize = append(oversize, `"}`...)
	manyLines := `{"v":1,"type":"log.chunk","job_id":"j1","seq":1,"step":0,"lines":[` +
		strings.Repeat(`{"ts":"2025-03-01T12:00:00Z","text":"x"},`, protocol.MaxLogChunkLines) +
		`{"ts":"2025-03-01T12:00:00Z","text":"x"}]}`
	bigText := `{"v":1,"type":"log.chunk","job_id":"j1","seq":1,"step":0,"lines":[` +
		`{"ts":"2025-03-01T12:00:00Z","text":"` + strings.Repeat("x", protocol.MaxLogChunkTextBytes+1) + `"}]}`

	tests := []struct {
		name    string
		data    string
		wantErr error
		// wantText must appear in the error's text.
		wantText string
	}{
		// Envelope.
		{"oversize", string(oversize), protocol.ErrTooLarge,
			fmt.Sprintf("decode: message too large: %d bytes, limit 1048576", len(oversize))},
		{"bad json", `{"v":1,"type":"job.ack",`, protocol.ErrMalformed,
			"decode: malformed message: unexpected end of JSON input"},
		{"not an object", `["job.ack"]`, protocol.ErrMalformed,
			"decode: malformed message: json: cannot unmarshal array"},
		{"empty input", ``, protocol.ErrMalformed, "decode: malformed message: unexpected end of JSON input"},
		{"trailing garbage", `{"v":1,"type":"job.ack","job_id":"j1","seq":1} x`, protocol.ErrMalformed,
			"decode: malformed message: invalid character 'x' after top-level value"},
		{"missing version", `{"type":"job.ack","job_id":"j1","seq":1}`, protocol.ErrVersion,
			`decode: protocol version mismatch: missing "v", want 1`},
		{"wrong version", `{"v":2,"type":"job.ack","job_id":"j1","seq":1}`, protocol.ErrVersion,
			"decode: protocol version mismatch: got 2, want 1"},
		{"wrong version wins over unknown type", `{"v":2,"type":"job.new"}`, protocol.ErrVersion,
			"got 2, want 1"},
		{"version not an integer", `{"v":"1","type":"job.ack"}`, protocol.ErrMalformed,
			"decode: malformed message: json: cannot unmarshal string"},
		{"missing type", `{"v":1,"job_id":"j1"}`, protocol.ErrMalformed, `decode: malformed message: missing "type"`},
		{"unknown type", `{"v":1,"type":"job.explode"}`, protocol.ErrUnknownType,
			`decode: unknown message type "job.explode"`},
		{"field of wrong json type", `{"v":1,"type":"job.ack","job_id":"j1","seq":"1"}`, protocol.ErrMalformed,
			"decode: malformed message: job.ack: json: cannot unmarshal string into Go struct field JobAck.seq"},
		{"negative seq", `{"v":1,"type":"job.ack","job_id":"j1","seq":-1}`, protocol.ErrMalformed,
			"job.ack: json: cannot unmarshal number -1"},
		{"bad timestamp", `{"v":1,"type":"heartbeat","time":"yesterday"}`, protocol.ErrMalformed,
			"decode: malformed message: heartbeat: parsing time"},

		// Validation, one message type at a time.
		{"register missing agent_id", `{"v":1,"type":"register","concurrency":1}`, protocol.ErrInvalid,
			`decode: invalid message: register: missing "agent_id"`},
		{"register concurrency 0", `{"v":1,"type":"register","agent_id":"a1"}`, protocol.ErrInvalid,
			`register: "concurrency" is 0, want >= 1`},
		{"register empty label", `{"v":1,"type":"register","agent_id":"a1","concurrency":1,"labels":["x",""]}`,
			protocol.ErrInvalid, `register: "labels[1]" is empty`},
		{"register empty feature", `{"v":1,"type":"register","agent_id":"a1","concurrency":1,"features":[""]}`,
			protocol.ErrInvalid, `register: "features[0]" is empty`},
		{"register repeated feature", `{"v":1,"type":"register","agent_id":"a1","concurrency":1,"features":["archive_inline","archive_inline"]}`,
			protocol.ErrInvalid, `register: "features[1]" repeats "archive_inline"`},
		{"register repeated label", `{"v":1,"type":"register","agent_id":"a1","concurrency":1,"labels":["x","x"]}`,
			protocol.ErrInvalid, `register: "labels[1]" repeats "x"`},
		{"register in_flight missing job_id",
			`{"v":1,"type":"register","agent_id":"a1","concurrency":1,"in_flight":[{"last_seq":2}]}`,
			protocol.ErrInvalid, `register: missing "in_flight[0].job_id"`},
		{"register in_flight repeated",
			`{"v":1,"type":"register","agent_id":"a1","concurrency":1,"in_flight":[{"job_id":"j"},{"job_id":"j"}]}`,
			protocol.ErrInvalid, `register: "in_flight[1]" repeats "j"`},
		{"registered missing interval", `{"v":1,"type":"registered","agent_id":"a1"}`, protocol.ErrInvalid,
			`registered: "heartbeat_interval_ms" is 0, want >= 1`},
		{"registered resume missing job_id",
			`{"v":1,"type":"registered","agent_id":"a1","heartbeat_interval_ms":1,"resume":[{"ack_seq":1}]}`,
			protocol.ErrInvalid, `registered: missing "resume[0].job_id"`},
		{"dispatch missing run_id", dispatchJSON(`"run_id":""`), protocol.ErrInvalid,
			`job.dispatch: missing "run_id"`},
		{"dispatch attempt 0", dispatchJSON(`"attempt":0`), protocol.ErrInvalid,
			`job.dispatch: "attempt" is 0, want >= 1`},
		{"dispatch missing job name", dispatchJSON(`"job":{"steps":[{"name":"s","run":"true"}]}`),
			protocol.ErrInvalid, `job.dispatch: missing "job.name"`},
		{"dispatch without steps", dispatchJSON(`"job":{"name":"build"}`), protocol.ErrInvalid,
			`job.dispatch: missing "job.steps"`},
		{"dispatch negative timeout", dispatchJSON(`"timeout_ms":-1`), protocol.ErrInvalid,
			`job.dispatch: "timeout_ms" is -1, want >= 0`},
		{"dispatch unknown source kind", dispatchJSON(`"source":{"kind":"svn","sha":"abc"}`), protocol.ErrInvalid,
			`job.dispatch: "source.kind" is "svn", want one of archive, git`},
		{"dispatch archive without url", dispatchJSON(`"source":{"kind":"archive","sha":"abc"}`),
			protocol.ErrInvalid, `job.dispatch: missing "source.archive_url"`},
		{"dispatch git without clone url", dispatchJSON(`"source":{"kind":"git","sha":"abc"}`),
			protocol.ErrInvalid, `job.dispatch: missing "source.clone_url"`},
		{"dispatch missing sha", dispatchJSON(`"source":{"kind":"git","clone_url":"https://x/y.git"}`),
			protocol.ErrInvalid, `job.dispatch: missing "source.sha"`},
		{"dispatch inline archive without sha256",
			dispatchJSON(`"source":{"kind":"archive","archive_url":"/a","sha":"abc","archive_inline":"AAEC"}`),
			protocol.ErrInvalid, `job.dispatch: "source.archive_sha256" is "", want 64 lowercase hex characters`},
		{"dispatch inline archive with a short sha256",
			dispatchJSON(`"source":{"kind":"archive","archive_url":"/a","sha":"abc","archive_inline":"AAEC","archive_sha256":"abc"}`),
			protocol.ErrInvalid, `job.dispatch: "source.archive_sha256" is "abc", want 64 lowercase hex characters`},
		{"dispatch inline archive for git",
			dispatchJSON(`"source":{"kind":"git","clone_url":"https://x/y.git","sha":"abc","archive_inline":"AAEC","archive_sha256":"` + strings.Repeat("a", 64) + `"}`),
			protocol.ErrInvalid, `job.dispatch: "source.archive_inline" is set for "source.kind" "git", want it only for "archive"`},
		{"dispatch inline archive over the limit",
			dispatchJSON(`"source":{"kind":"archive","archive_url":"/a","sha":"abc","archive_sha256":"` + strings.Repeat("a", 64) +
				`","archive_inline":"` + base64.StdEncoding.EncodeToString(make([]byte, protocol.MaxInlineArchiveBytes+1)) + `"}`),
			protocol.ErrInvalid, fmt.Sprintf(`job.dispatch: "source.archive_inline" is %d bytes, limit %d`, protocol.MaxInlineArchiveBytes+1, protocol.MaxInlineArchiveBytes)},
		{"dispatch sha256 without inline archive",
			dispatchJSON(`"source":{"kind":"archive","archive_url":"/a","sha":"abc","archive_sha256":"` + strings.Repeat("a", 64) + `"}`),
			protocol.ErrInvalid, `job.dispatch: "source.archive_sha256" is set without "source.archive_inline"`},
		{"dispatch inline archive not base64",
			dispatchJSON(`"source":{"kind":"archive","archive_url":"/a","sha":"abc","archive_inline":"!!","archive_sha256":"` + strings.Repeat("a", 64) + `"}`),
			protocol.ErrMalformed, `job.dispatch`},
		{"ack missing job_id", `{"v":1,"type":"job.ack","seq":1}`, protocol.ErrInvalid,
			`job.ack: missing "job_id"`},
		{"ack seq 0", `{"v":1,"type":"job.ack","job_id":"j1"}`, protocol.ErrInvalid,
			`job.ack: "seq" is 0, want >= 1`},
		{"reject missing reason", `{"v":1,"type":"job.reject","job_id":"j1","seq":1}`, protocol.ErrInvalid,
			`job.reject: missing "reason"`},
		{"reject unknown reason", `{"v":1,"type":"job.reject","job_id":"j1","seq":1,"reason":"tired"}`,
			protocol.ErrInvalid, `job.reject: "reason" is "tired", want one of busy, labels, shutting_down`},
		{"job status missing job_id", `{"v":1,"type":"job.status","seq":1,"status":"running"}`,
			protocol.ErrInvalid, `decode: invalid message: job.status: missing "job_id"`},
		{"job status unknown status", `{"v":1,"type":"job.status","job_id":"j1","seq":1,"status":"failed"}`,
			protocol.ErrInvalid, `job.status: "status" is "failed", want one of running, success, failure, cancelled`},
		{"job status long bogus status is clipped",
			`{"v":1,"type":"job.status","job_id":"j1","seq":1,"status":"` + strings.Repeat("z", 500) + `"}`,
			protocol.ErrInvalid, `"status" is "` + strings.Repeat("z", 64) + `...", want one of`},
		{"step status negative step", `{"v":1,"type":"step.status","job_id":"j1","seq":1,"step":-1,"status":"running"}`,
			protocol.ErrInvalid, `step.status: "step" is -1, want >= 0`},
		{"step status missing status", `{"v":1,"type":"step.status","job_id":"j1","seq":1,"step":0}`,
			protocol.ErrInvalid, `step.status: missing "status"`},
		{"step status finished before started",
			`{"v":1,"type":"step.status","job_id":"j1","seq":1,"step":0,"status":"success",` +
				`"started_at":"2025-03-01T12:00:01Z","finished_at":"2025-03-01T12:00:00Z"}`,
			protocol.ErrInvalid, `step.status: "finished_at" is before "started_at"`},
		{"log chunk without lines", `{"v":1,"type":"log.chunk","job_id":"j1","seq":1,"step":0}`,
			protocol.ErrInvalid, `log.chunk: missing "lines"`},
		{"log chunk step below job level", `{"v":1,"type":"log.chunk","job_id":"j1","seq":1,"step":-2,"truncated":true}`,
			protocol.ErrInvalid, `log.chunk: "step" is -2, want >= -1`},
		{"log chunk line without ts", `{"v":1,"type":"log.chunk","job_id":"j1","seq":1,"step":0,"lines":[{"text":"x"}]}`,
			protocol.ErrInvalid, `log.chunk: missing "lines[0].ts"`},
		{"log chunk too many lines", manyLines, protocol.ErrInvalid,
			`log.chunk: "lines" has 1001 lines, limit 1000`},
		{"log chunk too much text", bigText, protocol.ErrInvalid,
			`log.chunk: "lines" hold 131073 bytes of text, limit 131072`},
		{"heartbeat missing time", `{"v":1,"type":"heartbeat"}`, protocol.ErrInvalid,
			`heartbeat: missing "time"`},
		{"heartbeat empty busy id", `{"v":1,"type":"heartbeat","time":"2025-03-01T12:00:00Z","busy":[""]}`,
			protocol.ErrInvalid, `heartbeat: "busy[0]" is empty`},
		{"cancel missing job_id", `{"v":1,"type":"job.cancel","force":true}`, protocol.ErrInvalid,
			`job.cancel: missing "job_id"`},
		{"ackseq seq 0", `{"v":1,"type":"job.ackseq","job_id":"j1","seq":0}`, protocol.ErrInvalid,
			`job.ackseq: "seq" is 0, want >= 1`},
		{"error missing code", `{"v":1,"type":"error","message":"x"}`, protocol.ErrInvalid,
			`error: missing "code"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			msg, err := protocol.Decode([]byte(tc.data))
			if err == nil {
				t.Fatalf("Decode: got %v, nil error; want error %v", msg, tc.wantErr)
			}
			if msg != nil {
				t.Errorf("Decode: got message %v with the error, want nil", msg)
			}
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("Decode: got error %v, want one wrapping %v", err, tc.wantErr)
			}
			if text := err.Error(); !strings.Contains(text, tc.wantText) {
				t.Errorf("Decode: got error text %.300q, want it to contain %q", text, tc.wantText)
			}
		})
	}
}

// dispatchJSON returns a valid job.dispatch with one top-level field set:
// field is a `"key":value` pair that replaces the key's value or is added.
func dispatchJSON(field string) string {
	fields := []string{
		`"job_id":"j1"`, `"run_id":"r1"`, `"attempt":1`,
		`"job":{"name":"build","steps":[{"name":"s","run":"true"}]}`,
		`"source":{"kind":"git","clone_url":"https://x/y.git","sha":"abc"}`,
	}
	key, _, _ := strings.Cut(field, ":")
	i := slices.IndexFunc(fields, func(f string) bool { return strings.HasPrefix(f, key+":") })
	if i < 0 {
		fields = append(fields, field)
	} else {
		fields[i] = field
	}
	fields = append([]string{`"v":1`, `"type":"job.dispatch"`}, fields...)
	return "{" + strings.Join(fields, ",") + "}"
}

func TestEncodeErrors(t *testing.T) {
	t.Parallel()
	huge := &protocol.JobDispatch{
		JobID: "j1", RunID: "r1", Attempt: 1,
		Job:    workflow.Job{Name: "build", Steps: []workflow.Step{{Name: "s", Run: "true"}}},
		Source: protocol.Source{Kind: protocol.SourceGit, CloneURL: "https://x/y.git", SHA: "abc"},
		Env:    map[string]string{"BIG": strings.Repeat("x", protocol.MaxMessageBytes)},
	}

	tests := []struct {
		name     string
		msg      protocol.Message
		wantErr  error // nil: any error
		wantText string
	}{
		{"nil interface", nil, nil, "encode: nil message"},
		{"nil pointer", (*protocol.JobAck)(nil), nil, "encode: nil message"},
		{"invalid", &protocol.JobStatus{JobID: "j1", Seq: 1}, protocol.ErrInvalid,
			`encode: invalid message: job.status: missing "status"`},
		{"too large", huge, protocol.ErrTooLarge, `encode "job.dispatch": message too large:`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			data, err := protocol.Encode(tc.msg)
			if err == nil {
				t.Fatalf("Encode: got %d bytes, nil error; want an error", len(data))
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("Encode: got error %v, want one wrapping %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("Encode: got error text %q, want it to contain %q", err, tc.wantText)
			}
		})
	}
}

// TestLogChunkWorstCaseFits checks the claim of MaxLogChunkTextBytes: a chunk
// at both limits, every text byte needing a six-byte escape, still encodes
// below MaxMessageBytes.
func TestLogChunkWorstCaseFits(t *testing.T) {
	t.Parallel()
	chunk := &protocol.LogChunk{JobID: "0195f0c4-7c1e-7a3b-9c2d-4e5f6a7b8c9d", Seq: 1 << 62, Step: 1 << 20}
	per := protocol.MaxLogChunkTextBytes / protocol.MaxLogChunkLines
	for i := range protocol.MaxLogChunkLines {
		n := per
		if i == protocol.MaxLogChunkLines-1 {
			n = protocol.MaxLogChunkTextBytes - per*(protocol.MaxLogChunkLines-1)
		}
		ts := t0.In(time.FixedZone("", -(9*3600 + 30*60)))
		chunk.Lines = append(chunk.Lines, protocol.LogLine{TS: ts, Text: strings.Repeat("\x01", n)})
	}
	data, err := protocol.Encode(chunk)
	if err != nil {
		t.Fatalf("Encode: got error %v, want nil", err)
	}
	t.Logf("worst-case log chunk: %d bytes of %d", len(data), protocol.MaxMessageBytes)
}

func TestJobScoped(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		msg        protocol.Message
		wantScoped bool
		wantJob    string
		wantSeq    uint64
	}{
		{"job.ack", &protocol.JobAck{JobID: "j1", Seq: 1}, true, "j1", 1},
		{"job.reject", &protocol.JobReject{JobID: "j2", Seq: 1, Reason: protocol.RejectBusy}, true, "j2", 1},
		{"job.status", &protocol.JobStatus{JobID: "j3", Seq: 5, Status: protocol.JobRunning}, true, "j3", 5},
		{"step.status", &protocol.StepStatus{JobID: "j4", Seq: 6}, true, "j4", 6},
		{"log.chunk", &protocol.LogChunk{JobID: "j5", Seq: 7}, true, "j5", 7},
		{"register", &protocol.Register{}, false, "", 0},
		{"registered", &protocol.Registered{}, false, "", 0},
		{"job.dispatch", &protocol.JobDispatch{}, false, "", 0},
		{"heartbeat", &protocol.Heartbeat{}, false, "", 0},
		{"job.cancel", &protocol.JobCancel{}, false, "", 0},
		{"job.ackseq", &protocol.JobAckSeq{}, false, "", 0},
		{"error", &protocol.Error{}, false, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			scoped, ok := tc.msg.(protocol.JobScoped)
			if ok != tc.wantScoped {
				t.Fatalf("%T is JobScoped: got %t, want %t", tc.msg, ok, tc.wantScoped)
			}
			if !ok {
				return
			}
			job, seq := scoped.JobSeq()
			if job != tc.wantJob || seq != tc.wantSeq {
				t.Errorf("JobSeq: got (%q, %d), want (%q, %d)", job, seq, tc.wantJob, tc.wantSeq)
			}
		})
	}
}

func TestSentBy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ        string
		wantAgent  bool
		wantServer bool
	}{
		{protocol.TypeRegister, true, false},
		{protocol.TypeRegistered, false, true},
		{protocol.TypeJobDispatch, false, true},
		{protocol.TypeJobAck, true, false},
		{protocol.TypeJobReject, true, false},
		{protocol.TypeJobStatus, true, false},
		{protocol.TypeStepStatus, true, false},
		{protocol.TypeLogChunk, true, false},
		{protocol.TypeHeartbeat, true, true},
		{protocol.TypeJobCancel, false, true},
		{protocol.TypeJobAckSeq, false, true},
		{protocol.TypeError, false, true},
		{"job.explode", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.typ, func(t *testing.T) {
			t.Parallel()
			if got := protocol.SentByAgent(tc.typ); got != tc.wantAgent {
				t.Errorf("SentByAgent(%q): got %t, want %t", tc.typ, got, tc.wantAgent)
			}
			if got := protocol.SentByServer(tc.typ); got != tc.wantServer {
				t.Errorf("SentByServer(%q): got %t, want %t", tc.typ, got, tc.wantServer)
			}
		})
	}
}
