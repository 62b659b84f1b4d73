package imagebuild

import (
	"path"
	"regexp"
	"strings"

	"github.com/distribution/reference"
	"github.com/pkg/errors"
)

// Component is what kind of image kubeadm asks for.
type Component string

// The images `kubeadm config images list` names.
const (
	ComponentAPIServer         Component = "kube-apiserver"
	ComponentControllerManager Component = "kube-controller-manager"
	ComponentScheduler         Component = "kube-scheduler"
	ComponentProxy             Component = "kube-proxy"
	ComponentEtcd              Component = "etcd"
	ComponentCoreDNS           Component = "coredns"
	ComponentPause             Component = "pause"
)

// KubeadmImage is one image of `kubeadm config images list`.
type KubeadmImage struct {
	// Ref is the reference exactly as kubeadm prints it (and as kubelet and containerd will
	// look it up), e.g. registry.k8s.io/coredns/coredns:v1.12.1.
	Ref string
	// Component is derived from the last path element of the repository.
	Component Component
	// Tag is the reference's tag, e.g. v1.12.1 or 3.6.5-0.
	Tag string
}

// ParseImageList parses the output of `kubeadm config images list`: one image reference a
// line. Blank lines are skipped; every other line must be a tagged reference of a component
// Dockyard knows how to build, so that a new kubeadm image fails the build loudly instead of
// being pulled at run time.
func ParseImageList(out string) ([]KubeadmImage, error) {
	var images []KubeadmImage
	seen := map[Component]bool{}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		named, err := reference.ParseNamed(line)
		if err != nil {
			return nil, errors.Wrapf(err, "kubeadm image list: %q is not a fully qualified image reference", line)
		}
		tagged, ok := named.(reference.Tagged)
		if !ok {
			return nil, errors.Errorf("kubeadm image list: %q has no tag", line)
		}
		if _, digested := named.(reference.Digested); digested {
			return nil, errors.Errorf("kubeadm image list: %q is pinned by digest, which a locally built image cannot match", line)
		}
		c := Component(path.Base(reference.Path(named)))
		switch c {
		case ComponentAPIServer, ComponentControllerManager, ComponentScheduler, ComponentProxy,
			ComponentEtcd, ComponentCoreDNS, ComponentPause:
		default:
			return nil, errors.Errorf("kubeadm image list: no recipe to build %q", line)
		}
		if seen[c] {
			return nil, errors.Errorf("kubeadm image list: %s listed twice", c)
		}
		seen[c] = true
		images = append(images, KubeadmImage{Ref: line, Component: c, Tag: tagged.Tag()})
	}
	if len(images) == 0 {
		return nil, errors.New("kubeadm image list is empty")
	}
	return images, nil
}

var (
	etcdTag    = regexp.MustCompile(`^v?(3\.\d+\.\d+)(-\d+)?$`)
	coreDNSTag = regexp.MustCompile(`^v?(\d+\.\d+\.\d+)$`)
)

// EtcdModuleVersion maps kubeadm's etcd image tag (3.6.5-0: version plus image revision) to
// the version of go.etcd.io/etcd/server/v3 (v3.6.5).
func EtcdModuleVersion(tag string) (string, error) {
	m := etcdTag.FindStringSubmatch(tag)
	if m == nil {
		return "", errors.Errorf("etcd image tag %q: expected 3.x.y or 3.x.y-N", tag)
	}
	return "v" + m[1], nil
}

// CoreDNSModuleVersion maps kubeadm's CoreDNS image tag (v1.12.1) to the version of
// github.com/coredns/coredns.
func CoreDNSModuleVersion(tag string) (string, error) {
	m := coreDNSTag.FindStringSubmatch(tag)
	if m == nil {
		return "", errors.Errorf("CoreDNS image tag %q: expected vX.Y.Z", tag)
	}
	return "v" + m[1], nil
}

// FindImage returns the image of a component.
func FindImage(images []KubeadmImage, c Component) (KubeadmImage, bool) {
	for _, img := range images {
		if img.Component == c {
			return img, true
		}
	}
	return KubeadmImage{}, false
}
