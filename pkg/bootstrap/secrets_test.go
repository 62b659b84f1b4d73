package bootstrap

import (
	"strings"
	"testing"
)

// Bootstrap data that misplaces a secret (a token where a path, a mode, an encoding, a module
// or a unit name belongs) is refused or reported without showing it: the message ends up in a
// condition and an event that anyone reading the DockyardMachine sees.
func TestMessagesNeverShowTheDatasSecrets(t *testing.T) {
	const token, secretHalf = "abcdef.0123456789abcdef", "0123456789abcdef"
	for _, tc := range []struct {
		format Format
		data   string
	}{
		{FormatCloudConfig, "#cloud-config\nwrite_files:\n- path: " + token + "\n  content: x\n"},
		{FormatCloudConfig, "#cloud-config\nwrite_files:\n- path: /etc/x\n  permissions: " + token + "\n"},
		{FormatCloudConfig, "#cloud-config\nwrite_files:\n- path: /etc/x\n  encoding: " + token + "\n"},
		{FormatCloudConfig, "#cloud-config\n" + token + ": 1\n"},
		{FormatCloudConfig, "## template: jinja\n#cloud-config\nruncmd:\n- echo {{ " + token + " }}\n"},
		{FormatIgnition, `{"ignition":{"version":"2.3.0"},"storage":{"files":[{"filesystem":"root","path":"` + token + `","contents":{"source":"data:,x"}}]}}`},
		{FormatIgnition, `{"ignition":{"version":"` + token + `"}}`},
		{FormatIgnition, `{"ignition":{"version":"2.3.0"},"systemd":{"units":[{"name":"` + token + `","contents":"x"}]}}`},
		{FormatCloudConfig, "#cloud-config\nwrite_files:\n- path: /etc/k\n  content: |\n    -----BEGIN RSA PRIVATE KEY-----\n    MIIEowIBAAKCAQEAuSECRETLINEOFAKEY0123456789\n    -----END RSA PRIVATE KEY-----\n  permissions: MIIEowIBAAKCAQEAuSECRETLINEOFAKEY0123456789\n"},
	} {
		p, err := Parse(tc.format, []byte(tc.data), Options{Hostname: "n"})
		said := ""
		if err != nil {
			said = err.Error()
		} else {
			said = strings.Join(p.Ignored, "; ")
		}
		if said == "" {
			t.Errorf("%q: nothing was said about the misplaced secret", tc.data)
		}
		for _, secret := range []string{secretHalf, "uSECRETLINEOFAKEY"} {
			if strings.Contains(said, secret) {
				t.Errorf("%q: the message shows a secret: %s", tc.data, said)
			}
		}
	}
}

func TestRedactHidesSecretsInOutput(t *testing.T) {
	out := "kubeadm join 192.0.2.1:6443 --token abcdef.0123456789abcdef --certificate-key " + strings.Repeat("ab", 32) +
		"\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBSECRET\n-----END EC PRIVATE KEY-----\n"
	got := Redact(out)
	for _, secret := range []string{"0123456789abcdef", strings.Repeat("ab", 32), "MHcCAQEEIBSECRET"} {
		if strings.Contains(got, secret) {
			t.Errorf("%q still shows %s", got, secret)
		}
	}
}
