package logs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// maxRecordBytes bounds one stored line when the tail of a file is read
// back. A line holds at most the 128 KiB text limit of a chunk, which JSON
// escaping can grow six-fold.
const maxRecordBytes = 8 << 20

// jobKey identifies a job's directory.
type jobKey struct{ runID, jobID string }

// position orders the chunks of a job: by dispatch attempt, then by seq.
type position struct {
	attempt int
	seq     uint64
}

func (p position) after(q position) bool {
	if p.attempt != q.attempt {
		return p.attempt > q.attempt
	}
	return p.seq > q.seq
}

// jobState is what the Store remembers of one job. Its mutex serializes
// the job's appends, across all its steps.
type jobState struct {
	key jobKey

	mu sync.Mutex
	// loaded is set once last has been recovered from the files.
	loaded bool
	// last is the position of the last chunk stored (or skipped as empty).
	last position
	// dirReady is set once the job's directory exists and its entry (and
	// its run directory's) has been synced by this process.
	dirReady bool
	// entryUnsynced is set when a file was created in the job's directory
	// and the directory's sync failed: the next append syncs it, whether
	// or not it creates a file.
	entryUnsynced bool
	// removed is set when the state was dropped from the Store's map; a
	// goroutine that locked it meanwhile must fetch a fresh one.
	removed bool
}

// lockJob returns the job's state, locked.
func (s *Store) lockJob(k jobKey) *jobState {
	for {
		s.mu.Lock()
		js := s.jobs[k]
		if js == nil {
			js = &jobState{key: k}
			s.jobs[k] = js
		}
		s.mu.Unlock()
		js.mu.Lock()
		if !js.removed {
			return js
		}
		js.mu.Unlock()
	}
}

// Append stores one log.chunk's lines at the end of the step's log and
// publishes them to the run's subscribers. It reports whether the chunk was
// stored: a chunk whose (key.Attempt, seq) is not above the last one
// already stored for the job (in any of its steps) is a replay, and Append
// skips it and returns false with a nil error. seq must be at least 1.
//
// The chunk is written with a single write call and fsynced before Append
// returns true. If the write or the sync fails, the file is truncated back
// to its previous size, nothing is published, and the error (which names
// the file) wraps the cause, such as syscall.ENOSPC; the same chunk may be
// appended again later. A chunk without lines stores nothing but still
// advances the job's position in memory.
//
// ctx is checked before any work; the file operations themselves are not
// interrupted.
func (s *Store) Append(ctx context.Context, key StepKey, seq uint64, lines []Line) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := key.validate(); err != nil {
		return false, err
	}
	if seq == 0 {
		return false, fmt.Errorf("append log %s: seq must be at least 1", key)
	}
	pos := position{attempt: max(key.Attempt, 1), seq: seq}

	js := s.lockJob(jobKey{runID: key.RunID, jobID: key.JobID})
	defer js.mu.Unlock()
	if !js.loaded {
		last, err := s.recoverJob(js.key)
		if err != nil {
			return false, err
		}
		js.last, js.loaded = last, true
	}
	if !pos.after(js.last) {
		s.chunksSkipped.Add(1)
		return false, nil
	}
	if len(lines) == 0 {
		js.last = pos
		return true, nil
	}

	buf, err := encodeChunk(pos, lines)
	if err != nil {
		return false, fmt.Errorf("append log %s: %w", key, err)
	}
	from, err := s.writeChunk(js, key, buf)
	if err != nil {
		return false, err
	}
	js.last = pos
	s.bytesStored.Add(int64(len(buf)))
	s.chunksStored.Add(1)

	attempt := 0
	if pos.attempt > 1 {
		attempt = pos.attempt
	}
	s.hub.publish(Event{RunID: key.RunID, Kind: EventLog, Log: &LogEvent{
		JobID: key.JobID, Step: key.Step, Attempt: attempt, Seq: seq,
		Cursor: from, Next: from + int64(len(buf)), Lines: slices.Clone(lines),
	}})
	return true, nil
}

