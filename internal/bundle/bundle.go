package bundle

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// ErrUnsafe is wrapped by every refusal of an entry: a name that leaves
// the tree, a link that points out of it, an entry of a kind bundles do
// not carry, or a bundle past its Limits.
var ErrUnsafe = errors.New("unsafe bundle")

// LimitError is a bundle refused for going past one of its Limits; it
// unwraps to ErrUnsafe.
type LimitError struct {
	// What names the limit: "files", "bytes" or "expanded" (all the
	// bundle's decompressed bytes).
	What string
	// Limit is its value.
	Limit int64
}

func (e *LimitError) Error() string {
	switch e.What {
	case "files":
		return fmt.Sprintf("%v: more than %d files and directories", ErrUnsafe, e.Limit)
	case "expanded":
		return fmt.Sprintf("%v: expands to more than %s (headers, padding and content)", ErrUnsafe, FormatBytes(e.Limit))
	}
	return fmt.Sprintf("%v: more than %s of file content", ErrUnsafe, FormatBytes(e.Limit))
}

func (e *LimitError) Unwrap() error { return ErrUnsafe }

// MaxNameLen bounds the name of an entry, in bytes.
const MaxNameLen = 1024

// Limits bound a bundle.
type Limits struct {
	// MaxEntries bounds its entries: files, directories and links.
	MaxEntries int
	// MaxBytes bounds the content of its regular files, in bytes.
	MaxBytes int64
}

// File is one regular file of a bundle.
type File struct {
	// Path is its slash-separated name in the bundle.
	Path string `json:"path"`
	// Size is its length in bytes.
	Size int64 `json:"size"`
}

// Stats say what a bundle held.
type Stats struct {
	// Entries counts its files, directories and links.
	Entries int
	// Files counts its regular files.
	Files int
	// Bytes is the content of its regular files.
	Bytes int64
}

// counter enforces Limits entry by entry.
type counter struct {
	lim Limits
	st  Stats
}

func (c *counter) entry() error {
	if c.st.Entries++; c.lim.MaxEntries > 0 && c.st.Entries > c.lim.MaxEntries {
		return &LimitError{What: "files", Limit: int64(c.lim.MaxEntries)}
	}
	return nil
}

func (c *counter) file(size int64) error {
	if size < 0 || c.lim.MaxBytes > 0 && c.st.Bytes+size > c.lim.MaxBytes {
		return &LimitError{What: "bytes", Limit: c.lim.MaxBytes}
	}
	c.st.Files++
	c.st.Bytes += size
	return nil
}

// CleanName returns an entry name as a clean, slash-separated path
// relative to the tree ("a/b"), or an error wrapping ErrUnsafe for a name
// that is absolute, has a ".." element, a NUL or a backslash, or is
// longer than MaxNameLen. The tree itself is ".".
func CleanName(name string) (string, error) {
	if len(name) > MaxNameLen || strings.ContainsAny(name, "\x00\\") {
		return "", fmt.Errorf("%w: entry name %.80q is too long or has a NUL or a backslash", ErrUnsafe, name)
	}
	clean := path.Clean(strings.TrimPrefix(name, "./"))
	if clean == "." {
		return ".", nil
	}
	if strings.HasPrefix(name, "/") || !filepath.IsLocal(filepath.FromSlash(clean)) {
		return "", fmt.Errorf("%w: entry %q leaves the tree", ErrUnsafe, name)
	}
	return clean, nil
}

// checkLink refuses a symbolic link at name whose target is absolute or
// leads out of the tree.
func checkLink(name, target string) error {
	if target == "" || path.IsAbs(target) || filepath.IsAbs(target) || strings.Contains(target, "\x00") ||
		!filepath.IsLocal(filepath.Join(filepath.Dir(filepath.FromSlash(name)), filepath.FromSlash(target))) {
		return fmt.Errorf("%w: symbolic link %q points out of the tree (%q)", ErrUnsafe, name, target)
	}
	return nil
}

// FormatBytes writes a size for people: "512 B", "1.5 KiB", "2.0 GiB".
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// The bounds of the two kinds of bundle, the same on the agent that
// writes one and on the orchestrator and agents that read it. The size of
// a bundle as stored (compressed) has its own, configurable, bound on the
// orchestrator.
var (
	// ArtifactLimits bound a job's artifacts: 10,000 files of 4 GiB in
	// all. Artifacts are build outputs and reports, which this fits with
	// room; a pattern that sweeps in a dependency tree fails fast instead
	// of filling the orchestrator's disk.
	ArtifactLimits = Limits{MaxEntries: 10_000, MaxBytes: 4 << 30}
	// CacheLimits bound one cache entry: 500,000 entries of 16 GiB in
	// all. Caches are dependency and build trees (a Go build cache, a
	// node_modules), which hold many small files.
	CacheLimits = Limits{MaxEntries: 500_000, MaxBytes: 16 << 30}
)
