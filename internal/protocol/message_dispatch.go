package protocol

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"

	"github.com/kici-dev/kici/internal/workflow"
)

// Source kinds: where a dispatched job's code comes from.
const (
	// SourceArchive is a tar.gz of the repository at SHA, served by the
	// orchestrator at ArchiveURL (used for local sources).
	SourceArchive = "archive"
	// SourceGit is a git repository the agent clones from CloneURL, then
	// checks out SHA.
	SourceGit = "git"
)

// MaxInlineArchiveBytes bounds [Source.ArchiveInline]: the orchestrator
// inlines only an archive of at most this many bytes (tar.gz), which base64
// makes 4/3 as large in the message, so that the whole dispatch stays well
// under [MaxMessageBytes]. A larger archive is fetched from
// Source.ArchiveURL.
const MaxInlineArchiveBytes = 256 << 10

// inlineMargin is what [JobDispatch.InlineArchive] keeps free of
// [MaxMessageBytes] beyond its own estimate: the envelope and the JSON
// punctuation of the two inline fields need less than this.
const inlineMargin = 1 << 10

// sha256Re matches a SHA-256 digest in lowercase hex.
var sha256Re = regexp.MustCompile(`^[0-9a-f]{64}$`)

// JobDispatch hands one job to an agent (orchestrator → agent). The agent
// answers within the ack deadline with [JobAck] or [JobReject] (seq 1);
// otherwise the orchestrator closes the connection with [CloseAckTimeout].
//
// The agent builds each step's environment from these layers, a later one
// overriding an earlier one: its allow-listed host variables, Env, EventEnv,
// Job.Env, the step's Env, then Secrets.
type JobDispatch struct {
	// JobID identifies the job; required.
	JobID string `json:"job_id"`
	// RunID identifies the run the job belongs to; required.
	RunID string `json:"run_id"`
	// Attempt counts dispatches of this job, starting at 1. Sequence numbers
	// start again at 1 for every dispatch.
	Attempt int `json:"attempt"`
	// Job is the compiled job, in the plan's JSON form (camelCase keys).
	// Its Name and at least one step are required.
	Job workflow.Job `json:"job"`
	// Source says where to fetch the code.
	Source Source `json:"source"`
	// Env holds the variables the orchestrator adds for this run (KICI_*
	// run metadata).
	Env map[string]string `json:"env,omitempty"`
	// Secrets maps each secret named by Job.Secrets to its value. The agent
	// keeps them out of its own logs and masks every value in step output.
	Secrets map[string]string `json:"secrets,omitempty"`
	// Masks are further strings the agent replaces with "***" in step
	// output, in addition to the Secrets values and JobToken.
	Masks []string `json:"masks,omitempty"`
	// JobToken is a bearer token scoped to this job, valid until it ends.
	// The agent sends it when fetching Source.ArchiveURL and masks it.
	JobToken string `json:"job_token,omitempty"`
	// TimeoutMS bounds the whole job in milliseconds, defaults already
	// applied; 0 means no job timeout (step timeouts still apply).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// EventEnv holds the variables describing the triggering event and the
	// manual inputs (KICI_EVENT_*, KICI_INPUT_*; see docs/workflows.md),
	// which the steps' rewritten ${{ event.* }} and ${{ inputs.* }}
	// references read.
	EventEnv map[string]string `json:"event_env,omitempty"`
	// Event and Inputs are the triggering event and the resolved manual
	// inputs as the job's expressions see them (event.*, inputs.*), for
	// evaluating step conditions. Optional: an agent given none rebuilds
	// them from EventEnv.
	Event  *workflow.EventVars `json:"event,omitempty"`
	Inputs map[string]string   `json:"inputs,omitempty"`
}

// Source says where a dispatched job's code comes from.
type Source struct {
	// Kind is SourceArchive or SourceGit; required.
	Kind string `json:"kind"`
	// ArchiveURL locates the tar.gz for SourceArchive. A relative URL is
	// resolved against the orchestrator URL the agent dialled.
	ArchiveURL string `json:"archive_url,omitempty"`
	// CloneURL is what the agent passes to git clone for SourceGit. If it
	// embeds a credential, that credential is also in JobDispatch.Masks.
	CloneURL string `json:"clone_url,omitempty"`
	// SHA is the commit to run; required.
	SHA string `json:"sha"`
	// Ref is the branch or tag the commit was pushed to, if any.
	Ref string `json:"ref,omitempty"`
	// ArchiveInline is, optionally, the tar.gz that ArchiveURL serves,
	// carried in the dispatch itself (base64 in JSON) so that the agent
	// need not fetch it. At most [MaxInlineArchiveBytes]. The orchestrator
	// sends it only to an agent that announced [FeatureArchiveInline]; an
	// agent that gets none fetches ArchiveURL, which is always set.
	ArchiveInline []byte `json:"archive_inline,omitempty"`
	// ArchiveSHA256 is the SHA-256 of ArchiveInline in lowercase hex;
	// required with it. The agent checks it before extracting and fails the
	// job on a mismatch.
	ArchiveSHA256 string `json:"archive_sha256,omitempty"`
}

