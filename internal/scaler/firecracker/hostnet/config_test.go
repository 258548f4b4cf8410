//go:build linux

package hostnet

import (
	"net/netip"
	"strings"
	"testing"
)

// These tests touch no network, so they run without the namespace.

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	good := Config{
		Bridge:  "kici-br0",
		Gateway: netip.MustParseAddr("10.0.0.1"),
		Prefix:  netip.MustParsePrefix("10.0.0.0/24"),
		Table:   "kici",
	}
	tests := []struct {
		name    string
		edit    func(*Config)
		wantErr string // a substring; "" means valid
	}{
		{name: "defaults", edit: func(*Config) {}},
		{name: "15-byte bridge", edit: func(c *Config) { c.Bridge = "abcdefghijklmno" }},
		{name: "/30 pool", edit: func(c *Config) { c.Prefix = netip.MustParsePrefix("10.0.0.0/30") }},
		{name: "empty bridge", edit: func(c *Config) { c.Bridge = "" }, wantErr: "Bridge"},
		{name: "16-byte bridge", edit: func(c *Config) { c.Bridge = "abcdefghijklmnop" }, wantErr: "longer than 15"},
		{name: "bridge with slash", edit: func(c *Config) { c.Bridge = "br/0" }, wantErr: "Bridge"},
		{name: "bridge with space", edit: func(c *Config) { c.Bridge = "br 0" }, wantErr: "Bridge"},
		{name: "bridge named like a tap", edit: func(c *Config) { c.Bridge = "kici-0000abcd" }, wantErr: "TAP name"},
		{name: "bridge named like the probe", edit: func(c *Config) { c.Bridge = probeTap }, wantErr: "TAP name"},
		{name: "zero pool", edit: func(c *Config) { c.Prefix = netip.Prefix{} }, wantErr: "Prefix"},
		{name: "ipv6 pool", edit: func(c *Config) { c.Prefix = netip.MustParsePrefix("fd00::/64") }, wantErr: "Prefix"},
		{name: "pool with host bits", edit: func(c *Config) { c.Prefix = netip.MustParsePrefix("10.0.0.7/24") }, wantErr: "host bits"},
		{name: "/31 pool", edit: func(c *Config) { c.Prefix = netip.MustParsePrefix("10.0.0.0/31") }, wantErr: "too small"},
		{name: "zero gateway", edit: func(c *Config) { c.Gateway = netip.Addr{} }, wantErr: "Gateway"},
		{name: "ipv6 gateway", edit: func(c *Config) { c.Gateway = netip.MustParseAddr("::ffff:10.0.0.1") }, wantErr: "Gateway"},
		{name: "gateway outside", edit: func(c *Config) { c.Gateway = netip.MustParseAddr("10.0.1.1") }, wantErr: "not inside"},
		{name: "gateway is network", edit: func(c *Config) { c.Gateway = netip.MustParseAddr("10.0.0.0") }, wantErr: "network or broadcast"},
		{name: "gateway is broadcast", edit: func(c *Config) { c.Gateway = netip.MustParseAddr("10.0.0.255") }, wantErr: "network or broadcast"},
		{name: "empty table", edit: func(c *Config) { c.Table = "" }, wantErr: "Table"},
		{name: "table with space", edit: func(c *Config) { c.Table = "ki ci" }, wantErr: "Table"},
		{name: "table starting with digit", edit: func(c *Config) { c.Table = "1kici" }, wantErr: "Table"},
		{name: "33-byte table", edit: func(c *Config) { c.Table = strings.Repeat("k", 33) }, wantErr: "Table"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := good
			tt.edit(&c)
			_, err := New(c)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("New: got %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("New: got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestTapName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, id, want string
		matches        bool
	}{
		{name: "uuid", id: "3f2b8c1e-9d4a-4b7e-8c2d-1A2B3C4D5E6F", want: "kici-3c4d5e6f", matches: true},
		{name: "exactly eight", id: "DEADBEEF", want: "kici-deadbeef", matches: true},
		{name: "short", id: "abc", want: "kici-abc"},
		{name: "not hex", id: "job-runner-xyz", want: "kici-nner-xyz"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := TapName(tt.id)
			if got != tt.want {
				t.Fatalf("TapName(%q): got %q, want %q", tt.id, got, tt.want)
			}
			if IsTapName(got) != tt.matches {
				t.Fatalf("IsTapName(%q): got %v, want %v", got, !tt.matches, tt.matches)
			}
		})
	}
}

func TestIsTapName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{name: "tap", in: "kici-0123abcd", want: true},
		{name: "upper case", in: "kici-0123ABCD"},
		{name: "seven digits", in: "kici-0123abc"},
		{name: "nine digits", in: "kici-0123abcde"},
		{name: "probe", in: probeTap},
		{name: "bridge", in: "kici-br0"},
		{name: "other prefix", in: "tap-0123abcd"},
		{name: "newline", in: "kici-0123abcd\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := IsTapName(tt.in); got != tt.want {
				t.Fatalf("IsTapName(%q): got %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestComment(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		ud     []byte
		want   string
		wantOK bool
	}{
		{name: "ours", ud: tagged("kici-vm 10.0.0.2"), want: "kici-vm 10.0.0.2", wantOK: true},
		{name: "after another type", ud: append([]byte{1, 2, 'x', 'y'}, tagged("c")...), want: "c", wantOK: true},
		{name: "none", ud: nil},
		{name: "truncated", ud: []byte{0, 9, 'a'}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := comment(tt.ud)
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("comment(%v): got %q, %v, want %q, %v", tt.ud, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
