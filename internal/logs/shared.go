package logs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/kici-dev/kici/internal/store"
)

// ChunkDB is the database a shared Store keeps its logs in (a *store.DB).
type ChunkDB interface {
	AppendLogChunks(ctx context.Context, chunks []store.LogChunkWrite) ([]store.LogChunkStored, error)
	ReadLogChunks(ctx context.Context, runID, jobID string, step int, from int64, limit int) ([]store.LogChunk, error)
	LogSize(ctx context.Context, runID, jobID string, step int) (int64, error)
	DeleteRunLogs(ctx context.Context, runID string) error
}

// readChunkBatch is how many chunks a shared Read fetches at a time.
const readChunkBatch = 64

// shared reports whether the Store keeps its logs in the database.
func (s *Store) shared() bool { return s.db != nil }

// OnLog registers fn to be called with every log event this Store
// publishes for a chunk it stored (not for those published with
// PublishStored): the orchestrator relays them to the other coordinators.
// Call it before the first Append.
func (s *Store) OnLog(fn func(Event)) { s.onLog = fn }

// writeShared stores the chunks of a WriteAll in the database, in one
// transaction, and keeps the events of those stored for publishShared.
func (p *PendingAppend) writeShared() {
	s := p.b.s
	var writes []store.LogChunkWrite
	var index []int // chunk index of each write
	for i, c := range p.chunks {
		if p.out[i].Err != nil {
			continue
		}
		pos := position{attempt: max(c.Key.Attempt, 1), seq: c.Seq}
		var body []byte
		if len(c.Lines) > 0 {
			var err error
			if body, err = encodeChunk(pos, c.Lines); err != nil {
				p.out[i].Err = fmt.Errorf("append log %s: %w", c.Key, err)
				continue
			}
		}
		writes = append(writes, store.LogChunkWrite{RunID: c.Key.RunID, JobID: c.Key.JobID, Step: c.Key.Step,
			Attempt: pos.attempt, Seq: c.Seq, Body: body})
		index = append(index, i)
	}
	if len(writes) == 0 {
		return
	}
	stored, err := s.db.AppendLogChunks(p.ctx, writes)
	if err != nil {
		for _, i := range index {
			p.out[i] = Appended{Err: fmt.Errorf("append log %s: %w", p.chunks[i].Key, err)}
		}
		return
	}
	for w, i := range index {
		st, c := stored[w], p.chunks[i]
		p.out[i].Stored = st.Stored
		if !st.Stored {
			s.chunksSkipped.Add(1)
			continue
		}
		if len(c.Lines) == 0 {
			continue
		}
		s.chunksStored.Add(1)
		s.bytesStored.Add(st.End - st.Start)
		attempt := 0
		if writes[w].Attempt > 1 {
			attempt = writes[w].Attempt
		}
		p.shared = append(p.shared, Event{RunID: c.Key.RunID, Kind: EventLog, Log: &LogEvent{JobID: c.Key.JobID, Step: c.Key.Step,
			Attempt: attempt, Seq: c.Seq, Cursor: st.Start, Next: st.End, Lines: slices.Clone(c.Lines)}})
	}
}

// publishShared publishes the events writeShared kept.
func (p *PendingAppend) publishShared() {
	s := p.b.s
	for _, ev := range p.shared {
		s.hub.publish(ev)
		if s.onLog != nil {
			s.onLog(ev)
		}
	}
}

// readShared is Read from the database.
func (s *Store) readShared(ctx context.Context, key StepKey, cursor int64, limit int) ([]StoredLine, int64, error) {
	var lines []StoredLine
	next, read := cursor, 0
	first := true
	for len(lines) < limit {
		chunks, err := s.db.ReadLogChunks(ctx, key.RunID, key.JobID, key.Step, next, readChunkBatch)
		if err != nil {
			return nil, cursor, fmt.Errorf("read log %s: %w", key, err)
		}
		if len(chunks) == 0 {
			if first {
				size, err := s.db.LogSize(ctx, key.RunID, key.JobID, key.Step)
				if err != nil {
					return nil, cursor, fmt.Errorf("read log %s: %w", key, err)
				}
				if cursor > size {
					return nil, cursor, fmt.Errorf("read log %s: %w: %d is past the end (%d bytes)", key, ErrBadCursor, cursor, size)
				}
			}
			break
		}
		for _, c := range chunks {
			if next < c.Start || next >= c.End {
				return nil, cursor, fmt.Errorf("read log %s: chunk at [%d, %d) does not hold offset %d: the stored log has a hole", key, c.Start, c.End, next)
			}
			body := c.Body[next-c.Start:]
			if first && next > c.Start && c.Body[next-c.Start-1] != '\n' {
				return nil, cursor, fmt.Errorf("read log %s: %w: %d is not at the start of a line", key, ErrBadCursor, cursor)
			}
			first = false
			for len(body) > 0 && len(lines) < limit {
				n := bytes.IndexByte(body, '\n') + 1
				if n == 0 {
					return nil, cursor, fmt.Errorf("read log %s: chunk at [%d, %d) ends inside a line", key, c.Start, c.End)
				}
				if read > 0 && read+n > maxReadBytes {
					return lines, next, nil
				}
				var l StoredLine
				if err := json.Unmarshal(body[:n], &l); err != nil {
					return nil, cursor, fmt.Errorf("read log %s: line at offset %d: %w", key, next, err)
				}
				lines = append(lines, l)
				next += int64(n)
				read += n
				body = body[n:]
			}
			if len(lines) >= limit {
				break
			}
		}
		if len(chunks) < readChunkBatch {
			break
		}
	}
	return lines, next, nil
}

// PublishStored publishes to this Store's subscribers the chunk of a
// step's log stored at byte offsets [cursor, next) by another coordinator
// (which published it to its own subscribers), read from the database.
// Only a shared Store can.
func (s *Store) PublishStored(ctx context.Context, key StepKey, seq uint64, cursor, next int64) error {
	if !s.shared() {
		return fmt.Errorf("publish stored log %s: the log store is not shared", key)
	}
	if err := key.validate(); err != nil {
		return err
	}
	chunks, err := s.db.ReadLogChunks(ctx, key.RunID, key.JobID, key.Step, cursor, 1)
	if err != nil {
		return fmt.Errorf("publish stored log %s: %w", key, err)
	}
	if len(chunks) != 1 || chunks[0].Start != cursor || chunks[0].End != next {
		return fmt.Errorf("publish stored log %s: no stored chunk at [%d, %d)", key, cursor, next)
	}
	var out []Line
	for body := chunks[0].Body; len(body) > 0; {
		n := bytes.IndexByte(body, '\n') + 1
		if n == 0 {
			return fmt.Errorf("publish stored log %s: chunk at [%d, %d) ends inside a line", key, cursor, next)
		}
		var l StoredLine
		if err := json.Unmarshal(body[:n], &l); err != nil {
			return fmt.Errorf("publish stored log %s: %w", key, err)
		}
		out = append(out, Line{TS: l.TS, Text: l.Text})
		body = body[n:]
	}
	attempt := 0
	if key.Attempt > 1 {
		attempt = key.Attempt
	}
	s.hub.publish(Event{RunID: key.RunID, Kind: EventLog, Log: &LogEvent{JobID: key.JobID, Step: key.Step, Attempt: attempt,
		Seq: seq, Cursor: cursor, Next: next, Lines: out}})
	return nil
}
