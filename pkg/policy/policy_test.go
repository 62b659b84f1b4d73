package policy

import (
	"strings"
	"testing"
)

func TestHostPaths(t *testing.T) {
	p, err := New([]string{"/var/run/docker.sock", "/srv/dockyard"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for path, allowed := range map[string]bool{
		"/var/run/docker.sock":      true,
		"/srv/dockyard":             true,
		"/srv/dockyard/cache":       true,
		"/srv/dockyard/../../etc":   false,
		"/srv/dockyard-other":       false,
		"/":                         false,
		"/tmp/..":                   false,
		"/var/run":                  false,
		"/var/run/docker.sock/../x": false,
	} {
		err := p.CheckHostPath(path)
		if (err == nil) != allowed {
			t.Errorf("%s: allowed=%v, want %v (%v)", path, err == nil, allowed, err)
		}
		if err != nil && !strings.Contains(err.Error(), HostPathsFlag) {
			t.Errorf("%s: the refusal does not name the flag: %v", path, err)
		}
	}
}

func TestNoHostPathByDefault(t *testing.T) {
	p, err := New(nil, DefaultImageRepositories)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/", "/var/run/docker.sock", "/tmp/.."} {
		if err := p.CheckHostPath(path); err == nil || !strings.Contains(err.Error(), "allows no host path") {
			t.Errorf("%s: %v", path, err)
		}
	}
}

func TestImages(t *testing.T) {
	p, err := New(nil, append(DefaultImageRepositories, "registry.example.internal/nodes/"))
	if err != nil {
		t.Fatal(err)
	}
	for ref, allowed := range map[string]bool{
		"kindest/node:v1.34.4":                         true,
		"docker.io/kindest/node:v1.34.4":               true,
		"kindest/haproxy:v20230606-42a2262b":           true,
		"localhost/dockyard/node:v1.34.4":              true,
		"localhost/dockyard/haproxy:latest":            true,
		"registry.example.internal/nodes/debian:12":    true,
		"kindest/node-evil:v1":                         false,
		"localhost/dockyardx/node:v1":                  false,
		"alpine:3":                                     false,
		"registry.example.internal/nodes":              false,
		"evil.example/kindest/node:v1.34.4":            false,
		"docker.io/library/ubuntu@sha256:" + sha256hex: false,
	} {
		err := p.CheckImage(ref)
		if (err == nil) != allowed {
			t.Errorf("%s: allowed=%v, want %v (%v)", ref, err == nil, allowed, err)
		}
		if err != nil && !strings.Contains(err.Error(), ImageRepositoriesFlag) {
			t.Errorf("%s: the refusal does not name the flag: %v", ref, err)
		}
	}
	any, err := New(nil, []string{AnyRepository})
	if err != nil {
		t.Fatal(err)
	}
	if err := any.CheckImage("alpine:3"); err != nil {
		t.Errorf("%s allows every image: %v", AnyRepository, err)
	}
}

const sha256hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestBadEntriesAreRefused(t *testing.T) {
	for _, tc := range []struct{ paths, repos []string }{
		{paths: []string{"relative/path"}},
		{paths: []string{"/tmp/../etc"}},
		{repos: []string{"kindest/node:v1.34.4"}},
		{repos: []string{"Not A Repo"}},
	} {
		if _, err := New(tc.paths, tc.repos); err == nil {
			t.Errorf("%v %v: accepted", tc.paths, tc.repos)
		}
	}
}
