// Package patch decodes the patches kind's configuration carries, in one way for the webhooks
// that admit them, the node layer that applies them to containerd's configuration and
// pkg/kindconfig that applies them to kubeadm's: what is admitted is what applies.
package patch

import (
	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/pelletier/go-toml/v2"
	"github.com/pkg/errors"
	"sigs.k8s.io/yaml"
)

// JSON6902 decodes a JSON 6902 patch written as JSON or as a YAML list of operations (kind
// accepts both); ops is the patch as JSON.
func JSON6902(s string) (p jsonpatch.Patch, ops []byte, err error) {
	if ops, err = yaml.YAMLToJSON([]byte(s)); err == nil {
		p, err = jsonpatch.DecodePatch(ops)
	}
	return p, ops, errors.Wrap(err, "not a JSON 6902 patch")
}

// TOML decodes a TOML document (a containerd configuration, or a patch of one) as its table.
func TOML(s []byte) (map[string]any, error) {
	t := map[string]any{}
	return t, errors.Wrap(toml.Unmarshal(s, &t), "not TOML")
}
