package nscheck

import (
	"net"
	"testing"

	"github.com/kici-dev/kici/internal/testsvc"
)

func TestMain(m *testing.M) { testsvc.MainInNetNS(m) }

func TestOwnNamespace(t *testing.T) {
	testsvc.NetNS(t)
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	if len(ifs) != 1 || ifs[0].Name != "lo" || ifs[0].Flags&net.FlagUp == 0 {
		t.Fatalf("interfaces %v: want only lo, up", ifs)
	}
}
