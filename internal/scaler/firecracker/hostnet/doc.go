// Package hostnet is the host side of Firecracker networking: the bridge
// the microVMs' TAPs are enslaved to, the TAPs themselves, the nftables
// table that keeps guests off private networks, and the one that binds
// each TAP to its guest's MAC and address.
//
// Only the Firecracker backend (internal/scaler/firecracker) and the admin
// surfaces that provision or diagnose a Firecracker host import it. It
// talks to the kernel over netlink (links, addresses, bridge port flags)
// and nf_tables (rules); it never runs ip or nft. Every call acts on the
// network namespace of the calling thread, which for a Go program is the
// process's namespace unless the caller has locked a thread into another.
// The package is Linux-only.
//
// # Layout
//
// A Host manages one Config: a bridge (say kici-br0 with 10.0.0.1/24), the
// VM address pool around it, and two nftables tables of one name (say
// kici), of families ip and bridge, that belong to this Host alone.
// EnsureBridge and EnsureFirewall create what is missing and leave what is
// right; both are idempotent and never delete a table, so re-provisioning
// a live host keeps every VM's rules. The ip table holds
//
//	chain forward      filter hook forward priority 0, policy accept
//	    per-VM rules   inserted at the head by AllowVM, ip saddr <vm>/32
//	    jump baseline  exactly one, always the last rule
//	chain baseline     regular chain, flushed and refilled by EnsureFirewall:
//	                   ip saddr <pool> ct state established,related accept
//	                   ip saddr <pool> ip daddr <gateway> accept
//	                   ip saddr <pool> ip daddr 10/8, 172.16/12, 192.168/16,
//	                   169.254/16 drop
//	chain postrouting  nat hook postrouting priority 100:
//	                   ip saddr <pool> oifname != <bridge> masquerade
//
// so a VM's own rules (its allow-list, and a terminal drop when it may
// reach nothing) are always evaluated before the pool-wide baseline. The
// bridge table holds
//
//	chain vm_ports     filter hook prerouting priority -200, policy accept
//	    per-VM rules   inserted at the head by AllowVM: from the VM's TAP
//	                   and MAC, accept IPv4 from its address and ARP whose
//	                   sender is its MAC at its address
//	    port baseline  exactly one, always the last rule:
//	                   meta ibrname <bridge> iifname "kici-*" drop
//
// so a guest cannot send with another VM's address or MAC, nor tell the
// host by ARP that another VM's address is its own (the host would then
// send that VM's traffic to it): prerouting sees each frame before the
// bridge learns its source MAC, forwards it or passes it to the host.
// Matching the input bridge's name needs the kernel's nft_meta_bridge;
// without it EnsureFirewall installs the baseline without meta ibrname,
// which then drops the unbound frames of kici- ports of every bridge in
// the namespace, other Hosts' included.
// Every rule kici writes carries a comment (nftables user data) that says
// what it is, for instance "kici-vm 10.0.0.2" on a VM's rules in both
// tables; rules are found by that comment, never by parsing nft's text
// output, so 10.0.0.2 never claims 10.0.0.20's rules. EnsureFirewall
// removes any other rule from forward and vm_ports: the tables are kici's,
// not a place for hand-written rules.
//
// Each TAP is named kici-<8 hex digits> (TapName), is persistent, is owned
// by the jailer's uid and gid so that only the jailed VMM can attach to
// it, and has bridge port isolation on, so guests on one bridge cannot
// reach each other at layer 2. Taps lists only TAPs of that pattern
// enslaved to the configured bridge, which is what an orphan sweep may
// reap.
//
// # Concurrency
//
// A *Host is safe for concurrent use. Each firewall change is one
// nf_tables transaction, so the kernel applies it whole or not at all,
// and a mutex serializes the read-then-write of the firewall methods
// within the process. TAPs of different names may be created and deleted
// concurrently; EnsureBridge and ProbeIsolation are serialized with each
// other. Two processes must not manage the same Config: two orchestrators
// on one host use different bridges, pools and tables.
//
// # Context
//
// Netlink requests cannot be interrupted once sent. Every method that
// takes a ctx checks it before it starts and between its steps, and
// returns ctx's error once it is done. A change already sent stays (running the method again
// completes it), except that CreateTap deletes a TAP it left half made.
package hostnet
