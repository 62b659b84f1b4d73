// Package policy is what the manager's administrator lets DockyardMachines and
// DockyardClusters ask of the engine's host: which host paths node containers may bind-mount,
// and which image repositories nodes and load balancers may run from. Node containers run
// with nearly every capability and no confinement, and a bind mount exposes the host, so
// whoever may create these objects is trusted only as far as this policy says. The webhooks
// reject objects outside it (naming the field and the flag), and the controllers check it again
// before creating anything, for objects admitted before the policy changed.
package policy

import (
	"fmt"
	"path"
	"strings"

	"github.com/distribution/reference"
	"github.com/pkg/errors"
)

// Flags that set the policy, named in every refusal.
const (
	HostPathsFlag         = "--allowed-host-paths"
	ImageRepositoriesFlag = "--allowed-image-repositories"
)

// hostPathsVariable says how clusterctl users set HostPathsFlag.
const hostPathsVariable = "; clusterctl init sets it from DOCKYARD_ALLOWED_HOST_PATHS"

// AnyRepository in ImageRepositories allows every image.
const AnyRepository = "*"

// DefaultImageRepositories are kind's node and load balancer images and the images Dockyard
// builds on the machine (make images).
var DefaultImageRepositories = []string{"docker.io/kindest/node", "docker.io/kindest/haproxy", "localhost/dockyard/"}

// Policy is what objects may ask of the engine's host.
type Policy struct {
	// HostPaths may be bind-mounted into node containers: a mount's host path must be one of
	// them or below one. Empty allows no mount.
	HostPaths []string
	// ImageRepositories node and load balancer images may come from: a repository name
	// ("docker.io/kindest/node") or a prefix ending in "/" ("localhost/dockyard/"), normalized
	// the way the engine does ("kindest/node" is "docker.io/kindest/node"); AnyRepository
	// allows every image.
	ImageRepositories []string
}

// Default is the policy of a manager started without the flags: no host path, and the images
// of DefaultImageRepositories.
func Default() *Policy {
	p, err := New(nil, DefaultImageRepositories)
	if err != nil {
		panic(err) // DefaultImageRepositories are valid; policy_test.go proves it
	}
	return p
}

// New checks and normalizes a policy's entries.
func New(hostPaths, imageRepositories []string) (*Policy, error) {
	p := &Policy{}
	for _, h := range hostPaths {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if !path.IsAbs(h) || path.Clean(h) != h {
			return nil, errors.Errorf("%s: %q must be an absolute, clean path", HostPathsFlag, h)
		}
		p.HostPaths = append(p.HostPaths, h)
	}
	for _, r := range imageRepositories {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		if r != AnyRepository {
			prefix := strings.HasSuffix(r, "/")
			named, err := reference.ParseNormalizedNamed(strings.TrimSuffix(r, "/"))
			if err != nil || reference.TrimNamed(named).String() != named.String() {
				return nil, errors.Errorf("%s: %q is not a repository name (nor a prefix ending in /)", ImageRepositoriesFlag, r)
			}
			if r = named.Name(); prefix {
				r += "/"
			}
		}
		p.ImageRepositories = append(p.ImageRepositories, r)
	}
	return p, nil
}

// CheckHostPath returns an error unless a node container may bind-mount hostPath. The path is
// cleaned first, so "/tmp/.." is "/"; symbolic links on the host are not resolved, so allowed
// paths must not hold links a tenant can write.
func (p *Policy) CheckHostPath(hostPath string) error {
	clean := path.Clean(hostPath)
	for _, allowed := range p.HostPaths {
		if clean == allowed || allowed == "/" || strings.HasPrefix(clean, allowed+"/") {
			return nil
		}
	}
	if len(p.HostPaths) == 0 {
		return refusedf("host path %s may not be mounted: the manager allows no host path (%s%s)", hostPath, HostPathsFlag, hostPathsVariable)
	}
	return refusedf("host path %s may not be mounted: the manager allows %s and paths below them (%s%s)",
		hostPath, strings.Join(p.HostPaths, ", "), HostPathsFlag, hostPathsVariable)
}

// CheckImage returns an error unless nodes and load balancers may run image ref.
func (p *Policy) CheckImage(ref string) error {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return refusedf("image %s is not a valid reference: %v", ref, err)
	}
	repo := named.Name()
	for _, allowed := range p.ImageRepositories {
		if allowed == AnyRepository || repo == allowed || (strings.HasSuffix(allowed, "/") && strings.HasPrefix(repo, allowed)) {
			return nil
		}
	}
	return refusedf("image %s may not run as a node or load balancer: its repository %s is not among %s (%s)",
		ref, repo, strings.Join(p.ImageRepositories, ", "), ImageRepositoriesFlag)
}

// RefusedError says the policy does not allow something; its message names the flag.
type RefusedError struct{ msg string }

func (e *RefusedError) Error() string { return e.msg }

func refusedf(format string, args ...any) error {
	return &RefusedError{msg: fmt.Sprintf(format, args...)}
}

// IsRefused reports whether err is (or wraps) a refusal of the policy.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}
