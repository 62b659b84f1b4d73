package capie2e

import "strings"

// WithoutLabel returns the Ginkgo label filter that selects the specs filter selects, except
// those labelled label. An empty filter selects every spec.
func WithoutLabel(filter, label string) string {
	if strings.TrimSpace(filter) == "" {
		return "!" + label
	}
	return "(" + filter + ") && !" + label
}
