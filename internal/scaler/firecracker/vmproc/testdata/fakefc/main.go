// Command fakefc stands in for a Firecracker process in vmproc's tests. The
// tests copy it into a jail under the name the process should have (its
// comm) and start it chrooted there, where only a static binary runs; so
// it is built with CGO_ENABLED=0 and does nothing but sleep until killed.
package main

import "time"

func main() {
	for {
		time.Sleep(time.Hour)
	}
}
