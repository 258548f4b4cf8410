package fcguest

import (
	"strings"
	"testing"
)

func TestNetworkValidate(t *testing.T) {
	good := Network{Interface: "eth0", Address: "10.0.0.7/24", Gateway: "10.0.0.1", MAC: "06:00:AC:00:00:07"}
	if err := good.Validate(); err != nil {
		t.Fatalf("%+v: %v", good, err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Network)
		want string
	}{
		{"interface with a slash", func(n *Network) { n.Interface = "eth0/../x" }, "interface"},
		{"interface too long", func(n *Network) { n.Interface = "abcdefghijklmnop" }, "interface"},
		{"address without prefix", func(n *Network) { n.Address = "10.0.0.7" }, "address"},
		{"IPv6 address", func(n *Network) { n.Address = "fd00::7/64" }, "address"},
		{"prefix /32", func(n *Network) { n.Address = "10.0.0.7/32" }, "address"},
		{"gateway outside the prefix", func(n *Network) { n.Gateway = "10.0.1.1" }, "gateway"},
		{"gateway is the address", func(n *Network) { n.Gateway = "10.0.0.7" }, "gateway"},
		{"multicast MAC", func(n *Network) { n.MAC = "01:00:5e:00:00:01" }, "mac"},
		{"long MAC", func(n *Network) { n.MAC = "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01" }, "mac"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := good
			tc.edit(&n)
			err := n.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("%+v: error %v, want one about %s", n, err, tc.want)
			}
		})
	}
}
