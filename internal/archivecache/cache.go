// Package archivecache keeps source archives (tar.gz of a repository at a
// commit) as files on disk, so that the many agents of one run that ask for
// the same commit get a copy of one archive instead of each one making git
// (or the GitHub API) produce it again.
//
// An archive is keyed by (source name, commit sha). A commit's tree never
// changes, so an entry never goes stale; entries only leave the cache when
// it is full and they are the least recently used.
package archivecache

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/durable"
)

// DefaultProduceTimeout is the ProduceTimeout a new Cache starts with.
const DefaultProduceTimeout = 10 * time.Minute

var (
	// entryRe matches the file names of cache entries:
	// <16 hex of sha256(source)>-<sha>.tar.gz.
	entryRe = regexp.MustCompile(`^[0-9a-f]{16}-(?:[0-9a-f]{40}|[0-9a-f]{64})\.tar\.gz$`)
	// tmpRe matches the temporary files this package writes archives into
	// (os.CreateTemp with the pattern <entry name>.*.tmp). Only these are
	// removed by New, so other files in the directory are never touched.
	tmpRe = regexp.MustCompile(`^[0-9a-f]{16}-(?:[0-9a-f]{40}|[0-9a-f]{64})\.tar\.gz\.[0-9A-Za-z]+\.tmp$`)
	// shaRe matches a full SHA-1 or SHA-256 commit id in lowercase hex.
	shaRe = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)
)

// Cache keeps the most recently used archives as files in a directory.
//
// A Cache is safe for concurrent use. Its directory must belong to one
// Cache at a time: New removes leftover temporary files, which would break
// another Cache writing into the same directory.
type Cache struct {
	// ProduceTimeout bounds how long one produce call may run. produce runs
	// detached from the cancellation of the request that started it (other
	// requests may be waiting for the same archive), so this is what stops a
	// hung git process or download from holding the entry forever. New sets
	// it to DefaultProduceTimeout; zero or less also means the default.
	// Change it only before the first call to Serve.
	ProduceTimeout time.Duration

	dir        string
	maxEntries int
	logger     *slog.Logger

	mu sync.Mutex
	// lru holds entry file names, most recently used at the front.
	lru *list.List
	// index maps an entry file name to its element in lru.
	index map[string]*list.Element
	// flights holds the archives being produced right now, by entry file
	// name, so that concurrent requests for one archive share one produce.
	flights map[string]*flight

	// onWait, if set (by tests), is called each time a Serve or Bytes call starts
	// waiting for a flight, after it has been counted as a waiter.
	onWait func()
}

// flight is one produce call (or one late discovery that the entry already
// exists) shared by every Serve call that missed the same entry.
//
// The fields other than done and refs are written under Cache.mu before done
// is closed and are read-only afterwards.
type flight struct {
	done chan struct{}
	err  error
	// produced is false when the flight found the entry already on disk and
	// so did not call produce.
	produced bool
	// file is an open descriptor of the finished archive. Waiters read it
	// with ReadAt (through an io.SectionReader) rather than opening the entry
	// by name, because the entry may be evicted before they get to it; an
	// unlinked file stays readable through a descriptor that is already open.
	file *os.File
	size int64
	// refs counts the goroutines that may still read file: one per waiting
	// Serve call, plus one for the goroutine that fills the flight. The last
	// one to let go closes file. Guarded by Cache.mu.
	refs int
}

