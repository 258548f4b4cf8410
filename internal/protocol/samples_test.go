package protocol_test

import (
	"time"

	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/workflow"
)

// t0 is the fixed time of the samples.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)

type sample struct {
	name string
	msg  protocol.Message
}

// samples returns valid messages covering every message type, each field
// set at least once. The round-trip test and the fuzz corpus use them.
func samples() []sample {
	return []sample{
		{"register", &protocol.Register{
			AgentID: "agent-1", Labels: []string{"linux", "x64"}, Version: "0.1.0",
			Hostname: "build-01", OS: "linux", Arch: "amd64", Concurrency: 2,
			InFlight: []protocol.InFlightJob{{JobID: "job-1", LastSeq: 9}, {JobID: "job-2"}},
		}},
		{"register_scaler", &protocol.Register{
			AgentID: "spawn-7f3a", Concurrency: 1, OneShot: true, ScalerAgent: true,
			Features: []string{protocol.FeatureArchiveInline, "from-the-future"},
		}},
		{"registered", &protocol.Registered{
			AgentID: "agent-1", HeartbeatIntervalMS: 30000, ServerVersion: "0.1.0",
			Resume: []protocol.ResumeJob{{JobID: "job-1", AckSeq: 7}, {JobID: "job-2"}},
		}},
		{"job_dispatch_git", &protocol.JobDispatch{
			JobID: "job-1", RunID: "run-1", Attempt: 2,
			Job: workflow.Job{
				Name: "test (go=1.26)", Base: "test", Matrix: map[string]string{"go": "1.26"},
				RunsOn: []string{"linux"}, Env: map[string]string{"CGO_ENABLED": "0"},
				TimeoutMS: 600000, Secrets: []string{"NPM_TOKEN"},
				Needs: []workflow.Need{{Job: "build", On: []string{workflow.NeedSuccess}}},
				Steps: []workflow.Step{
					{Name: "test", Run: "go test ./...", Env: map[string]string{"X": "1"}, TimeoutMS: 60000},
					{Name: "step-2", Run: "echo '<done> & dusted'", ContinueOnError: true},
				},
			},
			Source: protocol.Source{
				Kind: protocol.SourceGit, CloneURL: "https://example.com/acme/app.git",
				SHA: "0123456789abcdef0123456789abcdef01234567", Ref: "refs/heads/main",
			},
			Env:       map[string]string{"KICI_RUN_ID": "run-1"},
			Secrets:   map[string]string{"NPM_TOKEN": "s3cr3t-value"},
			Masks:     []string{"s3cr3t-value-b64"},
			JobToken:  "job-token-abc",
			TimeoutMS: 600000,
			EventEnv:  map[string]string{"KICI_EVENT_BRANCH": "main", "KICI_INPUT_TARGET": "$(rm -rf /)"},
		}},
		{"job_dispatch_archive", &protocol.JobDispatch{
			JobID: "job-2", RunID: "run-1", Attempt: 1,
			Job: workflow.Job{Name: "lint", Base: "lint", Steps: []workflow.Step{{Name: "step-1", Run: "make lint"}}},
			Source: protocol.Source{
				Kind: protocol.SourceArchive, ArchiveURL: "/api/v1/jobs/job-2/source.tar.gz",
				SHA: "0123456789abcdef0123456789abcdef01234567",
			},
		}},
		{"job_dispatch_archive_inline", &protocol.JobDispatch{
			JobID: "job-3", RunID: "run-1", Attempt: 1,
			Job: workflow.Job{Name: "lint", Base: "lint", Steps: []workflow.Step{{Name: "step-1", Run: "make lint"}}},
			Source: protocol.Source{
				Kind: protocol.SourceArchive, ArchiveURL: "/api/v1/jobs/job-3/source.tar.gz",
				SHA:           "0123456789abcdef0123456789abcdef01234567",
				ArchiveInline: []byte("\x1f\x8b not really gzip"),
				ArchiveSHA256: "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
			},
		}},
		{"job_ack", &protocol.JobAck{JobID: "job-1", Seq: 1}},
		{"job_reject", &protocol.JobReject{JobID: "job-1", Seq: 1, Reason: protocol.RejectShuttingDown}},
		{"job_status_running", &protocol.JobStatus{JobID: "job-1", Seq: 2, Status: protocol.JobRunning}},
		{"job_status_failure", &protocol.JobStatus{
			JobID: "job-1", Seq: 9, Status: protocol.JobFailure, Error: `step "test" exited with code 2`, ExitCode: 2,
		}},
		{"step_status_running", &protocol.StepStatus{
			JobID: "job-1", Seq: 3, Step: 0, Status: protocol.StepRunning, StartedAt: t0,
		}},
		{"step_status_failure", &protocol.StepStatus{
			JobID: "job-1", Seq: 8, Step: 1, Status: protocol.StepFailure, ExitCode: -1,
			Error: "step timeout 1m0s exceeded", StartedAt: t0, FinishedAt: t0.Add(time.Minute),
		}},
		{"step_status_skipped", &protocol.StepStatus{JobID: "job-1", Seq: 10, Step: 2, Status: protocol.StepSkipped}},
		{"log_chunk", &protocol.LogChunk{
			JobID: "job-1", Seq: 4, Step: 0,
			Lines: []protocol.LogLine{
				{TS: t0, Text: "ok  \tgithub.com/acme/app\t0.012s"},
				{TS: t0.Add(time.Millisecond), Text: "<html> & \u00e9\u2603 \x1b[31mred\x1b[0m ***"},
				{TS: t0.Add(2 * time.Millisecond), Text: ""},
			},
		}},
		{"log_chunk_job_level_truncated", &protocol.LogChunk{
			JobID: "job-1", Seq: 5, Step: protocol.JobLevelStep, Truncated: true,
		}},
		{"heartbeat_agent", &protocol.Heartbeat{Time: t0, Busy: []string{"job-1", "job-2"}}},
		{"heartbeat_server", &protocol.Heartbeat{Time: t0.In(time.FixedZone("CET", 3600))}},
		{"job_cancel", &protocol.JobCancel{JobID: "job-1", Force: true, Reason: "cancelled by alice"}},
		{"job_ackseq", &protocol.JobAckSeq{JobID: "job-1", Seq: 9}},
		{"error", &protocol.Error{Code: protocol.ErrorNotOwner, Message: `job "job-9" is not dispatched to this agent`}},
	}
}
