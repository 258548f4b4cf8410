package fakevm_test

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Helpers of the end-to-end tests that look at processes through /proc and
// pidfds.

// waitGone waits until the process of pidfd has exited.
func waitGone(t *testing.T, what string, pidfd int, timeout time.Duration) {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(timeout.Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatalf("poll the pidfd of %s: %v", what, err)
		}
		if n == 0 {
			t.Fatalf("%s still runs after %s", what, timeout)
		}
		return
	}
}

// children lists the PIDs whose parent is pid.
func children(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, ent := range ents {
		p, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

func procFile(t *testing.T, pid int, name string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		t.Fatalf("read /proc/%d/%s: %v", pid, name, err)
	}
	return strings.TrimSpace(string(b))
}

func statusField(t *testing.T, pid int, field string) string {
	t.Helper()
	for _, l := range strings.Split(procFile(t, pid, "status"), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func nsOf(t *testing.T, pid int, ns string) string {
	t.Helper()
	l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
	if err != nil {
		t.Fatalf("read the %s namespace of %d: %v", ns, pid, err)
	}
	return l
}
