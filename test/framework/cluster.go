package framework

import (
	"context"
	"os"

	"github.com/pkg/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	capiyaml "sigs.k8s.io/cluster-api/util/yaml"
)

// RenderTemplate renders a clusterctl cluster template with clusterctl's own variable
// processor, as `clusterctl generate cluster` would; variables missing from vars fall back to
// the template's defaults, and a variable without either is an error.
func RenderTemplate(path string, vars map[string]string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.Wrapf(err, "reading template %s", path)
	}
	out, err := yamlprocessor.NewSimpleProcessor().Process(raw, func(name string) (string, error) {
		if v, ok := vars[name]; ok {
			return v, nil
		}
		return "", errors.Errorf("variable %s is not set", name)
	})
	return out, errors.Wrapf(err, "rendering template %s", path)
}

// CreateObjects creates every object of a multi-document YAML, in order.
func CreateObjects(ctx context.Context, c client.Client, yaml []byte) error {
	objs, err := capiyaml.ToUnstructured(yaml)
	if err != nil {
		return errors.Wrap(err, "decoding objects")
	}
	for i := range objs {
		if err := c.Create(ctx, &objs[i]); err != nil {
			return errors.Wrapf(err, "creating %s %s", objs[i].GetKind(), objs[i].GetName())
		}
	}
	return nil
}
