package fakevm

import (
	"errors"
	"io"
	"os"
)

// maxFrame is the largest frame a relay reads: a TAP's MTU can be up to
// 65535 bytes plus the Ethernet header.
const maxFrame = 65535 + 14

// relayFrames copies Ethernet frames from src to dst, one Read and one Write
// per frame, until src fails or either side is closed. A frame dst refuses
// (a TAP whose link is down answers EIO) is dropped, as on a wire. It
// returns the error that ended the relay.
func relayFrames(dst io.Writer, src io.Reader) error {
	buf := make([]byte, maxFrame)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return err
		}
		if _, err := dst.Write(buf[:n]); errors.Is(err, os.ErrClosed) || errors.Is(err, io.ErrClosedPipe) {
			return err
		}
	}
}
