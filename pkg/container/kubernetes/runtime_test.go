package kubernetes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/kubernetes"
)

// Info reads the cluster's version and its largest schedulable node, and gives up when its
// context does: a server that takes the request and never answers holds the caller no longer.
func TestInfoFollowsItsContext(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("hang") != "" || r.Header.Get("X-Hang") != "" {
			<-hang
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/version":
			_ = json.NewEncoder(w).Encode(version.Info{GitVersion: "v1.34.4"})
		case "/api/v1/nodes":
			_ = json.NewEncoder(w).Encode(corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"}, Items: []corev1.Node{
				{Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
					NodeInfo: corev1.NodeSystemInfo{Architecture: "amd64", OSImage: "Debian"}}},
				{Spec: corev1.NodeSpec{Unschedulable: true}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}}},
			}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	defer close(hang)

	rt, err := kubernetes.New(&rest.Config{Host: srv.URL}, "pods")
	if err != nil {
		t.Fatal(err)
	}
	info, err := rt.Info(context.Background())
	if err != nil || info.Version != "v1.34.4" || info.CPUs != 4 || info.MemoryBytes != 8<<30 || info.Architecture != "amd64" {
		t.Errorf("info %+v (%v), want v1.34.4 and the schedulable node: 4 CPUs, 8 GiB, amd64", info, err)
	}

	hanging, err := kubernetes.New(&rest.Config{Host: srv.URL, WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			r.Header.Set("X-Hang", "1")
			return rt.RoundTrip(r)
		})
	}}, "pods")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := hanging.Info(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("info of a server that never answers: %v, want its context's deadline", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("info of a server that never answers took %s, its context gave it 200ms", took)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// What a team's server answers to a failed request reaches conditions and events through the
// engine's errors: a page of text or HTML is cut to its first line, a Status's message to a few
// hundred characters. Before, up to 2 KiB of any body came through.
func TestAServersErrorsAreTrimmed(t *testing.T) {
	page := "<html><head><title>502 Bad Gateway</title></head>\n" + strings.Repeat("<p>padding that says nothing</p>\n", 100)
	status := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Reason: metav1.StatusReasonForbidden, Code: http.StatusForbidden, Message: "forbidden: " + strings.Repeat("x", 4000)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/version" {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte(page))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(status)
	}))
	defer srv.Close()
	rt, err := kubernetes.New(&rest.Config{Host: srv.URL}, "pods")
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Info(context.Background())
	if err == nil || len(err.Error()) > 600 || !strings.Contains(err.Error(), "502 Bad Gateway") || strings.Contains(err.Error(), "padding") {
		t.Errorf("a page for an answer: %d bytes: %v; want its first line only", len(fmt.Sprint(err)), err)
	}
	_, err = rt.InspectContainer(context.Background(), "node")
	if err == nil || len(err.Error()) > 900 || !strings.Contains(err.Error(), "forbidden: xxx") {
		t.Errorf("a long Status: %d bytes: %v; want its message cut short", len(fmt.Sprint(err)), err)
	}
}

// client-go asks an infrastructure cluster for built-in types in protobuf, and a failed request
// is answered with a Status in protobuf: trimming keeps it one, so the engine's error says what
// the server said (a namespace not found), cut short when long. Before, the Status became a
// line of its bytes, and every such error read "the server could not find the requested
// resource".
func TestAServersProtobufStatusKeepsItsMessage(t *testing.T) {
	scheme := kruntime.NewScheme()
	scheme.AddKnownTypes(schema.GroupVersion{Version: "v1"}, &metav1.Status{})
	codec := protobuf.NewSerializer(scheme, scheme)
	message := `namespaces "pods" not found`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound, Message: message}
		if r.Method == http.MethodGet {
			st.Reason, st.Code, st.Message = metav1.StatusReasonForbidden, http.StatusForbidden, "forbidden: "+strings.Repeat("x", 4000)
		}
		w.Header().Set("Content-Type", kruntime.ContentTypeProtobuf)
		w.WriteHeader(int(st.Code))
		_ = codec.Encode(st, w)
	}))
	defer srv.Close()
	rt, err := kubernetes.New(&rest.Config{Host: srv.URL}, "pods")
	if err != nil {
		t.Fatal(err)
	}
	err = rt.CreateNetwork(context.Background(), container.NetworkSpec{Name: "dev"})
	if err == nil || !strings.Contains(err.Error(), message) {
		t.Errorf("a Status in protobuf: %v; want its message %q", err, message)
	}
	_, err = rt.InspectContainer(context.Background(), "node")
	if err == nil || len(err.Error()) > 900 || !strings.Contains(err.Error(), "forbidden: xxx") {
		t.Errorf("a long Status in protobuf: %d bytes: %v; want its message cut short", len(fmt.Sprint(err)), err)
	}
}
