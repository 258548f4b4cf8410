package logs

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Read limits.
const (
	// DefaultReadLimit is the number of lines Read returns when asked for
	// zero or fewer.
	DefaultReadLimit = 1000
	// MaxReadLimit caps the lines of one Read.
	MaxReadLimit = 10000
	// maxReadBytes caps the bytes of one Read (at least one line is always
	// returned, whatever its size).
	maxReadBytes = 4 << 20
)

// Read returns up to limit whole lines of a step's log from a byte cursor,
// and the cursor just past the last line returned, from which the next Read
// continues. Start with cursor 0. A line still being written (not yet
// ending in a newline) is never returned. No lines and next == cursor mean
// there is nothing more yet; a step without a log reads as empty.
//
// limit ≤ 0 means DefaultReadLimit, and it is capped at MaxReadLimit; a
// Read also stops after about 4 MiB. A cursor that is negative, past the
// end of the log, or not at the start of a line gives an error wrapping
// ErrBadCursor.
func (s *Store) Read(ctx context.Context, key StepKey, cursor int64, limit int) ([]StoredLine, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, cursor, err
	}
	if err := key.validate(); err != nil {
		return nil, cursor, err
	}
	if cursor < 0 {
		return nil, cursor, fmt.Errorf("read log %s: %w: %d is negative", key, ErrBadCursor, cursor)
	}
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	limit = min(limit, MaxReadLimit)
	if s.shared() {
		return s.readShared(ctx, key, cursor, limit)
	}

	path := s.stepPath(key)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		if cursor == 0 {
			return nil, 0, nil
		}
		return nil, cursor, fmt.Errorf("read log %s: %w: %d is past the end (no log yet)", key, ErrBadCursor, cursor)
	}
	if err != nil {
		return nil, cursor, fmt.Errorf("read log %q: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, cursor, fmt.Errorf("read log %q: %w", path, err)
	}
	size := fi.Size()
	if cursor > size {
		return nil, cursor, fmt.Errorf("read log %s: %w: %d is past the end (%d bytes)", key, ErrBadCursor, cursor, size)
	}
	if cursor > 0 {
		var prev [1]byte
		if _, err := f.ReadAt(prev[:], cursor-1); err != nil {
			return nil, cursor, fmt.Errorf("read log %q: %w", path, err)
		}
		if prev[0] != '\n' {
			return nil, cursor, fmt.Errorf("read log %s: %w: %d is not at the start of a line", key, ErrBadCursor, cursor)
		}
	}

	// Read only up to the size seen now; what an append adds meanwhile is
	// for the next Read.
	r := bufio.NewReaderSize(io.NewSectionReader(f, cursor, size-cursor), 64<<10)
	var lines []StoredLine
	next, read := cursor, 0
	for len(lines) < limit {
		b, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			break // nothing more, or a line still being written
		}
		if err != nil {
			return nil, cursor, fmt.Errorf("read log %q: %w", path, err)
		}
		if read > 0 && read+len(b) > maxReadBytes {
			break
		}
		var l StoredLine
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, cursor, fmt.Errorf("read log %q: line at offset %d: %w", path, next, err)
		}
		lines = append(lines, l)
		next += int64(len(b))
		read += len(b)
	}
	return lines, next, nil
}
