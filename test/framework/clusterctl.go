package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlconfig "sigs.k8s.io/cluster-api/cmd/clusterctl/config"
	capiyaml "sigs.k8s.io/cluster-api/util/yaml"
)

// InventoryProvider is one entry of clusterctl's provider inventory, as `clusterctl init` writes
// it: a Provider object named after the provider's label, in the provider's namespace.
type InventoryProvider struct {
	// Label is the provider's manifest label, e.g. infrastructure-dockyard; also the
	// cluster.x-k8s.io/provider label of its CRDs.
	Label string
	// Name is the provider's name for clusterctl (cluster-api, kubeadm, dockyard).
	Name string
	// Type is the clusterctl provider type (CoreProvider...).
	Type clusterctlv1.ProviderType
	// Namespace is where clusterctl would have installed the provider.
	Namespace string
	// Version is the installed version.
	Version string
}

// InventoryProviders are the providers of the plane, as they would be after
// `clusterctl init --infrastructure dockyard`: Cluster API's three at ClusterAPIVersion and
// Dockyard at its newest release series in metadata.yaml.
func (p *ManagementPlane) InventoryProviders() ([]InventoryProvider, error) {
	dockyardVersion, err := DockyardVersion(p.opts.RepoRoot)
	if err != nil {
		return nil, err
	}
	capi := p.opts.ClusterAPIVersion
	return []InventoryProvider{
		{Label: "cluster-api", Name: "cluster-api", Type: clusterctlv1.CoreProviderType, Namespace: "capi-system", Version: capi},
		{Label: "bootstrap-kubeadm", Name: "kubeadm", Type: clusterctlv1.BootstrapProviderType, Namespace: "capi-kubeadm-bootstrap-system", Version: capi},
		{Label: "control-plane-kubeadm", Name: "kubeadm", Type: clusterctlv1.ControlPlaneProviderType, Namespace: "capi-kubeadm-control-plane-system", Version: capi},
		{Label: "infrastructure-dockyard", Name: "dockyard", Type: clusterctlv1.InfrastructureProviderType, Namespace: "dockyard-system", Version: dockyardVersion},
	}, nil
}

// DockyardVersion is the version clusterctl's inventory records for Dockyard: v<major>.<minor>.0
// of the newest release series in the repository's metadata.yaml.
func DockyardVersion(repoRoot string) (string, error) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "metadata.yaml"))
	if err != nil {
		return "", errors.Wrap(err, "reading metadata.yaml")
	}
	md := &clusterctlv1.Metadata{}
	if err := yaml.Unmarshal(data, md); err != nil {
		return "", errors.Wrap(err, "decoding metadata.yaml")
	}
	if len(md.ReleaseSeries) == 0 {
		return "", errors.New("metadata.yaml has no release series")
	}
	series := md.ReleaseSeries
	sort.Slice(series, func(i, j int) bool {
		if series[i].Major != series[j].Major {
			return series[i].Major > series[j].Major
		}
		return series[i].Minor > series[j].Minor
	})
	return fmt.Sprintf("v%d.%d.0", series[0].Major, series[0].Minor), nil
}

// InstallClusterctlInventory makes the plane a management cluster clusterctl recognises, as if
// `clusterctl init` had installed its providers: it creates clusterctl's Provider CRD, the
// providers' namespaces and one Provider object per provider, and labels the providers' CRDs
// clusterctl.cluster.x-k8s.io (clusterctl move discovers the kinds to move through that label).
// Options.ClusterctlInventory does this at Start; calling it again does no harm.
func (p *ManagementPlane) InstallClusterctlInventory(ctx context.Context) error {
	start := time.Now()
	c := p.client
	objs, err := capiyaml.ToUnstructured(clusterctlconfig.ClusterctlAPIManifest)
	if err != nil {
		return errors.Wrap(err, "decoding clusterctl's inventory CRD")
	}
	var names []string
	for i := range objs {
		if objs[i].GetKind() != "CustomResourceDefinition" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[i].Object, crd); err != nil {
			return errors.Wrap(err, "decoding clusterctl's inventory CRD")
		}
		if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			return errors.Wrapf(err, "creating CRD %s", crd.Name)
		}
		names = append(names, crd.Name)
	}
	if err := waitForCRDs(ctx, c, names, p.opts.ReadyTimeout); err != nil {
		return err
	}

	providers, err := p.InventoryProviders()
	if err != nil {
		return err
	}
	labels := map[string]bool{}
	for _, pr := range providers {
		labels[pr.Label] = true
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds, client.HasLabels{"cluster.x-k8s.io/provider"}); err != nil {
		return errors.Wrap(err, "listing CRDs")
	}
	for i := range crds.Items {
		crd := &crds.Items[i]
		if _, ok := crd.Labels[clusterctlv1.ClusterctlLabel]; ok || !labels[crd.Labels["cluster.x-k8s.io/provider"]] {
			continue
		}
		patch := client.MergeFrom(crd.DeepCopy())
		crd.Labels[clusterctlv1.ClusterctlLabel] = ""
		if err := c.Patch(ctx, crd, patch); err != nil {
			return errors.Wrapf(err, "labelling CRD %s", crd.Name)
		}
	}

	for _, pr := range providers {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pr.Namespace, Labels: map[string]string{
			clusterctlv1.ClusterctlLabel: "", "cluster.x-k8s.io/provider": pr.Label,
		}}}
		if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return errors.Wrapf(err, "creating namespace %s", pr.Namespace)
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": clusterctlv1.GroupVersion.String(),
			"kind":       "Provider",
			"metadata": map[string]any{
				"name":      pr.Label,
				"namespace": pr.Namespace,
				"labels": map[string]any{
					clusterctlv1.ClusterctlLabel:     "",
					clusterctlv1.ClusterctlCoreLabel: clusterctlv1.ClusterctlCoreLabelInventoryValue,
					"cluster.x-k8s.io/provider":      pr.Label,
				},
			},
			"providerName": pr.Name,
			"type":         string(pr.Type),
			"version":      pr.Version,
		}}
		if err := createOrReplace(ctx, c, obj); err != nil {
			return errors.Wrapf(err, "creating the inventory entry of %s", pr.Label)
		}
	}
	logf(p.opts.Log, "installed clusterctl's provider inventory in %s", time.Since(start).Round(time.Millisecond))
	return nil
}
