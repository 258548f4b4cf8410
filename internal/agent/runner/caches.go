package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/bundle"
	"github.com/kici-dev/kici/internal/workflow"
)

// maxCacheKeyLen bounds a cache key with its hashFiles filled, as the
// orchestrator does.
const maxCacheKeyLen = 1024

// cacheVersionPrefix starts what a cache's version digests: a change of
// the bundle layout changes it, so old entries are never restored wrong.
const cacheVersionPrefix = "kici-cache-v1\n"

// jobCache is one entry of the job's cache: list, as the job sees it.
type jobCache struct {
	decl    workflow.Cache
	key     string   // the key, hashFiles filled
	restore []string // the restore keys, likewise
	version string
	// roots are the declared paths resolved: each one's directory (the
	// workspace, or the steps' HOME for "~/..." paths) and its path
	// inside it; skip marks one that cannot be used (say, a "~/" path
	// without a HOME on this host).
	roots []cacheRoot
	// hit is true when the exact key was restored: nothing to save.
	hit bool
	// off is true when the cache is not used at all (its key could not
	// be computed).
	off bool
}

type cacheRoot struct {
	dir  string // the workspace or HOME
	rel  string // the declared path inside it, slash-separated
	skip bool
}

// cacheVersion digests a cache's declared paths: entries of one key but
// other paths never match.
func cacheVersion(paths []string) string {
	sum := sha256.Sum256([]byte(cacheVersionPrefix + strings.Join(paths, "\n")))
	return hex.EncodeToString(sum[:])
}

// stepsHome is the HOME the job's steps see, on the host: the "~/" of
// its cache paths. "" when the steps have none there (in an image whose
// user the runner does not give a HOME, the image's own is not a host
// directory).
func (j *jobRun) stepsHome() string {
	env, _ := j.stepEnv(workflow.Step{})
	home := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	if !filepath.IsAbs(home) {
		return ""
	}
	return filepath.Clean(home)
}

// prepareCaches computes each cache's keys and paths. A cache whose key
// cannot be computed is noted and left off.
func (j *jobRun) prepareCaches() []*jobCache {
	var out []*jobCache
	home := j.stepsHome()
	for _, decl := range j.spec.Job.Cache {
		c := &jobCache{decl: decl, version: cacheVersion(decl.Paths)}
		out = append(out, c)
		var err error
		if c.key, err = fillHashFiles(j.src, decl.Key); err == nil {
			for _, rk := range decl.RestoreKeys {
				var filled string
				if filled, err = fillHashFiles(j.src, rk); err != nil {
					break
				}
				c.restore = append(c.restore, filled)
			}
		}
		if err == nil && (c.key == "" || len(c.key) > maxCacheKeyLen) {
			err = fmt.Errorf("the key is %d bytes once filled, want 1 to %d", len(c.key), maxCacheKeyLen)
		}
		if err != nil {
			j.out.note("cache %q is not used: %v", decl.Key, err)
			c.off = true
			continue
		}
		for _, p := range decl.Paths {
			r := cacheRoot{dir: j.src, rel: p}
			if rest, ok := strings.CutPrefix(p, "~/"); ok {
				r = cacheRoot{dir: home, rel: rest}
				if home == "" {
					j.out.note("cache path %s is left out: the steps have no HOME on the host (in an image, set the job's HOME env to a directory in the workspace)", p)
					r.skip = true
				}
			}
			r.rel = path.Clean(r.rel)
			if r.rel == "." && !r.skip {
				j.out.note("cache path %s is left out: a cache path names a directory inside the workspace or HOME, not all of it", p)
				r.skip = true
			}
			c.roots = append(c.roots, r)
		}
	}
	return out
}

// restoreCaches restores each cache before the steps: the orchestrator
// finds the entry (the exact key, else a restore key's prefix), which is
// downloaded, its digest checked, and extracted onto the declared paths
// (never outside them: an entry is placed by the index of the path it
// was saved from). Failures are noted, never fatal: the job runs without
// the cache.
func (j *jobRun) restoreCaches(ctx context.Context, c *storageClient, list []*jobCache) {
	for _, jc := range list {
		if jc.off || ctx.Err() != nil {
			continue
		}
		if err := j.restoreCache(ctx, c, jc); err != nil {
			j.out.note("cache %q not restored: %v", jc.key, err)
		}
	}
}

