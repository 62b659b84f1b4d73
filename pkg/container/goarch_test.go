package container

import "testing"

func TestGoArch(t *testing.T) {
	for machine, want := range map[string]string{
		"x86_64":  "amd64",
		"amd64":   "amd64",
		"aarch64": "arm64",
		"arm64":   "arm64",
		"armv7l":  "arm",
		"s390x":   "s390x",
		"ppc64le": "ppc64le",
		"riscv64": "riscv64",
		"sparc":   "sparc",
	} {
		if got := GoArch(machine); got != want {
			t.Errorf("GoArch(%q) = %q, want %q", machine, got, want)
		}
	}
}
