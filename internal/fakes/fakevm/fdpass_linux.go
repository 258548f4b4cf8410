package fakevm

import (
	"encoding/json"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// The VMM and its guest helper talk over a SOCK_SEQPACKET socketpair: one
// JSON helperMsg per datagram, with file descriptors attached as
// SCM_RIGHTS.

// maxHelperMsg bounds one message; maxHelperFDs the descriptors it carries.
const (
	maxHelperMsg = 64 << 10
	maxHelperFDs = 16
)

// Operations of helperMsg.Op.
const (
	// VMM to helper.
	opBoot       = "boot"       // configure the guest network; Boot is set
	opStart      = "start"      // start the guest agent
	opPause      = "pause"      // SIGSTOP the guest's processes
	opResume     = "resume"     // SIGCONT them
	opCtrlAltDel = "ctrlaltdel" // SIGTERM them, SIGKILL after a grace
	// Helper to VMM.
	opReady   = "ready"   // network up; the fds are the guest TAPs (one per NIC) and the MMDS listener
	opStarted = "started" // the agent runs; PID is set
	opExited  = "exited"  // the guest powered off; Status says why
	opError   = "error"   // the last request failed; Error says why
)

// helperMsg is one message between the VMM and its guest helper.
type helperMsg struct {
	Op     string   `json:"op"`
	Boot   *bootMsg `json:"boot,omitempty"`
	PID    int      `json:"pid,omitempty"`
	Status string   `json:"status,omitempty"`
	Error  string   `json:"error,omitempty"`
}

// bootMsg describes the guest's network.
type bootMsg struct {
	// NICs become the guest TAPs eth0, eth1, ... with these MACs.
	NICs []bootNIC `json:"nics"`
	// IP is the ip= configuration; nil leaves the interfaces unaddressed.
	IP *IPConfig `json:"ip,omitempty"`
	// MMDSAddr, when set, is put on lo and MMDS is listened for there.
	MMDSAddr string `json:"mmds_addr,omitempty"`
}

// bootNIC is one guest interface.
type bootNIC struct {
	MAC string `json:"mac,omitempty"`
	MTU int    `json:"mtu,omitempty"`
}

// sendMsg sends msg with fds attached.
func sendMsg(c *net.UnixConn, msg helperMsg, fds ...int) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := c.WriteMsgUnix(b, oob, nil); err != nil {
		return fmt.Errorf("send %q to the peer: %w", msg.Op, err)
	}
	return nil
}

// recvMsg receives one message and the fds attached to it (close-on-exec).
func recvMsg(c *net.UnixConn) (helperMsg, []int, error) {
	buf := make([]byte, maxHelperMsg)
	oob := make([]byte, unix.CmsgSpace(4*maxHelperFDs))
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return helperMsg{}, nil, err
	}
	var fds []int
	if oobn > 0 {
		cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return helperMsg{}, nil, fmt.Errorf("parse the control message: %w", err)
		}
		for _, cm := range cmsgs {
			got, err := unix.ParseUnixRights(&cm)
			if err == nil {
				fds = append(fds, got...)
			}
		}
	}
	for _, fd := range fds {
		unix.CloseOnExec(fd)
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		closeFDs(fds)
		return helperMsg{}, nil, fmt.Errorf("a message from the peer was truncated")
	}
	var msg helperMsg
	if err := json.Unmarshal(buf[:n], &msg); err != nil {
		closeFDs(fds)
		return helperMsg{}, nil, fmt.Errorf("decode a message from the peer: %w", err)
	}
	return msg, fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
