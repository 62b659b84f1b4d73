package containerd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pkg/errors"
)

// Every container gets /etc/hostname, /etc/hosts and /etc/resolv.conf bind-mounted from files
// in its directory, as Docker does. containerd has no DNS server: instead of Docker's embedded
// resolver, each container's /etc/hosts names every container it shares a network with (by
// name, hostname and aliases), rewritten in place whenever an attachment changes.

func (r *Runtime) hostsPath(name string) string { return filepath.Join(r.containerDir(name), "hosts") }

// writeContainerFiles creates a new container's hostname, hosts and resolv.conf files (with
// search, when not nil, as its search list).
func (r *Runtime) writeContainerFiles(rec *record, search *[]string) error {
	dir := r.containerDir(rec.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return errors.Wrapf(err, "creating %s", dir)
	}
	if err := os.WriteFile(filepath.Join(dir, "hostname"), []byte(rec.Hostname+"\n"), 0o644); err != nil {
		return errors.Wrap(err, "writing hostname file")
	}
	host, _ := os.ReadFile("/etc/resolv.conf") // none: an empty one, as Docker's without a host file
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), resolvConf(host, search), 0o644); err != nil {
		return errors.Wrap(err, "writing resolv.conf")
	}
	return errors.Wrap(os.WriteFile(r.hostsPath(rec.Name), hostsFile(rec, nil), 0o644), "writing hosts file")
}

// resolvConf is the host's resolver configuration without loopback name servers, which would
// be the container's own loopback; with search not nil, its search list (and domain) replaced
// by search.
func resolvConf(host []byte, search *[]string) []byte {
	var out []string
	for _, l := range strings.Split(string(host), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == "nameserver" && (strings.HasPrefix(f[1], "127.") || f[1] == "::1") {
			continue
		}
		if len(f) >= 1 && (f[0] == "search" || f[0] == "domain") && search != nil {
			continue
		}
		out = append(out, l)
	}
	if search != nil && len(*search) > 0 {
		out = append([]string{"search " + strings.Join(*search, " ")}, out...)
	}
	return []byte(strings.Join(out, "\n"))
}

// hostsFile renders a container's /etc/hosts: loopback, itself, and its peers' addresses on
// the networks they share.
func hostsFile(rec *record, all []*record) []byte {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	for _, a := range rec.Attachments {
		if a.IPv4 != "" {
			fmt.Fprintf(&b, "%s\t%s\n", a.IPv4, strings.Join(uniq(rec.Hostname, rec.Name), " "))
			break
		}
	}
	for _, peer := range all {
		if peer.Name == rec.Name {
			continue
		}
		for _, a := range rec.Attachments {
			pa := peer.attachment(a.Network)
			if pa == nil || pa.IPv4 == "" {
				continue
			}
			names := []string{peer.Name, peer.Hostname}
			if a.Network == peer.Network {
				names = append(names, peer.Aliases...)
			}
			fmt.Fprintf(&b, "%s\t%s\n", pa.IPv4, strings.Join(uniq(names...), " "))
			break
		}
	}
	return []byte(b.String())
}

func uniq(names ...string) []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range names {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// writeNetworkFiles rewrites the hosts file of rec (whose record may not be saved yet) and of
// every other container, in place: the files are bind-mounted, so they keep their inode.
func (r *Runtime) writeNetworkFiles(rec *record) error {
	all, err := r.listRecords()
	if err != nil {
		return err
	}
	replaced := false
	for i, o := range all {
		if rec != nil && o.Name == rec.Name {
			all[i], replaced = rec, true
		}
	}
	if rec != nil && !replaced {
		all = append(all, rec)
	}
	for _, o := range all {
		path := r.hostsPath(o.Name)
		if _, err := os.Stat(path); err != nil {
			continue
		}
		if err := os.WriteFile(path, hostsFile(o, all), 0o644); err != nil {
			return errors.Wrapf(err, "writing the hosts file of container %s", o.Name)
		}
	}
	return nil
}

// refreshHosts rewrites every container's hosts file after a network's attachments changed.
func (r *Runtime) refreshHosts(string) error { return r.writeNetworkFiles(nil) }
