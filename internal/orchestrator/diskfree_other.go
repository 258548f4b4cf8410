//go:build !unix

package orchestrator

import "errors"

// diskFree is not implemented off Unix.
func diskFree(string) (free, total uint64, err error) {
	return 0, 0, errors.New("free space is not measured on this platform")
}
