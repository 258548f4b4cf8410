package logs

import (
	"bytes"
	"cmp"
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
	res := s.AppendAll(ctx, []Chunk{{Key: key, Seq: seq, Lines: lines}})
	return res[0].Stored, res[0].Err
}

// Chunk is one log.chunk for AppendAll.
type Chunk struct {
	Key   StepKey
	Seq   uint64
	Lines []Line
}

// Appended is what became of one chunk of AppendAll, as Append reports it.
type Appended struct {
	Stored bool
	Err    error
}

// AppendAll stores several chunks, in order, as Append stores each, but it
// writes them all before it syncs anything: every file written is synced
// once, and every directory that got a new file once, after the last
// write, so that the file system commits them together (the chunks of
// different jobs are synced in parallel). The chunks are published once
// all are durable.
//
// A failure is confined to its job: every chunk of that job in the call
// gets the error, its files are truncated back to their sizes before the
// call and its position is restored, so the agent's replay of any of them
// is stored again; the chunks of the other jobs are unaffected.
func (s *Store) AppendAll(ctx context.Context, chunks []Chunk) []Appended {
	return s.WriteAll(ctx, chunks).Sync()
}

// WriteAll is the first half of AppendAll: it writes the chunks and
// returns before any sync. Their lines can be read once it returns (a
// failed sync takes them back); Sync makes them durable, publishes them and
// reports the outcome. Until Sync returns, the chunks' jobs stay locked:
// the caller must call Sync, once, soon.
func (s *Store) WriteAll(ctx context.Context, chunks []Chunk) *PendingAppend {
	p := &PendingAppend{
		ctx:    ctx,
		b:      &appendBatch{s: s, jobs: map[jobKey]*batchJob{}},
		chunks: chunks,
		out:    make([]Appended, len(chunks)),
		jobOf:  make([]*batchJob, len(chunks)),
	}
	if err := ctx.Err(); err != nil {
		for i := range p.out {
			p.out[i].Err = err
		}
		return p
	}
	for i, c := range chunks {
		switch err := c.Key.validate(); {
		case err != nil:
			p.out[i].Err = err
		case c.Seq == 0:
			p.out[i].Err = fmt.Errorf("append log %s: seq must be at least 1", c.Key)
		default:
			p.jobOf[i] = p.b.job(jobKey{runID: c.Key.RunID, jobID: c.Key.JobID})
		}
	}
	if s.shared() {
		// Stored now, in one transaction, so the lines can be read once
		// WriteAll returns, as from files; Sync publishes them.
		p.writeShared()
		return p
	}
	p.b.lock()
	for i, c := range chunks {
		if bj := p.jobOf[i]; bj != nil && bj.err == nil {
			p.out[i].Stored = p.b.write(bj, i, c)
		}
	}
	return p
}

// PendingAppend is a WriteAll waiting for its Sync.
type PendingAppend struct {
	ctx    context.Context // for a shared Store's transaction
	shared []Event         // a shared Store's events, published by Sync
	b      *appendBatch
	chunks []Chunk
	out    []Appended
	jobOf  []*batchJob // by chunk; nil for a chunk refused before any write
}

// Sync makes the chunks of WriteAll durable, publishes those stored, and
// returns what became of each, as AppendAll does.
func (p *PendingAppend) Sync() []Appended {
	if p.b.s.shared() {
		p.publishShared()
		return p.out
	}
	b := p.b
	defer b.close()
	b.sync()
	for i, c := range p.chunks {
		bj := p.jobOf[i]
		if bj == nil {
			continue
		}
		if bj.err != nil {
			p.out[i] = Appended{Err: bj.err}
			continue
		}
		if ev := bj.events[i]; ev != nil {
			b.s.hub.publish(Event{RunID: c.Key.RunID, Kind: EventLog, Log: ev})
		}
	}
	return p.out
}

// appendBatch is the state of one AppendAll.
type appendBatch struct {
	s     *Store
	jobs  map[jobKey]*batchJob
	order []*batchJob // in the order of their keys: the order of locking
}

// batchJob is one job's part of an AppendAll.
type batchJob struct {
	js     *jobState
	prev   position // js.last before the call, restored on a failure
	files  []*batchFile
	events map[int]*LogEvent // by chunk index: what to publish
	err    error             // set on the first failure; the job's chunks all fail
}

