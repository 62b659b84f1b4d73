package capie2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pkg/errors"
	"k8s.io/client-go/kubernetes"
)

// requestCounts are the requests an API server served, by verb, resource and subresource
// ("PATCH machines/status"), from its apiserver_request_total metric.
type requestCounts map[string]float64

// readRequestCounts reads the API server's request counters.
func readRequestCounts(ctx context.Context, cs kubernetes.Interface) (requestCounts, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, errors.Wrap(err, "reading the API server's metrics")
	}
	return parseRequestCounts(string(raw)), nil
}

func parseRequestCounts(metrics string) requestCounts {
	counts := requestCounts{}
	for _, line := range strings.Split(metrics, "\n") {
		rest, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		l := metricLabels(labels)
		key := l["verb"] + " " + l["resource"]
		if l["resource"] == "" {
			key = l["verb"] + " (no resource)"
		}
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		counts[key] += v
	}
	return counts
}

// metricLabels parses a metric's labels (name="value",...); values hold no quotes in the
// labels read here.
func metricLabels(s string) map[string]string {
	out := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		name, value, ok := strings.Cut(pair, "=")
		if ok {
			out[name] = strings.Trim(value, `"`)
		}
	}
	return out
}

// RequestFootprint is what the management cluster's API server served while a spec ran.
type RequestFootprint struct {
	// Total requests served.
	Total float64
	// Top are the kinds of request served most, the most first.
	Top []RequestCount
}

// RequestCount is how many requests of one kind ("PATCH machines/status") were served.
type RequestCount struct {
	Kind  string
	Count float64
}

// requestFootprint is what was served between two readings; top kinds are kept.
func requestFootprint(before, after requestCounts, top int) RequestFootprint {
	var r RequestFootprint
	for kind, n := range after {
		d := n - before[kind]
		if d <= 0 {
			continue
		}
		r.Total += d
		r.Top = append(r.Top, RequestCount{Kind: kind, Count: d})
	}
	sort.Slice(r.Top, func(i, j int) bool {
		if r.Top[i].Count != r.Top[j].Count {
			return r.Top[i].Count > r.Top[j].Count
		}
		return r.Top[i].Kind < r.Top[j].Kind
	})
	if len(r.Top) > top {
		r.Top = r.Top[:top]
	}
	return r
}

func (r RequestFootprint) String() string {
	b := &strings.Builder{}
	fmt.Fprintf(b, "The management cluster's API server served %.0f requests; the most:\n", r.Total)
	for _, c := range r.Top {
		fmt.Fprintf(b, "  %8.0f  %s\n", c.Count, c.Kind)
	}
	return b.String()
}
