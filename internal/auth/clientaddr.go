package auth

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ClientAddr is the address of the client that made r: the peer's, or,
// when the peer is one of trustedProxies (reverse proxies), the first
// address in X-Forwarded-For, read from the right, that is not a trusted
// proxy itself. Entries left of an untrusted one could be forged by the
// client, so they are never used; an entry that is not an address stops
// the walk at the last proxy that wrote a well-formed one.
func ClientAddr(r *http.Request, trustedProxies []netip.Prefix) string {
	peer := remoteHost(r.RemoteAddr)
	if len(trustedProxies) == 0 {
		return peer
	}
	trusted := func(a netip.Addr) bool {
		for _, p := range trustedProxies {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	addr, err := netip.ParseAddr(peer)
	if err != nil || !trusted(addr.Unmap()) {
		return peer
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		for h := range strings.SplitSeq(v, ",") {
			hops = append(hops, strings.TrimSpace(h))
		}
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(hops[i])
		if err != nil {
			return client
		}
		client = a.Unmap().String()
		if !trusted(a.Unmap()) {
			return client
		}
	}
	return client
}

// remoteHost is the host part of a remote address.
func remoteHost(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}