// batchFile is a step file written by an AppendAll.
type batchFile struct {
	path    string
	f       *os.File
	from    int64 // its size before the call
	size    int64 // its size after the writes so far
	created bool
}

func (b *appendBatch) job(k jobKey) *batchJob {
	bj := b.jobs[k]
	if bj == nil {
		bj = &batchJob{js: &jobState{key: k}, events: map[int]*LogEvent{}}
		b.jobs[k] = bj
		b.order = append(b.order, bj)
	}
	return bj
}

// lock takes the state of every job of the batch, in the order of their
// keys (so that two batches cannot wait on each other), and recovers the
// position of a job this Store has not seen yet.
func (b *appendBatch) lock() {
	slices.SortFunc(b.order, func(x, y *batchJob) int {
		return cmp.Or(strings.Compare(x.js.key.runID, y.js.key.runID), strings.Compare(x.js.key.jobID, y.js.key.jobID))
	})
	for _, bj := range b.order {
		bj.js = b.s.lockJob(bj.js.key)
		if !bj.js.loaded {
			last, err := b.s.recoverJob(bj.js.key)
			if err != nil {
				bj.err = err
				continue
			}
			bj.js.last, bj.js.loaded = last, true
		}
		bj.prev = bj.js.last
	}
}

// write writes chunk i, c, of the batch's job bj, without syncing; it
// reports whether the chunk counts as stored (false: a replay), provided
// the batch's syncs succeed.
func (b *appendBatch) write(bj *batchJob, i int, c Chunk) bool {
	s := b.s
	pos := position{attempt: max(c.Key.Attempt, 1), seq: c.Seq}
	if !pos.after(bj.js.last) {
		s.chunksSkipped.Add(1)
		return false
	}
	if len(c.Lines) == 0 {
		bj.js.last = pos
		return true
	}
	buf, err := encodeChunk(pos, c.Lines)
	if err != nil {
		bj.fail(fmt.Errorf("append log %s: %w", c.Key, err))
		return false
	}
	f, err := b.file(bj, c.Key)
	if err != nil {
		bj.fail(err)
		return false
	}
	n, err := s.write(f.f, buf)
	if err == nil && n < len(buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		bj.fail(fmt.Errorf("append log %q: %w", f.path, err))
		return false
	}
	attempt := 0
	if pos.attempt > 1 {
		attempt = pos.attempt
	}
	bj.events[i] = &LogEvent{
		JobID: c.Key.JobID, Step: c.Key.Step, Attempt: attempt, Seq: c.Seq,
		Cursor: f.size, Next: f.size + int64(len(buf)), Lines: slices.Clone(c.Lines),
	}
	f.size += int64(len(buf))
	bj.js.last = pos
	return true
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

// file returns the batch's open step file of key, opening (or creating)
// it on first use, and the job's directories first if they are not ready.
func (b *appendBatch) file(bj *batchJob, key StepKey) (*batchFile, error) {
	path := b.s.stepPath(key)
	for _, f := range bj.files {
		if f.path == path {
			return f, nil
		}
	}
	if !bj.js.dirReady {
		if err := b.s.makeJobDirs(key.RunID, key.JobID); err != nil {
			return nil, fmt.Errorf("append log %q: %w", path, err)
		}
	}
	created := false
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
		created = true
	}
	if err != nil {
		return nil, fmt.Errorf("append log %q: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("append log %q: %w", path, err)
	}
	bf := &batchFile{path: path, f: f, from: fi.Size(), size: fi.Size(), created: created}
	if created {
		bj.js.entryUnsynced = true // until the directory's sync returns
	}
	bj.files = append(bj.files, bf)
	return bf, nil
}

// fail records the job's first failure.
func (bj *batchJob) fail(err error) {
	if bj.err == nil {
		bj.err = err
	}
}

// sync makes every job's writes durable, the jobs in parallel: see
// syncJob. A job whose sync fails is rolled back.
func (b *appendBatch) sync() {
	var todo []*batchJob
	for _, bj := range b.order {
		if bj.err == nil && len(bj.files) > 0 {
			todo = append(todo, bj)
		}
	}
	if len(todo) == 1 {
		b.syncJob(todo[0])
	} else {
		var wg sync.WaitGroup
		for _, bj := range todo {
			wg.Go(func() { b.syncJob(bj) })
		}
		wg.Wait()
	}
	// Then, once per run, the entries of the jobs' directories in it (and
	// of the run's in the root) for the jobs this process has not written
	// yet.
	runs := map[string][]*batchJob{}
	var runOrder []string
	for _, bj := range todo {
		if bj.err == nil && !bj.js.dirReady {
			r := bj.js.key.runID
			if runs[r] == nil {
				runOrder = append(runOrder, r)
			}
			runs[r] = append(runs[r], bj)
		}
	}
	for _, r := range runOrder {
		err := b.s.syncJobDirs(r)
		for _, bj := range runs[r] {
			if err != nil {
				bj.fail(fmt.Errorf("append log %q: %w", bj.files[0].path, err))
				continue
			}
			bj.js.dirReady = true
		}
	}
	for _, bj := range b.order {
		if bj.err != nil {
			b.rollback(bj)
		}
	}
}

// syncJob syncs a job's written files (fdatasync), then, once, its
// directory if a file was created in it; sync then syncs, for the first
// chunk of a job in this process, the job directory's entry in the run
// directory and, for a run not synced yet, the run directory's entry in
// the root (see makeJobDirs and syncJobDirs), once per run. The syncs come
// after every directory and file is created and all data written, so that
// a journaling file system commits them at once.
func (b *appendBatch) syncJob(bj *batchJob) {
	s := b.s
	for _, f := range bj.files {
		if err := s.syncFile(f.f); err != nil {
			bj.fail(fmt.Errorf("append log %q: %w", f.path, err))
			return
		}
	}
	if bj.js.entryUnsynced {
		dir := s.jobDir(bj.js.key.runID, bj.js.key.jobID)
		if err := s.syncDir(dir); err != nil {
			bj.fail(fmt.Errorf("append log %q: %w", bj.files[0].path, err))
			return
		}
		bj.js.entryUnsynced = false
	}
}

// rollback undoes a failed job's part of the batch: its files are cut back
// to their sizes before the call and its position restored. A file that
// cannot be cut may end in half a record: the job is recovered from its
// files (which cuts it) before its next append.
func (b *appendBatch) rollback(bj *batchJob) {
	for _, f := range bj.files {
		if err := f.f.Truncate(f.from); err != nil {
			bj.js.loaded = false
			bj.err = errors.Join(bj.err, fmt.Errorf("truncate %q back to %d bytes: %w", f.path, f.from, err))
		}
	}
	bj.js.last = bj.prev
	clear(bj.events)
}

// close closes the batch's files (after their syncs, a close error cannot
// lose data), counts what was stored and unlocks the jobs.
func (b *appendBatch) close() {
	for _, bj := range b.order {
		for _, f := range bj.files {
			f.f.Close()
		}
		if bj.err == nil {
			for _, ev := range bj.events {
				b.s.chunksStored.Add(1)
				b.s.bytesStored.Add(ev.Next - ev.Cursor)
			}
		}
		bj.js.mu.Unlock()
	}
}

// Prepare creates a job's log directory (and its run's) and the file of
// its job-level output (SetupStep, which the agent writes before any step:
// the checkout's notes), and syncs their entries, so that the job's first
// output costs only the sync of its data. The orchestrator may call it when
// it dispatches the job, off the path of the agent's output; Append creates
// and syncs the same itself for a job not prepared (an empty file reads as
// no output, like a missing one). A step's file is made by its first
// output: made ahead, a silent step's would cost an inode for nothing.
// Preparing a prepared job does nothing.
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
	if s.shared() {
		return nil // nothing to make ahead
	}
	js := s.lockJob(jobKey{runID: runID, jobID: jobID})
	defer js.mu.Unlock()
	if js.dirReady {
		return nil
	}
	if err := s.makeJobDirs(runID, jobID); err != nil {
		return fmt.Errorf("prepare log directory of job %q: %w", jobID, err)
	}
	setup := s.stepPath(StepKey{RunID: runID, JobID: jobID, Step: SetupStep})
	f, err := os.OpenFile(setup, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		js.entryUnsynced = true
		err = f.Close()
	case errors.Is(err, fs.ErrExist):
		err = nil
	}
	if err != nil {
		return fmt.Errorf("prepare log of job %q: %w", jobID, err)
	}
	if js.entryUnsynced {
		if err := s.syncDir(s.jobDir(runID, jobID)); err != nil {
			return fmt.Errorf("prepare log directory of job %q: %w", jobID, err)
		}
		js.entryUnsynced = false
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