// encodeChunk renders the chunk's lines as stored records, each ending in
// a newline.
func encodeChunk(pos position, lines []Line) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(lines) * 96)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	rec := StoredLine{Seq: pos.seq}
	if pos.attempt > 1 {
		rec.Attempt = pos.attempt
	}
	for _, l := range lines {
		rec.TS, rec.Text = l.TS.UTC(), l.Text
		if err := enc.Encode(&rec); err != nil {
			return nil, fmt.Errorf("encode line: %w", err)
		}
	}
	return buf.Bytes(), nil
}

// writeChunk appends buf to the step's file with one write, syncs it, and
// returns the file's previous size. On failure it truncates the file back.
//
// The syncs come after every directory and file is created and the data
// written, so that a journaling file system commits them all at once: the
// file's data (fdatasync), then, for a new file, its directory, and, for the
// first chunk of the job in this process, the job directory's entry in the
// run directory and, for a run not synced yet, the run directory's entry in
// the root (see makeJobDirs and syncJobDirs).
func (s *Store) writeChunk(js *jobState, key StepKey, buf []byte) (int64, error) {
	path := s.stepPath(key)
	if !js.dirReady {
		if err := s.makeJobDirs(key.RunID, key.JobID); err != nil {
			return 0, fmt.Errorf("append log %q: %w", path, err)
		}
	}
	created := false
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
		created = true
	}
	if err != nil {
		return 0, fmt.Errorf("append log %q: %w", path, err)
	}
	defer f.Close() // after the sync, a close error cannot lose data

	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("append log %q: %w", path, err)
	}
	from := fi.Size()
	n, err := s.write(f, buf)
	if err == nil && n < len(buf) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = s.syncFile(f)
	}
	if err == nil && (created || js.entryUnsynced) {
		js.entryUnsynced = true // until the sync below returns
		if err = s.syncDir(filepath.Dir(path)); err == nil {
			js.entryUnsynced = false
		}
	}
	if err == nil && !js.dirReady {
		err = s.syncJobDirs(key.RunID)
	}
	if err != nil {
		if terr := f.Truncate(from); terr != nil {
			// The file may end in half a record: recover the job from its
			// files (which cuts it) before the next append.
			js.loaded = false
			err = errors.Join(err, fmt.Errorf("truncate back to %d bytes: %w", from, terr))
		}
		return 0, fmt.Errorf("append log %q: %w", path, err)
	}
	js.dirReady = true
	return from, nil
}

// Prepare creates a job's log directory (and its run's) and syncs their
// entries, so that the job's first chunk costs only the sync of its data and
// of its new file's entry. The orchestrator may call it when it dispatches
// the job, off the path of the agent's output; Append does the same itself
// for a job not prepared. Preparing a prepared job does nothing.
func (s *Store) Prepare(ctx context.Context, runID, jobID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkID("run id", runID); err != nil {
		return err
	}
	if err := checkID("job id", jobID); err != nil {
		return err
	}
	js := s.lockJob(jobKey{runID: runID, jobID: jobID})
	defer js.mu.Unlock()
	if js.dirReady {
		return nil
	}
	if err := s.makeJobDirs(runID, jobID); err != nil {
		return fmt.Errorf("prepare log directory of job %q: %w", jobID, err)
	}
	if err := s.syncJobDirs(runID); err != nil {
		return fmt.Errorf("prepare log directory of job %q: %w", jobID, err)
	}
	js.dirReady = true
	return nil
}

// makeJobDirs creates a job's directory and its run's, if missing, without
// syncing anything.
func (s *Store) makeJobDirs(runID, jobID string) error {
	runDir := filepath.Join(s.dir, runID)
	for _, d := range []string{runDir, filepath.Join(runDir, jobID)} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}