// New returns a cache in dir (created with 0o700 if missing) that keeps at
// most maxEntries archives.
//
// maxEntries < 1 is an error. Entries already in dir (from an earlier run)
// are kept, ordered by their modification time, which Serve updates on every
// hit; if there are more than maxEntries of them, the least recently used
// are deleted right away, so the bound holds across restarts. Files in dir
// that are not cache entries are left alone; leftover temporary files from a
// crash ("*.tmp" created by this package) are removed. A nil logger discards
// log output.
func New(dir string, maxEntries int, logger *slog.Logger) (*Cache, error) {
	if maxEntries < 1 {
		return nil, fmt.Errorf("archivecache: maxEntries must be at least 1, got %d", maxEntries)
	}
	if dir == "" {
		return nil, errors.New("archivecache: empty directory")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("archivecache: creating directory: %w", err)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("archivecache: reading directory: %w", err)
	}

	type existing struct {
		name  string
		mtime time.Time
	}
	var found []existing
	for _, de := range des {
		name := de.Name()
		if !de.Type().IsRegular() {
			continue
		}
		switch {
		case tmpRe.MatchString(name):
			// A temporary file is only ever the unfinished archive of a
			// produce call that a crash interrupted; nothing can use it.
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				logger.Warn("archive cache: removing leftover temporary file failed", "file", name, "err", err)
			} else {
				logger.Debug("archive cache: removed leftover temporary file", "file", name)
			}
		case entryRe.MatchString(name):
			info, err := de.Info()
			if err != nil {
				continue // Removed since ReadDir; nothing to index.
			}
			found = append(found, existing{name: name, mtime: info.ModTime()})
		}
	}
	// Oldest first, so that pushing each to the front leaves the most
	// recently used at the front.
	sort.Slice(found, func(i, j int) bool {
		if !found[i].mtime.Equal(found[j].mtime) {
			return found[i].mtime.Before(found[j].mtime)
		}
		return found[i].name < found[j].name
	})

	c := &Cache{
		ProduceTimeout: DefaultProduceTimeout,
		dir:            dir,
		maxEntries:     maxEntries,
		logger:         logger,
		lru:            list.New(),
		index:          make(map[string]*list.Element, len(found)),
		flights:        make(map[string]*flight),
	}
	for _, e := range found {
		c.index[e.name] = c.lru.PushFront(e.name)
	}
	c.mu.Lock()
	c.evictLocked()
	c.mu.Unlock()
	return c, nil
}

// Serve writes the archive of (source, sha) to w and reports whether it came
// from the cache without anyone producing it (hit).
//
// On a miss it calls produce once to write the archive into a temporary file
// in the cache directory, and only a complete archive (produce returned nil)
// becomes an entry: the file is fsynced, renamed into place and the
// directory fsynced, so a crash can never leave a truncated archive under an
// entry's name. produce must not close the writer it is given. The writer is
// an *os.File, so produce may hand it to a child process (exec.Cmd.Stdout)
// without a copying goroutine.
//
// Concurrent Serve calls for the same key share one produce call: the others
// wait and then read the same file. If produce fails (or panics), every
// waiter gets an error wrapping its error and no entry is created, so the
// next Serve tries again.
//
// produce runs with a context detached from the first caller's cancellation
// (context.WithoutCancel) but bounded by ProduceTimeout, so one client hanging
// up does not fail the others; the archive is still cached when every waiter
// has gone. A caller whose own ctx ends while waiting returns ctx's error.
//
// After an entry is added, the least recently used entries beyond maxEntries
// are deleted. A reader that already opened an entry keeps reading it even if
// it is deleted meanwhile; an entry that vanished before it could be opened
// is produced again.
//
// Errors from writing to w are returned as is (the client went away); they
// never delete the entry.
func (c *Cache) Serve(ctx context.Context, source, sha string, w io.Writer, produce func(ctx context.Context, w io.Writer) error) (hit bool, err error) {
	r, hit, release, err := c.acquire(ctx, source, sha, produce)
	if err != nil {
		return false, err
	}
	defer release()
	_, err = io.Copy(w, r)
	return hit, err
}

// Bytes returns the archive of (source, sha) in memory if it is at most max
// bytes; ok is false, with a nil error, if it is larger. It finds or
// produces the archive exactly as Serve does (one produce call shared by
// every concurrent Serve and Bytes call for the key, the archive cached
// whatever its size), and like Serve it returns ctx's error when ctx ends
// while it waits, without stopping the produce call. An archive over max is
// never read.
func (c *Cache) Bytes(ctx context.Context, source, sha string, max int64, produce func(ctx context.Context, w io.Writer) error) (data []byte, ok bool, err error) {
	r, _, release, err := c.acquire(ctx, source, sha, produce)
	if err != nil {
		return nil, false, err
	}
	defer release()
	if r.Size() > max {
		return nil, false, nil
	}
	data = make([]byte, r.Size())
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, false, fmt.Errorf("archivecache: reading archive of %s at %s: %w", source, sha, err)
	}
	return data, true, nil
}

