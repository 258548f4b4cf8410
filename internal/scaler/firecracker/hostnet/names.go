//go:build linux

package hostnet

import (
	"regexp"
	"strings"
)

// TapPattern is the pattern of every VM's TAP name: "kici-" and eight
// lower-case hex digits, 13 bytes in all. Only links of this name are
// ever created, listed or deleted as TAPs.
const TapPattern = `^kici-[0-9a-f]{8}$`

var tapRE = regexp.MustCompile(TapPattern)

// tapPrefix is what every name of TapPattern, and the probe TAP's, starts
// with. The bridge table drops the frames of every port so named that has
// no rules of its own.
const tapPrefix = "kici-"

// probeTap is the TAP ProbeIsolation creates and deletes. It is outside
// TapPattern, so no sweep ever counts it as a VM's.
const probeTap = "kici-isoprobe"

// TapName returns the TAP name of the VM vmID: "kici-" and the last eight
// characters of vmID, lower-cased (all of vmID if it is shorter). For the
// hex ids kici gives VMs the result matches TapPattern; CreateTap refuses
// one that does not.
func TapName(vmID string) string {
	if len(vmID) > 8 {
		vmID = vmID[len(vmID)-8:]
	}
	return tapPrefix + strings.ToLower(vmID)
}

// IsTapName reports whether name matches TapPattern.
func IsTapName(name string) bool { return tapRE.MatchString(name) }
