package firecracker

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/kici-dev/kici/internal/scaler/firecracker/fcapi"
)

// maxSocketPath is the longest path a unix socket address holds
// (sun_path, less its NUL).
const maxSocketPath = 107

// apiSock is a VM's API client and, for a socket path too long for a
// socket address (a deep chrootBaseDir), the O_PATH descriptor of the
// socket's directory through which the client dials it.
type apiSock struct {
	client *fcapi.Client
	dirFD  int // -1 when the path is dialled directly
}

// openAPI returns the client of the VMM serving in the jail root. It fails
// while the socket's directory does not exist yet.
func openAPI(root string) (*apiSock, error) {
	path := filepath.Join(root, apiSocket)
	if len(path) <= maxSocketPath {
		return &apiSock{client: fcapi.New(path), dirFD: -1}, nil
	}
	fd, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the API socket's directory: %w", err)
	}
	short := fmt.Sprintf("/proc/self/fd/%d/%s", fd, filepath.Base(path))
	return &apiSock{client: fcapi.New(short), dirFD: fd}, nil
}

// close releases the directory descriptor.
func (s *apiSock) close() {
	if s != nil && s.dirFD >= 0 {
		_ = unix.Close(s.dirFD)
		s.dirFD = -1
	}
}
