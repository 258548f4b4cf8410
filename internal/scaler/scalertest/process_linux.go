package scalertest

import (
	"bytes"
	"os"
	"strconv"
)

// processRunning reports whether process pid runs (a zombie does not), and
// whether this system can tell.
func processRunning(pid int) (running, known bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false, true
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return false, false
	}
	return data[i+2] != 'Z', true
}
