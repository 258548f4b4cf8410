package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// maxWalkEntries bounds the directory entries one match visits.
const maxWalkEntries = 1_000_000

// errTooManyFiles is a match over its bound of files.
var errTooManyFiles = errors.New("too many files")

// matched is what matchFiles found.
type matched struct {
	// files are the regular files matched, as sorted slash-separated paths
	// relative to the root.
	files []string
	// links counts the symbolic links that matched and were left out:
	// none is followed or kept.
	links int
}

// matchFiles finds the regular files under root that a pattern matches,
// itself or through a directory above it (so "dist" takes all of dist).
// Patterns are doublestar patterns relative to root (workflow checks
// they stay inside it). Only the part of the tree below each pattern's
// fixed prefix is walked; symbolic links are never followed. More than
// maxFiles matches fails with errTooManyFiles.
func matchFiles(root string, patterns []string, maxFiles int) (matched, error) {
	var m matched
	seen := map[string]bool{}
	visited := 0
	for _, base := range walkBases(patterns) {
		start := filepath.Join(root, filepath.FromSlash(base))
		err := filepath.WalkDir(start, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && p == start {
					return nil // nothing there to match
				}
				return err
			}
			if visited++; visited > maxWalkEntries {
				return fmt.Errorf("more than %d entries to look through under %s", maxWalkEntries, base)
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			if e.IsDir() || rel == "." || seen[rel] || !matchesAny(patterns, rel) {
				return nil
			}
			seen[rel] = true
			switch {
			case e.Type()&fs.ModeSymlink != 0:
				m.links++
			case e.Type().IsRegular():
				if len(m.files) >= maxFiles {
					return fmt.Errorf("%w: more than %d match %s", errTooManyFiles, maxFiles, strings.Join(patterns, ", "))
				}
				m.files = append(m.files, rel)
			}
			return nil
		})
		if err != nil {
			return matched{}, err
		}
	}
	slices.Sort(m.files)
	return m, nil
}

// matchesAny reports whether a pattern matches rel or a directory above
// it.
func matchesAny(patterns []string, rel string) bool {
	for _, p := range patterns {
		for q := rel; q != "." && q != "/" && q != ""; q = path.Dir(q) {
			if ok, _ := doublestar.Match(p, q); ok {
				return true
			}
		}
	}
	return false
}

// walkBases returns the fixed directory prefixes of patterns, each walked
// once: none inside another.
func walkBases(patterns []string) []string {
	var bases []string
	for _, p := range patterns {
		base, _ := doublestar.SplitPattern(p)
		if !strings.ContainsAny(p, "*?[{\\") {
			base = p // a plain path: walk just it (a file, or a directory's tree)
		}
		bases = append(bases, path.Clean(base))
	}
	slices.Sort(bases)
	var out []string
	for _, b := range bases {
		covered := false
		for _, o := range out {
			covered = covered || o == "." || b == o || strings.HasPrefix(b, o+"/")
		}
		if !covered {
			out = append(out, b)
		}
	}
	return out
}
