package protocol

import (
	"maps"
	"slices"
)

// RegisteredTypes returns every message type Decode accepts, sorted.
func RegisteredTypes() []string { return slices.Sorted(maps.Keys(registry)) }

// CloseCodes returns every close code this package defines, sorted.
func CloseCodes() []int { return slices.Sorted(maps.Keys(closeCodes)) }