// InlineArchive puts data in m.Source as the inline archive, with its
// SHA-256, if data is at most [MaxInlineArchiveBytes] and the encoded
// dispatch stays under [MaxMessageBytes]; otherwise it leaves m as it was.
// It reports whether it inlined data. m must be complete otherwise: its
// size is measured without the archive.
func (m *JobDispatch) InlineArchive(data []byte) bool {
	if len(data) == 0 || len(data) > MaxInlineArchiveBytes || m.Source.Kind != SourceArchive {
		return false
	}
	rest, err := json.Marshal(m)
	if err != nil {
		return false
	}
	if len(rest)+base64.StdEncoding.EncodedLen(len(data))+sha256.Size*2+inlineMargin > MaxMessageBytes {
		return false
	}
	sum := sha256.Sum256(data)
	m.Source.ArchiveInline, m.Source.ArchiveSHA256 = data, hex.EncodeToString(sum[:])
	return true
}

// Type returns [TypeJobDispatch].
func (*JobDispatch) Type() string { return TypeJobDispatch }

// Validate checks the ids, the attempt, the job and the source.
func (m *JobDispatch) Validate() error {
	c := check{typ: TypeJobDispatch}
	c.required("job_id", m.JobID)
	c.required("run_id", m.RunID)
	c.atLeast("attempt", int64(m.Attempt), 1)
	c.required("job.name", m.Job.Name)
	if len(m.Job.Steps) == 0 {
		c.failf("missing %q", "job.steps")
	}
	c.atLeast("timeout_ms", m.TimeoutMS, 0)
	c.oneOf("source.kind", m.Source.Kind, SourceArchive, SourceGit)
	switch m.Source.Kind {
	case SourceArchive:
		c.required("source.archive_url", m.Source.ArchiveURL)
	case SourceGit:
		c.required("source.clone_url", m.Source.CloneURL)
	}
	if n := len(m.Source.ArchiveInline); n > 0 {
		if m.Source.Kind != SourceArchive {
			c.failf("%q is set for %q %q, want it only for %q", "source.archive_inline", "source.kind", m.Source.Kind, SourceArchive)
		}
		if n > MaxInlineArchiveBytes {
			c.failf("%q is %d bytes, limit %d", "source.archive_inline", n, MaxInlineArchiveBytes)
		}
		if !sha256Re.MatchString(m.Source.ArchiveSHA256) {
			c.failf("%q is %q, want 64 lowercase hex characters", "source.archive_sha256", clip(m.Source.ArchiveSHA256))
		}
	} else if m.Source.ArchiveSHA256 != "" {
		c.failf("%q is set without %q", "source.archive_sha256", "source.archive_inline")
	}
	c.required("source.sha", m.Source.SHA)
	return c.err
}

// String describes the dispatch without its secret values, job token or
// masks, so that printing it with fmt leaks nothing.
func (m JobDispatch) String() string {
	return fmt.Sprintf("job.dispatch{job_id=%q run_id=%q attempt=%d job=%q sha=%q secrets=%d}",
		m.JobID, m.RunID, m.Attempt, m.Job.Name, m.Source.SHA, len(m.Secrets))
}

// LogValue implements [slog.LogValuer] like String: identifying fields only,
// never secret values, the job token or masks.
func (m JobDispatch) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("job_id", m.JobID),
		slog.String("run_id", m.RunID),
		slog.Int("attempt", m.Attempt),
		slog.String("job", m.Job.Name),
		slog.String("sha", m.Source.SHA),
		slog.Int("secrets", len(m.Secrets)),
		slog.Int("archive_inline_bytes", len(m.Source.ArchiveInline)),
	)
}

// JobCancel asks the agent to stop a job (orchestrator → agent). The agent
// interrupts the running step's process group, waits its grace period, then
// kills the group; with Force it kills at once. It then reports the step and
// the job cancelled. A cancel for a job the agent does not have is ignored.
type JobCancel struct {
	// JobID is the job to stop; required.
	JobID string `json:"job_id"`
	// Force skips the grace period.
	Force bool `json:"force,omitempty"`
	// Reason says why, for the job's log (e.g. "cancelled by alice").
	Reason string `json:"reason,omitempty"`
}

// Type returns [TypeJobCancel].
func (*JobCancel) Type() string { return TypeJobCancel }

// Validate checks the job id.
func (m *JobCancel) Validate() error {
	c := check{typ: TypeJobCancel}
	c.required("job_id", m.JobID)
	return c.err
}

// JobAckSeq tells the agent that the orchestrator has applied (and stored)
// every message of a job up to and including Seq (orchestrator → agent). The
// agent drops those messages from its replay buffer. Acknowledgements are
// cumulative: the orchestrator may acknowledge several messages at once.
type JobAckSeq struct {
	// JobID is the job; required.
	JobID string `json:"job_id"`
	// Seq is the highest applied seq; at least 1.
	Seq uint64 `json:"seq"`
}

// Type returns [TypeJobAckSeq].
func (*JobAckSeq) Type() string { return TypeJobAckSeq }

// Validate checks the job id and seq.
func (m *JobAckSeq) Validate() error {
	c := check{typ: TypeJobAckSeq}
	c.required("job_id", m.JobID)
	c.seq("seq", m.Seq)
	return c.err
}
