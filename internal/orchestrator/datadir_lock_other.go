//go:build !unix

package orchestrator

// dataDirLock does nothing on systems without flock: two orchestrators
// must not be given the same data directory.
type dataDirLock struct{ previous lockHolder }

func lockDataDir(string) (*dataDirLock, error) { return &dataDirLock{}, nil }

func (l *dataDirLock) record(lockHolder) error { return nil }

func (l *dataDirLock) release() {}
