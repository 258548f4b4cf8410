package auth

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestClientAddr(t *testing.T) {
	t.Parallel()
	proxies := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8")}
	tests := []struct {
		name    string
		trusted []netip.Prefix
		peer    string
		xff     []string
		want    string
	}{
		{name: "no trusted proxies: the header is ignored", peer: "127.0.0.1:5000", xff: []string{"203.0.113.7"}, want: "127.0.0.1"},
		{name: "untrusted peer: the header is ignored", trusted: proxies, peer: "198.51.100.9:5000", xff: []string{"203.0.113.7"}, want: "198.51.100.9"},
		{name: "one proxy", trusted: proxies, peer: "127.0.0.1:5000", xff: []string{"203.0.113.7"}, want: "203.0.113.7"},
		{name: "a forged entry left of the real client", trusted: proxies, peer: "127.0.0.1:5000", xff: []string{"198.51.100.1, 203.0.113.7"}, want: "203.0.113.7"},
		{name: "two proxies", trusted: proxies, peer: "127.0.0.1:5000", xff: []string{"203.0.113.7, 10.1.2.3"}, want: "203.0.113.7"},
		{name: "several header lines", trusted: proxies, peer: "127.0.0.1:5000", xff: []string{"203.0.113.7", "10.1.2.3"}, want: "203.0.113.7"},
		{name: "garbage stops the walk", trusted: proxies, peer: "127.0.0.1:5000", xff: []string{"203.0.113.7, unknown"}, want: "127.0.0.1"},
		{name: "garbage after a proxy hop", trusted: proxies, peer: "127.0.0.1:5000", xff: []string{"unknown, 10.1.2.3"}, want: "10.1.2.3"},
		{name: "only proxies", trusted: proxies, peer: "127.0.0.1:5000", xff: []string{"10.9.9.9, 10.1.2.3"}, want: "10.9.9.9"},
		{name: "no header", trusted: proxies, peer: "127.0.0.1:5000", want: "127.0.0.1"},
		{name: "IPv4-mapped peer", trusted: proxies, peer: "[::ffff:127.0.0.1]:5000", xff: []string{"2001:db8::7"}, want: "2001:db8::7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/api/v1/runs", nil)
			r.RemoteAddr = tt.peer
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := ClientAddr(r, tt.trusted); got != tt.want {
				t.Errorf("clientAddr: got %q, want %q", got, tt.want)
			}
		})
	}
}
