package orchestrator

import (
	"encoding/json"
	"fmt"
	"time"
)

// LockFile is the name of the lock file in the data directory. The
// orchestrator holds an exclusive flock on it for as long as it runs, and
// writes a lockHolder into it naming itself.
const LockFile = "orchestrator.lock"

// maxLockFileBytes bounds what is read back from a lock file.
const maxLockFileBytes = 4096

// lockHolder is what the lock file says about the process holding it.
type lockHolder struct {
	// InstanceID is the holder's id in the database's instance table,
	// which lets the next holder remove the row of a holder that died.
	InstanceID string `json:"instance_id,omitempty"`
	// Command is what holds the lock when it is not the server:
	// "kici-orchestrator migrate".
	Command   string    `json:"command,omitempty"`
	PID       int       `json:"pid"`
	Hostname  string    `json:"hostname"`
	Addr      string    `json:"addr"`
	StartedAt time.Time `json:"started_at"`
}

// DataDirInUseError is what New returns when another orchestrator holds
// the data directory's lock.
type DataDirInUseError struct {
	// Dir is the data directory.
	Dir string
	// Holder is what the lock file says of the live orchestrator; zero
	// when it says nothing readable (it is starting, or it is not kici's).
	Holder lockHolder
}

func (e *DataDirInUseError) Error() string {
	h := e.Holder
	if h.PID == 0 {
		return fmt.Sprintf("data dir %q is in use by another kici-orchestrator (its lock file %s names no process yet)", e.Dir, LockFile)
	}
	who := "kici-orchestrator"
	if h.Command != "" {
		who = h.Command
	}
	listening := ""
	if h.Addr != "" {
		listening = ", listening on " + h.Addr
	}
	return fmt.Sprintf("data dir %q is in use by %s pid %d on host %s%s, since %s",
		e.Dir, who, h.PID, h.Hostname, listening, h.StartedAt.UTC().Format(time.RFC3339))
}

// parseLockHolder reads a lock file's content; garbage gives the zero
// holder.
func parseLockHolder(data []byte) lockHolder {
	var h lockHolder
	if json.Unmarshal(data, &h) != nil {
		return lockHolder{}
	}
	return h
}