// acquire returns a reader of the whole archive of (source, sha), producing
// it on a miss (see Serve), whether it was a hit, and a function to call
// once done reading.
func (c *Cache) acquire(ctx context.Context, source, sha string, produce func(ctx context.Context, w io.Writer) error) (r *io.SectionReader, hit bool, release func(), err error) {
	if err := validate(source, sha); err != nil {
		return nil, false, nil, err
	}
	if produce == nil {
		return nil, false, nil, errors.New("archivecache: nil produce function")
	}
	name := entryName(source, sha)
	path := filepath.Join(c.dir, name)

	// Open first and read from the descriptor: if the entry is evicted
	// while we read, the unlinked file stays readable.
	f, err := os.Open(path)
	if err == nil {
		info, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, false, nil, fmt.Errorf("archivecache: reading entry for %s at %s: %w", source, sha, err)
		}
		c.touch(name, path)
		return io.NewSectionReader(f, 0, info.Size()), true, func() { f.Close() }, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil, fmt.Errorf("archivecache: opening entry for %s at %s: %w", source, sha, err)
	}

	// Miss. Do not start work for a caller who has already gone.
	if err := ctx.Err(); err != nil {
		return nil, false, nil, err
	}
	fl := c.join(ctx, name, path, source, sha, produce)
	select {
	case <-fl.done:
	case <-ctx.Done():
		c.release(fl)
		return nil, false, nil, ctx.Err()
	}
	if fl.err != nil {
		c.release(fl)
		return nil, false, nil, fl.err
	}
	return io.NewSectionReader(fl.file, 0, fl.size), !fl.produced, func() { c.release(fl) }, nil
}

// join returns the flight for name, starting one if there is none, and
// counts the caller as one of its readers (to be undone with release).
func (c *Cache) join(ctx context.Context, name, path, source, sha string, produce func(context.Context, io.Writer) error) *flight {
	c.mu.Lock()
	fl, ok := c.flights[name]
	if !ok {
		// The fill goroutine holds a reference of its own, so the file
		// stays open until it has handed the result over, even if every
		// waiter has already gone.
		fl = &flight{done: make(chan struct{}), refs: 1}
		c.flights[name] = fl
		// Filling runs in its own goroutine so that the caller that
		// started it can stop waiting when its ctx ends, like any other
		// waiter, without failing the others.
		go c.fill(ctx, fl, name, path, source, sha, produce)
	}
	fl.refs++
	hook := c.onWait
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
	return fl
}

// release drops one reference to fl's file, closing it on the last one.
func (c *Cache) release(fl *flight) {
	c.mu.Lock()
	fl.refs--
	var f *os.File
	if fl.refs == 0 {
		f = fl.file
	}
	c.mu.Unlock()
	if f != nil {
		f.Close()
	}
}

// fill completes fl: it reuses the entry if it appeared since the caller
// looked (an earlier flight may have just finished), or produces it.
func (c *Cache) fill(ctx context.Context, fl *flight, name, path, source, sha string, produce func(context.Context, io.Writer) error) {
	var (
		file     *os.File
		size     int64
		produced bool
		err      error
	)
	if f, openErr := os.Open(path); openErr == nil {
		file = f
		if info, statErr := f.Stat(); statErr != nil {
			f.Close()
			file, err = nil, fmt.Errorf("archivecache: reading entry for %s at %s: %w", source, sha, statErr)
		} else {
			size = info.Size()
			c.touch(name, path)
		}
	} else {
		produced = true
		c.logger.Debug("archive cache miss", "source", source, "sha", sha)
		timeout := c.ProduceTimeout
		if timeout <= 0 {
			timeout = DefaultProduceTimeout
		}
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		file, size, err = c.create(pctx, name, path, source, sha, produce)
		cancel()
	}

	c.mu.Lock()
	fl.file, fl.size, fl.produced, fl.err = file, size, produced, err
	delete(c.flights, name)
	c.mu.Unlock()
	close(fl.done)
	c.release(fl)
}

