package logs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kici-dev/kici/internal/durable"
	"github.com/kici-dev/kici/internal/protocol"
)

// ErrInvalidKey is returned (wrapped) for a run or job id that is not safe
// as a path component, or a step index below -1.
var ErrInvalidKey = errors.New("invalid log key")

// ErrBadCursor is returned (wrapped) by Read for a cursor that is negative,
// past the end of the step's log, or not at the start of a line.
var ErrBadCursor = errors.New("invalid log cursor")

// SetupStep is the step index of output that belongs to no step (the
// checkout, the agent's notes); it is stored in step-setup.log.
const SetupStep = protocol.JobLevelStep

// maxIDLen bounds a run or job id; ids are UUIDs today.
const maxIDLen = 128

// Line is one output line as the agent sent it: its timestamp and its text
// without the line ending.
type Line = protocol.LogLine

// StoredLine is one stored line: one line of a step's log file, and one
// element of what Read returns.
type StoredLine struct {
	// Seq is the seq of the log.chunk that carried the line.
	Seq uint64 `json:"seq"`
	// Attempt is the dispatch attempt the chunk belongs to; 0 (omitted)
	// means the first.
	Attempt int `json:"attempt,omitempty"`
	// TS is when the agent read the line (RFC 3339 with nanoseconds).
	TS time.Time `json:"ts"`
	// Text is the line without its line ending.
	Text string `json:"text"`
}

// StepKey names one step's log.
type StepKey struct {
	// RunID and JobID are the ids of the run and the job. They become path
	// components, so they may hold only ASCII letters, digits, '.', '_' and
	// '-', must not start with '.', and are at most 128 bytes.
	RunID string
	JobID string
	// Step is the step's index in the job, or SetupStep (-1).
	Step int
	// Attempt is the dispatch attempt of the chunk being appended
	// (job.dispatch's attempt; 0 means 1). The agent's seq starts again at 1
	// with each attempt, so Append orders chunks by (attempt, seq). Read and
	// Size ignore it: all attempts share the step's file.
	Attempt int
}

// String returns the step log's path below the root, for messages.
func (k StepKey) String() string {
	return k.RunID + "/" + k.JobID + "/" + stepFileName(k.Step)
}

// validate checks the key's ids and step index.
func (k StepKey) validate() error {
	if err := checkID("run id", k.RunID); err != nil {
		return err
	}
	if err := checkID("job id", k.JobID); err != nil {
		return err
	}
	if k.Step < SetupStep {
		return fmt.Errorf("%w: step index %d is below %d", ErrInvalidKey, k.Step, SetupStep)
	}
	if k.Attempt < 0 {
		return fmt.Errorf("%w: attempt %d is negative", ErrInvalidKey, k.Attempt)
	}
	return nil
}

// checkID refuses an id that could leave the root directory or is not a
// plain file name.
func checkID(what, id string) error {
	if id == "" || len(id) > maxIDLen || id[0] == '.' {
		return fmt.Errorf("%w: %s %q", ErrInvalidKey, what, id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %s %q", ErrInvalidKey, what, id)
		}
	}
	return nil
}

func stepFileName(step int) string {
	if step == SetupStep {
		return "step-setup.log"
	}
	return "step-" + strconv.Itoa(step) + ".log"
}

// Config configures a Store.
type Config struct {
	// Dir is the root directory of the logs, created (mode 0700) if
	// missing; required. Every directory and file below it is created
	// readable by its owner only (0700, 0600).
	Dir string
	// SubscriberBuffer is how many events each subscriber may have waiting
	// before it is dropped as lagged; zero means 256.
	SubscriberBuffer int
	// DB, when set, makes the Store shared: logs are kept in the database
	// instead of files under Dir, so that every coordinator of a cluster
	// reads and follows every log, and a log outlives the coordinator that
	// received it. Cursors, replay rules and events are the same.
	DB ChunkDB
}

// Validate reports the first bad field.
func (c Config) Validate() error {
	if c.Dir == "" {
		return errors.New("logs config: Dir is required")
	}
	if c.SubscriberBuffer < 0 {
		return fmt.Errorf("logs config: SubscriberBuffer %d is negative", c.SubscriberBuffer)
	}
	return nil
}

// Stats are the Store's counters since it was built, for the metrics
// package.
type Stats struct {
	// BytesStored is the number of bytes appended to log files.
	BytesStored int64
	// ChunksStored counts the chunks Append wrote.
	ChunksStored int64
	// ChunksSkipped counts the chunks Append skipped as replays.
	ChunksSkipped int64
	// SubscribersLagged counts the subscribers dropped for falling behind.
	SubscribersLagged int64
}

