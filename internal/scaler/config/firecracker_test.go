package config

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const fcScaler = `
  - name: fc
    type: firecracker
    maxAgents: 4
    firecrackerPath: /usr/local/bin/firecracker
    jailerPath: /usr/local/bin/jailer
    kernelPath: /srv/fc/vmlinux
    uid: 10000
    gid: 10000
    labelSets:
      - labels: [linux, fc]
        rootfsPath: /srv/fc/rootfs.ext4
`

func TestFirecrackerDefaults(t *testing.T) {
	f, err := Parse("scalers.yaml", []byte("version: 1\nscalers:"+fcScaler))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Scalers[0]
	wantFC := Firecracker{
		FirecrackerPath: "/usr/local/bin/firecracker", JailerPath: "/usr/local/bin/jailer", KernelPath: "/srv/fc/vmlinux",
		UID: 10000, GID: 10000, ChrootBaseDir: "/srv/jailer", VCPUCount: 2, MemSizeMib: 512,
	}
	if diff := cmp.Diff(wantFC, s.Firecracker); diff != "" {
		t.Errorf("scaler options (-want +got):\n%s", diff)
	}
	wantSet := FirecrackerLabelSet{RootfsPath: "/srv/fc/rootfs.ext4", OverlayDriveSizeMib: 2048}
	if diff := cmp.Diff(wantSet, s.LabelSets[0].Firecracker); diff != "" {
		t.Errorf("label set options (-want +got):\n%s", diff)
	}
	wantNet := FirecrackerNetwork{
		CIDR: netip.MustParsePrefix("10.0.0.0/24"), Bridge: "kici-br0", Gateway: netip.MustParseAddr("10.0.0.1"),
		Netmask: netip.MustParseAddr("255.255.255.0"), Table: "kici", AutoProvisionHost: true,
	}
	if f.Firecracker != wantNet {
		t.Errorf("network block: got %v, want %v", f.Firecracker, wantNet)
	}
	guest := f.ManagerConfig().Scalers[0].LabelSets[0].Firecracker
	if guest.RootfsPath != "/srv/fc/rootfs.ext4" || guest.OverlayDriveSizeMib != 2048 {
		t.Errorf("manager label set guest: got %+v", guest)
	}
}

