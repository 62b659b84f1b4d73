package runtimes

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string]string{"": Docker, "docker": Docker, "Podman": Podman, "CONTAINERD": Containerd} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := New(Config{Name: "cri-o"}); err == nil {
		t.Error("an unknown runtime was accepted")
	}
}
