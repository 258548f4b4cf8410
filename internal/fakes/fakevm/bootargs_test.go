package fakevm

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseIPArg(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cmdline string
		want    *IPConfig
		wantErr bool
	}{
		{name: "kici's form", cmdline: "console=ttyS0 reboot=k ip=10.0.0.2::10.0.0.1:255.255.255.0::eth0:off",
			want: &IPConfig{Addr: netip.MustParsePrefix("10.0.0.2/24"), Gateway: netip.MustParseAddr("10.0.0.1"), Device: "eth0"}},
		{name: "hostname and no device", cmdline: "ip=172.16.0.2::172.16.0.1:255.255.255.252:guest",
			want: &IPConfig{Addr: netip.MustParsePrefix("172.16.0.2/30"), Gateway: netip.MustParseAddr("172.16.0.1"), Hostname: "guest", Device: "eth0"}},
		{name: "no gateway or mask", cmdline: "ip=10.1.2.3::::::off",
			want: &IPConfig{Addr: netip.MustParsePrefix("10.1.2.3/32"), Device: "eth0"}},
		{name: "none", cmdline: "console=ttyS0"},
		{name: "dhcp", cmdline: "ip=dhcp"},
		{name: "autoconf", cmdline: "ip=:::::eth0:dhcp"},
		{name: "bad client", cmdline: "ip=nope::10.0.0.1:255.255.255.0::eth0:off", wantErr: true},
		{name: "bad mask", cmdline: "ip=10.0.0.2::10.0.0.1:255.0.255.0::eth0:off", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseIPArg(tt.cmdline)
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
