package capie2e

import (
	"bytes"
	"io"
	"os"
	"strings"

	"github.com/pkg/errors"
	"go.yaml.in/yaml/v3"
)

// template is a cluster template (a clusterctl flavor) as YAML nodes, so a test flavor can be
// made from a shipped one by editing it: comments, key order and clusterctl's ${VARIABLES}
// (plain scalars, which stay unquoted) survive.
type template struct {
	docs []*yaml.Node
}

// loadTemplate reads a multi-document template.
func loadTemplate(path string) (*template, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.Wrap(err, "reading a template")
	}
	return parseTemplate(raw)
}

func parseTemplate(raw []byte) (*template, error) {
	t := &template{}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		doc := &yaml.Node{}
		err := dec.Decode(doc)
		if errors.Is(err, io.EOF) {
			return t, nil
		}
		if err != nil {
			return nil, errors.Wrap(err, "parsing a template")
		}
		if len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode {
			t.docs = append(t.docs, doc)
		}
	}
}

func cloneNode(n *yaml.Node) *yaml.Node {
	c := *n
	c.Content = nil
	for _, child := range n.Content {
		c.Content = append(c.Content, cloneNode(child))
	}
	return &c
}

// objects returns the top-level mappings of the documents of a kind.
func (t *template) objects(kind string) []*yaml.Node {
	var out []*yaml.Node
	for _, d := range t.docs {
		if v := get(d.Content[0], "kind"); v != nil && v.Value == kind {
			out = append(out, d.Content[0])
		}
	}
	return out
}

// object returns the one object of a kind whose name ends with suffix; it fails otherwise.
func (t *template) object(kind, nameSuffix string) (*yaml.Node, error) {
	var found []*yaml.Node
	for _, o := range t.objects(kind) {
		if name := get(o, "metadata", "name"); name != nil && strings.HasSuffix(name.Value, nameSuffix) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		return nil, errors.Errorf("the template has %d %s objects named *%s, want 1", len(found), kind, nameSuffix)
	}
	return found[0], nil
}

// add appends the documents of a YAML text.
func (t *template) add(text string) error {
	more, err := parseTemplate([]byte(text))
	if err != nil {
		return err
	}
	t.docs = append(t.docs, more.docs...)
	return nil
}

// bytes encodes the template, documents separated by "---", with a comment first.
func (t *template) bytes(comment string) ([]byte, error) {
	var b bytes.Buffer
	for _, line := range strings.Split(strings.TrimSpace(comment), "\n") {
		b.WriteString("# " + line + "\n")
	}
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	for _, d := range t.docs {
		if err := enc.Encode(d); err != nil {
			return nil, errors.Wrap(err, "encoding a template")
		}
	}
	if err := enc.Close(); err != nil {
		return nil, errors.Wrap(err, "encoding a template")
	}
	return b.Bytes(), nil
}

// get follows mapping keys from n; nil when one is missing.
func get(n *yaml.Node, path ...string) *yaml.Node {
	for _, key := range path {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

// set sets the value at a dotted path of mapping keys (created when missing) to the YAML
// value given.
func set(n *yaml.Node, path, value string) error {
	return setIn(n, strings.Split(path, "."), value)
}

// setIn is set with the path's keys given one by one (a key may hold a dot).
func setIn(n *yaml.Node, keys []string, value string) error {
	path := strings.Join(keys, ".")
	v, err := valueNode(value)
	if err != nil {
		return errors.Wrapf(err, "value for %s", path)
	}
	for i, key := range keys {
		if n.Kind != yaml.MappingNode {
			return errors.Errorf("%s: %s is not a mapping", path, strings.Join(keys[:i], "."))
		}
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == key {
				next = n.Content[j+1]
				if i == len(keys)-1 {
					n.Content[j+1] = v
					return nil
				}
			}
		}
		if next == nil {
			next = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			if i == len(keys)-1 {
				next = v
			}
			n.Content = append(n.Content, scalar(key), next)
		}
		n = next
	}
	return nil
}

// appendTo appends the items of a YAML sequence to the sequence at a dotted path (created
// when missing).
func appendTo(n *yaml.Node, path, items string) error {
	v, err := valueNode(items)
	if err != nil {
		return errors.Wrapf(err, "items for %s", path)
	}
	if v.Kind != yaml.SequenceNode {
		return errors.Errorf("items for %s: not a sequence", path)
	}
	seq := get(n, strings.Split(path, ".")...)
	if seq == nil {
		return set(n, path, items)
	}
	if seq.Kind != yaml.SequenceNode {
		return errors.Errorf("%s is not a sequence", path)
	}
	seq.Content = append(seq.Content, v.Content...)
	return nil
}

// unset removes the key at a dotted path; a missing key is not an error.
func unset(n *yaml.Node, path string) {
	keys := strings.Split(path, ".")
	parent := get(n, keys[:len(keys)-1]...)
	if parent == nil || parent.Kind != yaml.MappingNode {
		return
	}
	last := keys[len(keys)-1]
	for j := 0; j+1 < len(parent.Content); j += 2 {
		if parent.Content[j].Value == last {
			parent.Content = append(parent.Content[:j], parent.Content[j+2:]...)
			return
		}
	}
}

func valueNode(text string) (*yaml.Node, error) {
	doc := &yaml.Node{}
	if err := yaml.Unmarshal([]byte(text), doc); err != nil {
		return nil, err
	}
	if len(doc.Content) != 1 {
		return nil, errors.Errorf("%q is not one YAML value", text)
	}
	return doc.Content[0], nil
}
