package baremetal

import (
	"encoding/json"
	"errors"
	"fmt"
)

// recordVersion is the version of the Handle.Blob record this package
// writes and reads.
const recordVersion = 1

// errRecordVersion refuses a Handle.Blob of another version.
var errRecordVersion = errors.New("unknown record version")

// record is a Handle's Blob: what Recover needs to find the process again
// and to tell it from an unrelated process that got the same PID.
type record struct {
	V   int `json:"v"`
	PID int `json:"pid"`
	// StartTime is field 22 of /proc/<pid>/stat: when the process started,
	// in clock ticks after boot. 0 means unknown (no /proc); such a record
	// is never re-attached.
	StartTime uint64 `json:"start_time"`
	// BootID is /proc/sys/kernel/random/boot_id when the process started: a
	// start time means nothing after a reboot.
	BootID  string `json:"boot_id,omitempty"`
	WorkDir string `json:"workdir"`
	LogPath string `json:"log_path"`
}

func (r record) encode() []byte {
	data, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("encode bare-metal record: %v", err)) // plain fields cannot fail
	}
	return data
}

func decodeRecord(blob []byte) (record, error) {
	var r record
	if err := json.Unmarshal(blob, &r); err != nil {
		return record{}, fmt.Errorf("decode bare-metal record: %w", err)
	}
	if r.V != recordVersion {
		return record{}, fmt.Errorf("decode bare-metal record: %w %d, want %d", errRecordVersion, r.V, recordVersion)
	}
	if r.PID <= 1 {
		return record{}, fmt.Errorf("decode bare-metal record: pid %d", r.PID)
	}
	return r, nil
}