func (j *jobRun) restoreCache(ctx context.Context, c *storageClient, jc *jobCache) error {
	q := url.Values{"key": {jc.key}, "version": {jc.version}}
	for _, rk := range jc.restore {
		q.Add("restore", rk)
	}
	var hit apiv1.CacheHit
	status, err := c.getJSON(ctx, "looking up cache "+strconv.Quote(jc.key), "caches", q, &hit)
	if err != nil {
		return err
	}
	if status != 200 {
		j.out.note("cache miss: %s", jc.key)
		return nil
	}
	f, ok, err := c.download(ctx, "fetching cache "+strconv.Quote(hit.Key), "caches/"+url.PathEscape(hit.ID), j.dirs.root, bundle.CacheLimits.MaxBytes)
	if err != nil {
		return err
	}
	if !ok {
		j.out.note("cache miss: %s (the entry found is gone)", jc.key)
		return nil
	}
	defer discard(f)
	for i, r := range jc.roots {
		if r.skip {
			continue
		}
		if err := r.checkRoot(); err != nil {
			j.out.note("cache path %s is left out: %v", jc.decl.Paths[i], err)
			jc.roots[i].skip = true
		}
	}
	st, err := bundle.Extract(f, "", bundle.CacheLimits, bundle.ExtractOptions{Links: true, Place: jc.place})
	if err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	jc.hit = hit.Exact
	if hit.Exact {
		j.out.note("cache hit: %s (%d files, %s, from %s)", jc.key, st.Files, bundle.FormatBytes(st.Bytes), hit.Scope)
	} else {
		j.out.note("cache hit on a restore key: %s restored for %s (%d files, %s, from %s); saved under %s after a success",
			hit.Key, jc.key, st.Files, bundle.FormatBytes(st.Bytes), hit.Scope, jc.key)
	}
	return nil
}

// place maps an entry of a cache bundle, "N" or "N/REST", to path N of
// the cache declaration; it skips entries of unknown or left-out paths.
// Entries below path N are written through a root at that path, so
// nothing of them, links included, lands outside it.
func (jc *jobCache) place(name string) (bundle.Target, bool) {
	first, rest, below := strings.Cut(name, "/")
	i, err := strconv.Atoi(first)
	if err != nil || i < 0 || i >= len(jc.roots) || strconv.Itoa(i) != first || jc.roots[i].skip {
		return bundle.Target{}, false
	}
	abs := jc.roots[i].abs()
	if !below {
		return bundle.Target{Dir: filepath.Dir(abs), Rel: filepath.Base(abs)}, true
	}
	return bundle.Target{Dir: abs, Rel: rest}, true
}

// abs is the declared path on disk.
func (r cacheRoot) abs() string { return filepath.Join(r.dir, filepath.FromSlash(r.rel)) }

// checkRoot makes sure the declared path can be restored into: its
// parent directories exist and stay inside the workspace or HOME (no link
// on the way leads out), and the path itself is not a symbolic link.
func (r cacheRoot) checkRoot() error {
	base, err := os.OpenRoot(r.dir)
	if err != nil {
		return err
	}
	defer base.Close()
	local := filepath.FromSlash(r.rel)
	if parent := filepath.Dir(local); parent != "." {
		if err := base.MkdirAll(parent, 0o755); err != nil {
			return err
		}
	}
	fi, err := base.Lstat(local)
	if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link", r.rel)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// saveCaches saves, after a successful job, each cache whose exact key
// missed: its paths are written into a bundle (entry "N/…" for path N,
// links inside a path kept) and uploaded to the run's own scope.
// Failures are noted, never fatal.
func (j *jobRun) saveCaches(ctx context.Context, c *storageClient, list []*jobCache) {
	for _, jc := range list {
		if jc.off || jc.hit || ctx.Err() != nil {
			continue
		}
		if err := j.saveCache(ctx, c, jc); err != nil {
			j.out.note("cache %s not saved: %v", jc.key, err)
		}
	}
}

func (j *jobRun) saveCache(ctx context.Context, c *storageClient, jc *jobCache) error {
	f, err := j.tempBundle()
	if err != nil {
		return err
	}
	defer discard(f)
	h := sha256.New()
	w := bundle.NewWriter(io.MultiWriter(f, h), bundle.CacheLimits)
	found := 0
	for i, r := range jc.roots {
		if r.skip {
			continue
		}
		ok, err := addCachePath(w, strconv.Itoa(i), r)
		if err != nil {
			return err
		}
		if !ok {
			j.out.note("cache path %s does not exist; not saved", jc.decl.Paths[i])
			continue
		}
		found++
	}
	if found == 0 {
		return errors.New("none of its paths exists")
	}
	if err := w.Close(); err != nil {
		return err
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	var saved apiv1.CacheSaved
	q := url.Values{"key": {jc.key}, "version": {jc.version}}
	if err := c.upload(ctx, "saving cache "+strconv.Quote(jc.key), "caches", q, f, size, hex.EncodeToString(h.Sum(nil)), &saved); err != nil {
		return err
	}
	st := w.Stats()
	j.out.note("cache saved: %s (%d files, %s, %s compressed, in %s)", jc.key, st.Files, bundle.FormatBytes(st.Bytes), bundle.FormatBytes(size), saved.Scope)
	return nil
}

// addCachePath writes the declared path r under entry prefix: a
// directory's tree, or a file. It reports false when nothing is there.
// The path must resolve inside its directory (the workspace or HOME): a
// link on the way that leads out of it is refused.
func addCachePath(w *bundle.Writer, prefix string, r cacheRoot) (bool, error) {
	root, err := os.OpenRoot(r.dir)
	if err != nil {
		return false, err
	}
	defer root.Close()
	fi, err := root.Lstat(filepath.FromSlash(r.rel))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("cache path %s: %w", r.rel, err)
	}
	full := filepath.Join(r.dir, filepath.FromSlash(r.rel))
	switch {
	case fi.IsDir():
		_, err = w.AddTree(prefix, full, true)
	case fi.Mode().IsRegular():
		err = w.AddFile(prefix, full)
	default:
		return false, nil
	}
	return err == nil, err
}
