package containerd

import "testing"

func TestResolvConf(t *testing.T) {
	host := []byte("domain corp.example\nsearch corp.example lab.example\nnameserver 127.0.0.53\nnameserver 192.0.2.1\noptions edns0")
	for _, c := range []struct {
		name   string
		search *[]string
		want   string
	}{
		{"the host's", nil, "domain corp.example\nsearch corp.example lab.example\nnameserver 192.0.2.1\noptions edns0"},
		{"replaced", &[]string{"a.example", "b.example"}, "search a.example b.example\nnameserver 192.0.2.1\noptions edns0"},
		{"none", &[]string{}, "nameserver 192.0.2.1\noptions edns0"},
	} {
		if got := string(resolvConf(host, c.search)); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