// create runs produce into a temporary file and, if it succeeds, makes that
// file the entry name. It returns the still-open file, positioned anywhere,
// for the waiters to read with ReadAt.
func (c *Cache) create(ctx context.Context, name, path, source, sha string, produce func(context.Context, io.Writer) error) (*os.File, int64, error) {
	start := time.Now()
	tmp, err := os.CreateTemp(c.dir, name+".*.tmp")
	if err != nil {
		return nil, 0, fmt.Errorf("archivecache: creating temporary file: %w", err)
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		tmp.Close()
		if err := os.Remove(tmp.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.logger.Warn("archive cache: removing temporary file failed", "file", tmp.Name(), "err", err)
		}
	}()

	if err := callProduce(ctx, produce, tmp); err != nil {
		return nil, 0, fmt.Errorf("archivecache: producing archive of %s at %s: %w", source, sha, err)
	}
	info, err := tmp.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("archivecache: archive of %s at %s: %w", source, sha, err)
	}
	// The data must be on disk before the name is: otherwise a crash could
	// leave a truncated archive under the entry's name.
	if err := tmp.Sync(); err != nil {
		return nil, 0, fmt.Errorf("archivecache: syncing archive of %s at %s: %w", source, sha, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, 0, fmt.Errorf("archivecache: storing archive of %s at %s: %w", source, sha, err)
	}
	committed = true
	// Without this the rename may be lost in a crash. The entry is complete
	// and correct either way, so a failure here is only worth a warning.
	if err := durable.Sync(c.dir); err != nil {
		c.logger.Warn("archive cache: syncing directory failed", "dir", c.dir, "err", err)
	}
	c.logger.Debug("archive cached", "source", source, "sha", sha, "bytes", info.Size(), "duration", time.Since(start))

	c.mu.Lock()
	if el, ok := c.index[name]; ok {
		c.lru.MoveToFront(el)
	} else {
		c.index[name] = c.lru.PushFront(name)
	}
	c.evictLocked()
	c.mu.Unlock()
	return tmp, info.Size(), nil
}

// callProduce calls produce, turning a panic into an error: produce runs in a
// goroutine of this package, where a panic would otherwise end the process.
func callProduce(ctx context.Context, produce func(context.Context, io.Writer) error, w io.Writer) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("produce panicked: %v", r)
		}
	}()
	return produce(ctx, w)
}

// evictLocked deletes the least recently used entries beyond maxEntries.
// The files are removed while c.mu is held so that the index and the
// directory agree for anyone who takes the lock. c.mu must be held.
func (c *Cache) evictLocked() {
	for c.lru.Len() > c.maxEntries {
		el := c.lru.Back()
		name := el.Value.(string)
		c.lru.Remove(el)
		delete(c.index, name)
		err := os.Remove(filepath.Join(c.dir, name))
		switch {
		case err == nil, errors.Is(err, fs.ErrNotExist):
			c.logger.Debug("archive cache eviction", "file", name)
		default:
			c.logger.Warn("archive cache eviction failed", "file", name, "err", err)
		}
	}
}

// touch marks the entry name as just used: in memory for eviction, and as
// the file's modification time so that New restores the order after a
// restart. An entry that is not (or no longer) indexed is left alone: either
// its producer is about to index it, or it has just been evicted.
func (c *Cache) touch(name, path string) {
	c.mu.Lock()
	el, ok := c.index[name]
	if ok {
		c.lru.MoveToFront(el)
	}
	c.mu.Unlock()
	if !ok {
		return
	}
	if err := os.Chtimes(path, time.Time{}, time.Now()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.logger.Debug("archive cache: updating entry time failed", "file", name, "err", err)
	}
}

// validate checks the key before any file name is derived from it.
func validate(source, sha string) error {
	if source == "" {
		return errors.New("archivecache: empty source name")
	}
	if !shaRe.MatchString(sha) {
		shown := sha
		if len(shown) > 80 {
			shown = shown[:80] + "..."
		}
		return fmt.Errorf("archivecache: invalid sha %q: want 40 or 64 lowercase hex characters", shown)
	}
	return nil
}

// entryName is the file name of the entry for a validated key. The source
// name is hashed, so whatever characters it holds never reach the file
// system; the sha is already known to be plain hex.
func entryName(source, sha string) string {
	sum := sha256.Sum256([]byte(source))
	return hex.EncodeToString(sum[:])[:16] + "-" + sha + ".tar.gz"
}
