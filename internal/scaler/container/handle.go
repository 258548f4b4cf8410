package container

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrBadHandle is returned for a handle blob this backend cannot read.
var ErrBadHandle = errors.New("bad container handle")

// blobVersion is the version of handleRecord that encodeBlob writes.
const blobVersion = 1

// handleRecord is what a handle's Blob holds, as JSON:
// {"v":1,"container_id":"…"}.
type handleRecord struct {
	V           int    `json:"v"`
	ContainerID string `json:"container_id"`
}

func encodeBlob(containerID string) []byte {
	b, _ := json.Marshal(handleRecord{V: blobVersion, ContainerID: containerID}) // cannot fail
	return b
}

func decodeBlob(blob []byte) (handleRecord, error) {
	var r handleRecord
	if err := json.Unmarshal(blob, &r); err != nil {
		return handleRecord{}, fmt.Errorf("%w: %w", ErrBadHandle, err)
	}
	if r.V != blobVersion {
		return handleRecord{}, fmt.Errorf("%w: version %d, want %d", ErrBadHandle, r.V, blobVersion)
	}
	if r.ContainerID == "" {
		return handleRecord{}, fmt.Errorf("%w: no container_id", ErrBadHandle)
	}
	return r, nil
}
