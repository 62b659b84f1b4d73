package framework

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pkg/errors"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// readObjects decodes every YAML document of a file into an unstructured map, skipping empty
// documents.
func readObjects(path string) ([]map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.Wrapf(err, "reading %s", path)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []map[string]any
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, errors.Wrapf(err, "decoding %s", path)
		}
		if len(obj) > 0 {
			objs = append(objs, obj)
		}
	}
}

// loadCRDs reads the CRDs of a directory (its *.yaml files), adds labels and, when a CRD serves
// more than one version, points its conversion webhook at https://127.0.0.1:<port>/convert.
func loadCRDs(dir string, labels map[string]string, webhookPort int, caBundle []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.Errorf("no CRD in %s", dir)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, file := range files {
		objs, err := readObjects(file)
		if err != nil {
			return nil, err
		}
		for _, obj := range objs {
			if obj["kind"] != "CustomResourceDefinition" {
				continue
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, crd); err != nil {
				return nil, errors.Wrapf(err, "decoding a CRD of %s", file)
			}
			if crd.Labels == nil {
				crd.Labels = map[string]string{}
			}
			for k, v := range labels {
				crd.Labels[k] = v
			}
			if len(crd.Spec.Versions) > 1 {
				url := fmt.Sprintf("https://127.0.0.1:%d/convert", webhookPort)
				crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
					Strategy: apiextensionsv1.WebhookConverter,
					Webhook: &apiextensionsv1.WebhookConversion{
						ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
						ConversionReviewVersions: []string{"v1"},
					},
				}
			}
			crds = append(crds, crd)
		}
	}
	return crds, nil
}

// loadWebhookConfigurations reads a controller-gen webhook manifest and points every webhook at
// https://127.0.0.1:<port><path> instead of a Service. Every provider's manifest uses the same
// configuration names, so each gets namePrefix.
func loadWebhookConfigurations(path, namePrefix string, port int, caBundle []byte) ([]client.Object, error) {
	objs, err := readObjects(path)
	if err != nil {
		return nil, err
	}
	local := func(cc *admissionregistrationv1.WebhookClientConfig) error {
		if cc.Service == nil || cc.Service.Path == nil {
			return errors.Errorf("webhook in %s has no service path", path)
		}
		u := fmt.Sprintf("https://127.0.0.1:%d%s", port, *cc.Service.Path)
		*cc = admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: caBundle}
		return nil
	}
	var out []client.Object
	for _, obj := range objs {
		var cfg client.Object
		var configs []*admissionregistrationv1.WebhookClientConfig
		switch obj["kind"] {
		case "MutatingWebhookConfiguration":
			m := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, m); err != nil {
				return nil, errors.Wrapf(err, "decoding %s", path)
			}
			for i := range m.Webhooks {
				configs = append(configs, &m.Webhooks[i].ClientConfig)
			}
			cfg = m
		case "ValidatingWebhookConfiguration":
			v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, v); err != nil {
				return nil, errors.Wrapf(err, "decoding %s", path)
			}
			for i := range v.Webhooks {
				configs = append(configs, &v.Webhooks[i].ClientConfig)
			}
			cfg = v
		default:
			continue
		}
		for _, cc := range configs {
			if err := local(cc); err != nil {
				return nil, err
			}
		}
		cfg.SetName(namePrefix + cfg.GetName())
		out = append(out, cfg)
	}
	if len(out) == 0 {
		return nil, errors.Errorf("no webhook configuration in %s", path)
	}
	return out, nil
}

// createOrReplace creates an object, or replaces the one of the same name.
func createOrReplace(ctx context.Context, c client.Client, obj client.Object) error {
	err := c.Create(ctx, obj)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	existing := obj.DeepCopyObject().(client.Object)
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), existing); err != nil {
		return err
	}
	obj.SetResourceVersion(existing.GetResourceVersion())
	return c.Update(ctx, obj)
}

// waitForCRDs waits until every CRD is established and its names accepted.
func waitForCRDs(ctx context.Context, c client.Client, names []string, timeout time.Duration) error {
	pending := map[string]bool{}
	for _, n := range names {
		pending[n] = true
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for name := range pending {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return false, nil //nolint:nilerr // keep polling
			}
			established, accepted := false, false
			for _, cond := range crd.Status.Conditions {
				switch cond.Type {
				case apiextensionsv1.Established:
					established = cond.Status == apiextensionsv1.ConditionTrue
				case apiextensionsv1.NamesAccepted:
					accepted = cond.Status == apiextensionsv1.ConditionTrue
				}
			}
			if established && accepted {
				delete(pending, name)
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		var left []string
		for n := range pending {
			left = append(left, n)
		}
		sort.Strings(left)
		return errors.Wrapf(err, "CRDs not established: %s", strings.Join(left, ", "))
	}
	return nil
}