func TestFirecrackerWarmStart(t *testing.T) {
	f, err := Parse("scalers.yaml", []byte("version: 1\nscalers:"+fcScaler+"        warmStart: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Scalers[0].LabelSets[0].Firecracker.WarmStart || !f.ManagerConfig().Scalers[0].LabelSets[0].Firecracker.WarmStart {
		t.Errorf("warmStart: true not carried to the label set: %+v", f.Scalers[0].LabelSets[0].Firecracker)
	}
	_, err = Parse("scalers.yaml", []byte("version: 1\nscalers:"+fcScaler+"        warmStart: yes please\n"))
	if err == nil || !strings.Contains(err.Error(), "warmStart: expected true or false") {
		t.Errorf("warmStart: yes please: got %v, want an error naming the key", err)
	}
}

func TestFirecrackerNetworkBlock(t *testing.T) {
	f, err := Parse("scalers.yaml", []byte(`version: 1
firecracker:
  cidr: 172.20.8.0/22
  bridgeName: fcbr1
  table: kici_b
  autoProvisionHost: false
scalers:`+fcScaler))
	if err != nil {
		t.Fatal(err)
	}
	want := FirecrackerNetwork{
		CIDR: netip.MustParsePrefix("172.20.8.0/22"), Bridge: "fcbr1", Gateway: netip.MustParseAddr("172.20.8.1"),
		Netmask: netip.MustParseAddr("255.255.252.0"), Table: "kici_b",
	}
	if f.Firecracker != want {
		t.Errorf("got %v, want %v (gateway defaults to the pool's first address)", f.Firecracker, want)
	}
}

func TestFirecrackerErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"missing keys", "version: 1\nscalers:\n  - {name: fc, type: firecracker, maxAgents: 1, uid: 5, gid: 5, labelSets: [{labels: [a], rootfsPath: /r}]}\n",
			`missing required keys "firecrackerPath", "jailerPath", "kernelPath"`},
		{"no rootfs", strings.Replace("version: 1\nscalers:"+fcScaler, "rootfsPath: /srv/fc/rootfs.ext4", "image: x", 1),
			`missing required key "rootfsPath"`},
		{"root uid", strings.Replace("version: 1\nscalers:"+fcScaler, "uid: 10000", "uid: 0", 1),
			`scalers[0].uid: 0 is root`},
		{"relative kernel", strings.Replace("version: 1\nscalers:"+fcScaler, "/srv/fc/vmlinux", "vmlinux", 1),
			`scalers[0].kernelPath: "vmlinux" is not an absolute path`},
		{"fc key on container", "version: 1\nscalers:\n  - {name: c, type: container, maxAgents: 1, jailerPath: /j, labelSets: [{labels: [a], image: x, rootfsPath: /r}]}\n",
			`scalers[0].jailerPath: only for type "firecracker" scalers`},
		{"fc label key on container", "version: 1\nscalers:\n  - {name: c, type: container, maxAgents: 1, labelSets: [{labels: [a], image: x, rootfsPath: /r}]}\n",
			`scalers[0].labelSets[0].rootfsPath: only for firecracker scalers`},
		{"gateway outside", "version: 1\nfirecracker: {cidr: 10.9.0.0/24, gateway: 10.8.0.1}\nscalers: []\n",
			`firecracker.gateway: 10.8.0.1 is not inside the pool 10.9.0.0/24`},
		{"netmask mismatch", "version: 1\nfirecracker: {netmask: 255.255.0.0}\nscalers: []\n",
			`firecracker.netmask: 255.255.0.0 does not match the pool 10.0.0.0/24`},
		{"host bits", "version: 1\nfirecracker: {cidr: 10.0.0.5/24}\nscalers: []\n", `has host bits set: write the network address, 10.0.0.0/24`},
		{"long bridge", "version: 1\nfirecracker: {bridgeName: a-very-long-bridge-name}\nscalers: []\n", `invalid interface name "a-very-long-bridge-name"`},
		{"bad table", "version: 1\nfirecracker: {table: \"1 x\"}\nscalers: []\n", `invalid nftables table name "1 x"`},
		{"unknown key", "version: 1\nfirecracker: {bridge: x}\nscalers: []\n", `firecracker.bridge: unknown key (known keys: cidr, bridgeName,`},
		{"binary name", strings.Replace("version: 1\nscalers:"+fcScaler, "/usr/local/bin/firecracker", "/usr/local/bin/firecracker-v1.13", 1),
			`the binary must be called firecracker`},
		{"tiny pool", "version: 1\nfirecracker: {cidr: 10.0.0.0/31}\nscalers: []\n", `is too small`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("scalers.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error holding %q", err, tc.want)
			}
		})
	}
}

func TestPlanRefusesNetworkChangeUnderRunningFirecracker(t *testing.T) {
	from, err := Parse("scalers.yaml", []byte("version: 1\nscalers:"+fcScaler))
	if err != nil {
		t.Fatal(err)
	}
	to, err := Parse("scalers.yaml", []byte("version: 1\nfirecracker: {cidr: 10.1.0.0/24}\nscalers:"+fcScaler))
	if err != nil {
		t.Fatal(err)
	}
	if err := Plan(from, to).Err(); err == nil || !strings.Contains(err.Error(), "firecracker network block changed") {
		t.Fatalf("got %v, want a refusal naming the network block", err)
	}
	// Without a firecracker scaler in both files the block may change.
	empty, _ := Parse("scalers.yaml", []byte("version: 1\nscalers: []\n"))
	if err := Plan(empty, to).Err(); err != nil {
		t.Fatalf("adding a scaler on a new block: got %v, want nil", err)
	}
}

func TestPlanRefusesChangedFirecrackerKeys(t *testing.T) {
	from, err := Parse("scalers.yaml", []byte("version: 1\nscalers:"+fcScaler))
	if err != nil {
		t.Fatal(err)
	}
	to, err := Parse("scalers.yaml", []byte("version: 1\nscalers:"+strings.Replace(fcScaler, "uid: 10000", "uid: 10001", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := Plan(from, to).Err(); err == nil || !strings.Contains(err.Error(), "firecracker keys of scalers [fc] changed") {
		t.Fatalf("got %v, want a refusal naming the scaler", err)
	}
	// A label set's keys apply to the next spawn: no refusal.
	to2, err := Parse("scalers.yaml", []byte("version: 1\nscalers:"+strings.Replace(fcScaler, "/srv/fc/rootfs.ext4", "/srv/fc/rootfs2.ext4", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := Plan(from, to2).Err(); err != nil {
		t.Fatalf("changed rootfsPath: got %v, want nil", err)
	}
}