// syncJobDirs makes the entries of a job's directory durable: it syncs the
// run directory (which holds the job directory's entry) and, unless this
// Store already did since it last removed the run, the root (which holds
// the run directory's entry). It runs once per job in a process, even for
// directories that existed: an earlier process may have crashed between
// creating one and syncing its parent. A run is marked synced only after
// the root's sync returned, so another job of the run that skips it relies
// only on a sync that completed.
func (s *Store) syncJobDirs(runID string) error {
	if err := s.syncDir(filepath.Join(s.dir, runID)); err != nil {
		return err
	}
	s.mu.Lock()
	_, done := s.syncedRuns[runID]
	s.mu.Unlock()
	if done {
		return nil
	}
	if err := s.syncDir(s.dir); err != nil {
		return err
	}
	s.mu.Lock()
	if len(s.syncedRuns) >= maxSyncedRuns {
		// Forgetting only costs a root sync more for the runs forgotten.
		clear(s.syncedRuns)
	}
	s.syncedRuns[runID] = struct{}{}
	s.mu.Unlock()
	return nil
}

// maxSyncedRuns bounds the runs whose directory entry the Store remembers
// having synced.
const maxSyncedRuns = 4096

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %q: %w", dir, err)
	}
	return nil
}

// recoverJob returns the position of the last chunk stored for a job: the
// highest (attempt, seq) at the ends of the job's step files. A file that
// ends in half a record (a crash during a write) is cut back to its last
// whole line first.
func (s *Store) recoverJob(k jobKey) (position, error) {
	dir := s.jobDir(k.runID, k.jobID)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return position{}, nil
	}
	if err != nil {
		return position{}, fmt.Errorf("recover log position of job %q: %w", k.jobID, err)
	}
	var last position
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(name, "step-") || !strings.HasSuffix(name, ".log") {
			continue
		}
		p, err := s.recoverFile(filepath.Join(dir, name))
		if err != nil {
			return position{}, err
		}
		if p.after(last) {
			last = p
		}
	}
	return last, nil
}

// recoverFile returns the position of a step file's last record, cutting a
// partial record off its end.
func (s *Store) recoverFile(path string) (position, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return position{}, fmt.Errorf("recover log %q: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return position{}, fmt.Errorf("recover log %q: %w", path, err)
	}
	line, end, err := lastLine(f, fi.Size())
	if err != nil {
		return position{}, fmt.Errorf("recover log %q: %w", path, err)
	}
	if end < fi.Size() {
		if err := f.Truncate(end); err != nil {
			return position{}, fmt.Errorf("recover log %q: cut partial record: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			return position{}, fmt.Errorf("recover log %q: cut partial record: %w", path, err)
		}
		s.log.Warn("cut partial log record", "path", path, "size", fi.Size(), "new_size", end)
	}
	if line == nil {
		return position{}, nil
	}
	var rec struct {
		Seq     uint64 `json:"seq"`
		Attempt int    `json:"attempt"`
	}
	if err := json.Unmarshal(line, &rec); err != nil {
		return position{}, fmt.Errorf("recover log %q: last line at offset %d is not a log record: %w",
			path, end-int64(len(line))-1, err)
	}
	return position{attempt: max(rec.Attempt, 1), seq: rec.Seq}, nil
}

// lastLine returns the last whole line of a file of the given size
// (without its newline) and the offset just past that newline. With no
// whole line it returns nil and 0.
func lastLine(r io.ReaderAt, size int64) ([]byte, int64, error) {
	const block = 64 << 10
	var buf []byte // the file's bytes from off to the end of what was read
	off := size
	end := int64(-1)
	for off > 0 {
		n := min(int64(block), off)
		chunk := make([]byte, n, n+int64(len(buf)))
		if _, err := r.ReadAt(chunk, off-n); err != nil {
			return nil, 0, err
		}
		off -= n
		buf = append(chunk, buf...)
		if end < 0 {
			i := bytes.LastIndexByte(buf, '\n')
			if i < 0 {
				if int64(len(buf)) > maxRecordBytes {
					return nil, 0, fmt.Errorf("no line end in the last %d bytes", len(buf))
				}
				continue
			}
			end = off + int64(i) + 1
		}
		body := buf[:end-1-off]
		if i := bytes.LastIndexByte(body, '\n'); i >= 0 {
			return body[i+1:], end, nil
		}
		if int64(len(body)) > maxRecordBytes {
			return nil, 0, fmt.Errorf("last line is longer than %d bytes", maxRecordBytes)
		}
	}
	if end < 0 {
		return nil, 0, nil
	}
	return buf[:end-1], end, nil
}
