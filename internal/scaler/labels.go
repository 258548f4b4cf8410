package scaler

import (
	"slices"
	"strings"
)

// NormalizeLabels lower-cases, de-duplicates and sorts labels.
func NormalizeLabels(labels []string) []string {
	out := make([]string, 0, len(labels))
	for _, l := range labels {
		l = strings.ToLower(strings.TrimSpace(l))
		if l != "" {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// LabelKey is the normalised key of a label set.
func LabelKey(labels []string) string {
	return strings.Join(NormalizeLabels(labels), ",")
}
