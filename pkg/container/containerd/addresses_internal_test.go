package containerd

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// A network without a subnet gets the first /24 of autoPool that meets no other network of the
// runtime and no host address or route; the host's default route does not count.
func TestFreeSubnetAvoidsNetworksAndHostRoutes(t *testing.T) {
	r := &Runtime{opts: Options{StateDir: t.TempDir()}}
	for name, subnet := range map[string]string{"a": "10.210.0.0/24", "b": "10.210.1.0/24", "c": "10.210.3.0/24"} {
		dir := r.networkDir(name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(networkRecord{ID: name, Name: name, Subnet: subnet})
		if err := os.WriteFile(filepath.Join(dir, "network.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	host, err := hostPrefixes()
	if err != nil {
		t.Fatal(err)
	}
	taken := []netip.Prefix{netip.MustParsePrefix("10.210.0.0/23"), netip.MustParsePrefix("10.210.3.0/24")}
	for _, p := range host {
		if p.Bits() > 0 {
			taken = append(taken, p)
		}
	}
	want := netip.Prefix{}
	for i := range 256 {
		cand := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 210, byte(i), 0}), 24)
		free := true
		for _, p := range taken {
			free = free && !p.Overlaps(cand)
		}
		if free {
			want = cand
			break
		}
	}
	got, err := r.freeSubnet()
	if err != nil || got != want {
		t.Errorf("%s (%v), want %s (host prefixes %v)", got, err, want, host)
	}
}
