package runner

import (
	"io"
	"time"
)

// Test hooks for the unexported helpers.

// NewOutputForTest returns the io.Writer a step's output goes through, and
// the function that ends it.
func NewOutputForTest(step int, rep Reporter, limit int64, masks ...string) (io.Writer, func()) {
	o := newOutput(step, rep, newMasker(masks...), limit)
	return o, o.close
}

// ExtractTarGz is extractTarGz.
func ExtractTarGz(r io.Reader, dir string, maxBytes int64) (entries int, bytes int64, err error) {
	st, err := extractTarGz(r, dir, maxBytes)
	return st.entries, st.bytes, err
}

// SplitWords is splitWords.
var SplitWords = splitWords

// SetArchiveRetryDelays replaces the pauses between archive fetches and
// returns a function that restores them.
func SetArchiveRetryDelays(d []time.Duration) func() {
	old := archiveRetryDelays
	archiveRetryDelays = d
	return func() { archiveRetryDelays = old }
}

// MaskForTest returns the function that masks one line for these values.
func MaskForTest(values ...string) func(string) string {
	return newMasker(values...).apply
}

// HashFilesForTest is hashFiles.
var HashFilesForTest = hashFiles

// CacheVersionForTest is cacheVersion.
var CacheVersionForTest = cacheVersion
