package patch

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/pelletier/go-toml/v2"
	"github.com/pkg/errors"
)

// Containerd are the patches of a node's containerd configuration (kind's
// containerdConfigPatches and containerdConfigPatchesJSON6902).
type Containerd struct {
	// Merge are TOML documents merged in order: tables key by key, other values replaced; one
	// whose top-level version differs from the configuration's is skipped (so one list can
	// carry a patch for each configuration version).
	Merge []string
	// JSON6902 are JSON 6902 patches (JSON or YAML lists of operations) applied after them, in
	// order, to the configuration as a JSON document.
	JSON6902 []string
}

// Empty reports whether there is nothing to apply.
func (p Containerd) Empty() bool { return len(p.Merge)+len(p.JSON6902) == 0 }

// Mark is the first line of a containerd configuration Dockyard patched: the patches' digest,
// so the same patches are never applied twice.
func (p Containerd) Mark() string {
	h := sha256.New()
	for _, list := range [][]string{p.Merge, p.JSON6902} {
		fmt.Fprintf(h, "%d\n", len(list))
		for _, patch := range list {
			fmt.Fprintf(h, "%d\n%s", len(patch), patch)
		}
	}
	return "# Patched by Dockyard with containerdConfigPatches " + hex.EncodeToString(h.Sum(nil))[:16] + "\n"
}

// Apply applies the patches to a containerd configuration the way kind applies its
// containerdConfigPatches, then its containerdConfigPatchesJSON6902. It returns an error naming
// the patch that is not TOML or does not apply.
func (patches Containerd) Apply(config []byte) ([]byte, error) {
	merged, err := TOML(config)
	if err != nil {
		return nil, errors.Wrap(err, "reading the node's containerd configuration")
	}
	for i, p := range patches.Merge {
		table, err := TOML([]byte(p))
		if err != nil {
			return nil, errors.Wrapf(err, "containerdConfigPatches[%d]", i)
		}
		if v, ok := table["version"]; ok && fmt.Sprint(v) != fmt.Sprint(merged["version"]) {
			continue
		}
		mergeTables(merged, table)
	}
	for i, p := range patches.JSON6902 {
		doc, err := json.Marshal(merged)
		if err != nil {
			return nil, errors.Wrap(err, "the node's containerd configuration as JSON")
		}
		ops, _, err := JSON6902(p)
		if err != nil {
			return nil, errors.Wrapf(err, "containerdConfigPatchesJSON6902[%d]", i)
		}
		if doc, err = ops.Apply(doc); err != nil {
			return nil, errors.Wrapf(err, "applying containerdConfigPatchesJSON6902[%d]", i)
		}
		// Numbers come back as float64: TOML writes whole ones as integers again.
		merged = map[string]any{}
		if err := json.Unmarshal(doc, &merged); err != nil {
			return nil, errors.Wrapf(err, "applying containerdConfigPatchesJSON6902[%d]", i)
		}
		wholeNumbers(merged)
	}
	out, err := toml.Marshal(merged)
	return out, errors.Wrap(err, "writing the node's containerd configuration")
}

// wholeNumbers turns the float64 values of a decoded JSON document that are whole numbers into
// int64, as TOML (and containerd, which wants an integer version) has them.
func wholeNumbers(m map[string]any) {
	for k, v := range m {
		m[k] = wholeNumber(v)
	}
}

func wholeNumber(v any) any {
	switch t := v.(type) {
	case float64:
		if t == float64(int64(t)) {
			return int64(t)
		}
	case map[string]any:
		wholeNumbers(t)
	case []any:
		for i := range t {
			t[i] = wholeNumber(t[i])
		}
	}
	return v
}

// mergeTables merges patch into into: tables key by key, other values replaced.
func mergeTables(into, patch map[string]any) {
	for k, v := range patch {
		pt, ok := v.(map[string]any)
		it, isTable := into[k].(map[string]any)
		if ok && isTable {
			mergeTables(it, pt)
			continue
		}
		into[k] = v
	}
}
