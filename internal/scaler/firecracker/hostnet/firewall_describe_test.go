//go:build linux

package hostnet

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/nftables/expr"
)

func TestDescribe(t *testing.T) {
	t.Parallel()
	pool := netip.MustParsePrefix("10.0.0.0/24")
	h, err := New(Config{Bridge: "kici-br0", Gateway: netip.MustParseAddr("10.0.0.1"), Prefix: pool, Table: "kici"})
	if err != nil {
		t.Fatal(err)
	}
	vm := VMRules{Addr: netip.MustParseAddr("10.0.0.2"), Tap: "kici-1a2b3c4d", MAC: net.HardwareAddr{0x06, 0, 0xac, 0, 0, 2}}
	tests := []struct {
		name  string
		exprs []expr.Any
		want  string
	}{
		{
			name:  "exact source",
			exprs: rule(matchAddr(offSaddr, host(netip.MustParseAddr("10.0.0.2"))), []expr.Any{&expr.Counter{}, verdict(expr.VerdictDrop)}),
			want:  "ip saddr 10.0.0.2 counter drop",
		},
		{
			name:  "prefixes",
			exprs: rule(matchAddr(offSaddr, pool), matchAddr(offDaddr, netip.MustParsePrefix("172.16.0.0/12")), []expr.Any{verdict(expr.VerdictAccept)}),
			want:  "ip saddr 10.0.0.0/24 ip daddr 172.16.0.0/12 accept",
		},
		{
			name:  "any destination",
			exprs: rule(matchAddr(offDaddr, netip.MustParsePrefix("0.0.0.0/0")), []expr.Any{verdict(expr.VerdictAccept)}),
			want:  "ip daddr 0.0.0.0/0 accept",
		},
		{
			name:  "conntrack",
			exprs: rule(ctEstablished(), []expr.Any{verdict(expr.VerdictAccept)}),
			want:  "ct state established,related accept",
		},
		{
			name:  "masquerade",
			exprs: rule(matchAddr(offSaddr, pool), oifnameNot("kici-br0"), []expr.Any{&expr.Masq{}}),
			want:  `ip saddr 10.0.0.0/24 oifname != "kici-br0" masquerade`,
		},
		{
			name:  "jump",
			exprs: jumpRule(),
			want:  "jump baseline",
		},
		{
			name:  "port baseline, scoped",
			exprs: h.portBaseline(true),
			want:  `meta ibrname "kici-br0" iifname "kici-*" counter drop`,
		},
		{
			name:  "port baseline, unscoped",
			exprs: h.portBaseline(false),
			want:  `iifname "kici-*" counter drop`,
		},
		{
			name:  "vm port rules",
			exprs: rule(vmPortRules(vm)...),
			want: `iifname "kici-1a2b3c4d" ether saddr 06:00:ac:00:00:02 ether type ip ip saddr 10.0.0.2 counter accept ` +
				`iifname "kici-1a2b3c4d" ether saddr 06:00:ac:00:00:02 ether type arp arp htype 1 arp ptype ip arp hlen 6 arp plen 4 ` +
				`arp saddr ether 06:00:ac:00:00:02 arp saddr ip 10.0.0.2 counter accept`,
		},
		{
			name:  "other ether type",
			exprs: rule(etherType(0x86dd), []expr.Any{verdict(expr.VerdictDrop)}),
			want:  "ether type 0x86dd drop",
		},
		{
			name:  "foreign expression",
			exprs: []expr.Any{&expr.Log{}, verdict(expr.VerdictReturn)},
			want:  "*expr.Log return",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := describe(tt.exprs); got != tt.want {
				t.Fatalf("describe: got %q, want %q", got, tt.want)
			}
		})
	}
}
