package capie2e

import (
	"context"
	"os"

	"github.com/pkg/errors"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	"sigs.k8s.io/cluster-api/test/framework"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"
)

// Where Cluster API's test extension serves, as its components (extension/config/default of
// the sigs.k8s.io/cluster-api/test module) name it: the Service an ExtensionConfig points at.
const (
	TestExtensionNamespace = "test-extension-system"
	TestExtensionService   = "test-extension-webhook-service"
	// testExtensionDeployment is the extension's Deployment in TestExtensionNamespace.
	testExtensionDeployment = "test-extension-controller-manager"
)

// TestExtension is Cluster API's test extension, the Runtime SDK server of its end-to-end
// suite (lifecycle hooks that block until a spec lets them go), deployed into a management
// cluster for the specs that call it, as Cluster API's suite deploys it.
type TestExtension struct {
	// Components is the file make capi-test-extension renders
	// (out/capi-test-extension/components.yaml): the extension's components with the image it
	// builds, localhost/dockyard/capi-test-extension:<version>.
	Components string
}

// objects returns the components, their clusterctl variables at their defaults (none is
// without one).
func (e TestExtension) objects() ([]byte, error) {
	raw, err := os.ReadFile(e.Components)
	if err != nil {
		return nil, errors.Wrap(err, "reading Cluster API's test extension's components (make capi-test-extension writes them)")
	}
	out, err := yamlprocessor.NewSimpleProcessor().Process(raw, func(name string) (string, error) {
		return "", errors.Errorf("variable %s is not set", name)
	})
	return out, errors.Wrapf(err, "the variables of %s", e.Components)
}

// Deploy applies the extension's components to the cluster of proxy and waits, within
// intervals, until its Deployment is available (Cluster API's
// framework.WaitForDeploymentsAvailable, which fails the spec with the Deployment printed). Its
// image must be on the cluster's nodes: the suite loads it into the management cluster when the
// engine has it (make capi-test-extension builds it).
func (e TestExtension) Deploy(ctx context.Context, proxy framework.ClusterProxy, intervals ...any) error {
	objs, err := e.objects()
	if err != nil {
		return err
	}
	if err := proxy.CreateOrUpdate(ctx, objs); err != nil {
		return errors.Wrap(err, "applying Cluster API's test extension")
	}
	framework.WaitForDeploymentsAvailable(ctx, framework.WaitForDeploymentsAvailableInput{
		Getter:     proxy.GetClient(),
		Deployment: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: TestExtensionNamespace, Name: testExtensionDeployment}},
	}, intervals...)
	return nil
}

// Remove deletes what Deploy applied; what is gone already is not an error.
func (e TestExtension) Remove(ctx context.Context, proxy framework.ClusterProxy) error {
	raw, err := e.objects()
	if err != nil {
		return err
	}
	objs, err := utilyaml.ToUnstructured(raw)
	if err != nil {
		return errors.Wrapf(err, "parsing %s", e.Components)
	}
	for i := range objs {
		if err := proxy.GetClient().Delete(ctx, &objs[i]); err != nil && !apierrors.IsNotFound(err) {
			return errors.Wrapf(err, "deleting %s %s of Cluster API's test extension", objs[i].GetKind(), client.ObjectKeyFromObject(&objs[i]))
		}
	}
	return nil
}
