// Package vmproc tells whether the Firecracker process a jail's pid file
// names still runs, and is that jail's Firecracker, before anything acts on
// it. The jailer writes the PID to <jail root>/firecracker.pid. That file
// outlives its process, PIDs are recycled, a truncated file parses to 0
// (and kill(0) signals the caller's own process group), and the
// orchestrator signals as root: so a raw PID is never trusted.
//
// # Probe
//
// Probe reads the pid file and /proc and returns an Identity in one of
// three states, deciding in this order:
//
//	pid file missing, or not a number > 0            Gone
//	pid file unreadable (not missing)                Unconfirmed (no evidence)
//	/proc/<pid>/stat missing, or a zombie            Gone
//	started more than 60 s after the pid file's      Gone (the PID was recycled)
//	  mtime (field 22 of /proc/<pid>/stat, counted
//	  after the last ')' since comm may hold one)
//	/proc/<pid>/comm is not "firecracker"            Unconfirmed
//	/proc/<pid>/root is not the jail root (compared  Unconfirmed
//	  by device and inode: inside the jailer's mount
//	  namespace the path reads "/"), or unreadable
//	otherwise                                        Confirmed
//
// A missing pid file is Gone: the jailer writes it before Firecracker
// starts, and every caller probes only after the jailer ran, except the
// spawn itself, which must treat Gone as "not yet" while it waits for the
// jailer. A process a probe cannot read at all, or whose boot-relative
// start time is unknown, is never Gone on that account.
//
// # Which way each consumer fails closed
//
// Consumers fail closed in opposite directions, and Identity's zero value
// (Unconfirmed) is the safe answer for both:
//
//   - Signalling (Destroy's force-kill, the reclaim of unowned VMs, the
//     operator's stop) needs Confirmed. Kill refuses anything else with
//     ErrNotConfirmed, without signalling.
//   - Deleting a chroot (the orphan sweep) needs Gone: it spares anything
//     running, even Unconfirmed, because deleting files under an unknown
//     live process is worse than leaking one chroot. Identity.Running says
//     which.
//
// # Kill and WaitGone
//
// Kill closes the window between checking a PID and signalling it: it
// opens a pidfd on the PID first, which pins the process that had it, then
// probes again, and signals the pidfd only if that probe confirms the
// identity. A process recycled into the PID after the pidfd was opened
// fails the probe, and the pidfd would not reach it anyway. It then waits
// for the exit by polling the pidfd. WaitGone waits for the exit the same
// way without signalling (after a CtrlAltDel); it waits on any running
// process the pid file names, since waiting harms nothing.
//
// Probe, Kill and WaitGone need Linux (/proc and pidfds, Linux 5.10 or
// later); elsewhere Probe says Unconfirmed and Kill and WaitGone return an
// error wrapping errors.ErrUnsupported. All are safe for concurrent use.
package vmproc
