package bootstrap

import (
	"io"
	"strings"

	"github.com/pkg/errors"
	"go.yaml.in/yaml/v3"
)

// decodeYAML parses one YAML document into a node tree. It returns nil for a stream without
// a document (empty, or only comments). More than one document is an error, as it is for
// cloud-init (which loads user data with PyYAML's safe_load).
func decodeYAML(text string) (root *yaml.Node, err error) {
	defer func() {
		// The YAML parser is third-party code; bad input must give an error, not a panic.
		if r := recover(); r != nil {
			root, err = nil, errors.New("malformed YAML")
		}
	}()
	dec := yaml.NewDecoder(strings.NewReader(text))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, errors.Wrap(trimYAMLError(err), "malformed YAML")
	}
	var second yaml.Node
	switch err := dec.Decode(&second); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, errors.Wrap(trimYAMLError(err), "malformed YAML")
	default:
		return nil, errors.Errorf("line %d: a second YAML document starts here; cloud-config is a single document", second.Line)
	}
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, nil
		}
		return doc.Content[0], nil
	}
	return &doc, nil
}

// trimYAMLError drops the "yaml: " prefix of the YAML parser's errors; they name a line and
// the syntax problem, not document text.
func trimYAMLError(err error) error {
	return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
}

// resolve follows an alias to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 16; i++ {
		n = n.Alias
	}
	return n
}

// isNull reports whether n is absent or a YAML null ("~", "null", or nothing).
func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// kindName names a node's kind for errors.
func kindName(n *yaml.Node) string {
	n = resolve(n)
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!str":
			return "a string"
		case "!!int":
			return "an integer"
		case "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		case "!!binary":
			return "binary data"
		default:
			return "a " + strings.TrimPrefix(n.ShortTag(), "!!") + " value"
		}
	default:
		return "an alias"
	}
}

type yamlPair struct {
	key   string
	value *yaml.Node
}

// mappingPairs returns the key/value pairs of a mapping in document order, with YAML merge
// keys ("<<: *base") resolved: keys written in the mapping win over merged ones, and earlier
// merged mappings win over later ones, as in PyYAML. A key written twice is an error. A
// mapping merged more than once (or into itself) is only read the first time.
func mappingPairs(n *yaml.Node, b *planBuilder) ([]yamlPair, error) {
	return mappingPairsDepth(n, b, 0, map[*yaml.Node]bool{})
}

func mappingPairsDepth(n *yaml.Node, b *planBuilder, depth int, merged map[*yaml.Node]bool) ([]yamlPair, error) {
	if depth > 8 {
		return nil, errors.New("YAML merge keys nest too deeply")
	}
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, errors.Errorf("want a mapping, found %s", kindName(n))
	}
	merged[n] = true
	if err := b.visit(len(n.Content)/2 + 1); err != nil {
		return nil, err
	}
	var own, inherited []yamlPair
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			return nil, errors.Errorf("line %d: a mapping key is %s, not a string", n.Content[i].Line, kindName(k))
		}
		if k.ShortTag() == "!!merge" {
			sources := []*yaml.Node{resolve(v)}
			if s := sources[0]; s != nil && s.Kind == yaml.SequenceNode {
				sources = s.Content
			}
			for _, s := range sources {
				if merged[resolve(s)] {
					continue
				}
				pairs, err := mappingPairsDepth(s, b, depth+1, merged)
				if err != nil {
					if depth > 0 {
						return nil, err
					}
					return nil, errors.Wrapf(err, "line %d: merge key", k.Line)
				}
				inherited = append(inherited, pairs...)
			}
			continue
		}
		if seen[k.Value] {
			return nil, errors.Errorf("line %d: key %s appears twice", k.Line, quoteForError(k.Value))
		}
		seen[k.Value] = true
		own = append(own, yamlPair{key: k.Value, value: v})
	}
	for _, p := range inherited {
		if !seen[p.key] {
			seen[p.key] = true
			own = append(own, p)
		}
	}
	return own, nil
}

// scalarString returns the text of a scalar node as the bootstrap data wrote it.
func scalarString(n *yaml.Node) (string, bool) {
	n = resolve(n)
	if n == nil || n.Kind != yaml.ScalarNode {
		return "", false
	}
	return n.Value, true
}

// isQuoted reports whether a scalar was written quoted or with an explicit tag, which makes it
// a string whatever it looks like.
func isQuoted(n *yaml.Node) bool {
	return n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 ||
		n.Style&yaml.TaggedStyle != 0 && n.ShortTag() == "!!str"
}