// Store is the file-backed log store with its live event hub. Build it with
// New; it is safe for concurrent use.
type Store struct {
	log *slog.Logger
	dir string
	hub *hub
	// db keeps the logs of a shared Store (Config.DB); nil: files.
	db ChunkDB
	// onLog is told of each log event of a chunk stored here (OnLog).
	onLog func(Event)

	mu   sync.Mutex
	jobs map[jobKey]*jobState

	bytesStored   atomic.Int64
	chunksStored  atomic.Int64
	chunksSkipped atomic.Int64

	// syncedRuns holds the runs whose directory entry in the root this
	// Store has synced (at most maxSyncedRuns), under mu.
	syncedRuns map[string]struct{}

	// write writes a chunk's buffer; tests replace it to simulate a full
	// disk. syncFile syncs a log file's data (fdatasync) and syncDir a
	// directory (fsync); tests wrap them to count the syncs.
	write    func(f *os.File, b []byte) (int, error)
	syncFile func(f *os.File) error
	syncDir  func(dir string) error
}

// New builds a Store, creating cfg.Dir if needed.
func New(logger *slog.Logger, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create log dir %q: %w", cfg.Dir, err)
	}
	buf := cfg.SubscriberBuffer
	if buf == 0 {
		buf = 256
	}
	return &Store{
		log:        logger.With("component", "logs"),
		dir:        cfg.Dir,
		db:         cfg.DB,
		hub:        newHub(buf),
		jobs:       map[jobKey]*jobState{},
		syncedRuns: map[string]struct{}{},
		write:      (*os.File).Write,
		syncFile:   fdatasync,
		syncDir:    durable.Sync,
	}, nil
}

// Stats returns the Store's counters.
func (s *Store) Stats() Stats {
	return Stats{
		BytesStored:       s.bytesStored.Load(),
		ChunksStored:      s.chunksStored.Load(),
		ChunksSkipped:     s.chunksSkipped.Load(),
		SubscribersLagged: s.hub.lagged.Load(),
	}
}

func (s *Store) jobDir(runID, jobID string) string {
	return filepath.Join(s.dir, runID, jobID)
}

func (s *Store) stepPath(k StepKey) string {
	return filepath.Join(s.dir, k.RunID, k.JobID, stepFileName(k.Step))
}

// Size returns the size in bytes of a step's log, which is also the cursor
// after its last line; 0 if the step has no log yet.
func (s *Store) Size(ctx context.Context, key StepKey) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := key.validate(); err != nil {
		return 0, err
	}
	if s.shared() {
		return s.db.LogSize(ctx, key.RunID, key.JobID, key.Step)
	}
	fi, err := os.Stat(s.stepPath(key))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("size of log %q: %w", key, err)
	}
	return fi.Size(), nil
}

// RemoveRun deletes every log of a run; a run without logs is no error. It
// is meant for retention of finished runs: a chunk appended to the run
// while or after it is removed starts a new log.
func (s *Store) RemoveRun(ctx context.Context, runID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkID("run id", runID); err != nil {
		return err
	}
	if s.shared() {
		return s.db.DeleteRunLogs(ctx, runID)
	}
	// Hold each known job of the run while its files go, so no append
	// interleaves with the removal, and forget their positions.
	s.mu.Lock()
	var held []*jobState
	for k, js := range s.jobs {
		if k.runID == runID {
			held = append(held, js)
		}
	}
	s.mu.Unlock()
	// One order for everyone, so two removals of the same run cannot
	// deadlock.
	slices.SortFunc(held, func(a, b *jobState) int { return strings.Compare(a.key.jobID, b.key.jobID) })
	for _, js := range held {
		js.mu.Lock()
	}
	s.mu.Lock()
	for _, js := range held {
		js.removed = true
		delete(s.jobs, js.key)
	}
	delete(s.syncedRuns, runID)
	s.mu.Unlock()
	err := os.RemoveAll(filepath.Join(s.dir, runID))
	// Once more: an append that recreated the directory meanwhile may have
	// marked it; forgetting costs a sync at most.
	s.mu.Lock()
	delete(s.syncedRuns, runID)
	s.mu.Unlock()
	for _, js := range held {
		js.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("remove logs of run %q: %w", runID, err)
	}
	return nil
}

// ForgetJob drops the in-memory position of a job, typically when the job
// has ended. A later Append for the job recovers it from the files again,
// so forgetting is always safe; it only frees memory.
func (s *Store) ForgetJob(runID, jobID string) {
	k := jobKey{runID: runID, jobID: jobID}
	s.mu.Lock()
	js := s.jobs[k]
	s.mu.Unlock()
	if js == nil {
		return
	}
	js.mu.Lock()
	defer js.mu.Unlock()
	s.mu.Lock()
	if s.jobs[k] == js {
		delete(s.jobs, k)
	}
	s.mu.Unlock()
	js.removed = true
}
