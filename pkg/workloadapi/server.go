package workloadapi

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/version"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// maxBody is the largest request body the server reads (kube-apiserver's limit is 3 MiB).
const maxBody = 3 << 20

// Server serves one workload cluster's Store over HTTP, as kube-apiserver serves the same
// paths: discovery, /version, health, and the Resources' verbs. Requests are JSON (apply
// patches YAML or JSON); answers are JSON, errors a metav1.Status with kube-apiserver's codes.
// Authentication is the listener's (TLS with the cluster's CA), not the handler's.
type Server struct {
	store *Store
	// version is what /version says; the control plane's upgrades change it while it serves.
	version atomic.Pointer[version.Info]
	// resources by group, version and resource name.
	resources map[schema.GroupVersionResource]Resource
	// forward connects a Pod's port-forward; nil serves none.
	forward Forwarder
}

// NewServer returns the handler of a Store; kubernetesVersion (v1.34.4) is what /version says.
func NewServer(store *Store, kubernetesVersion string) *Server {
	s := &Server{store: store, resources: map[schema.GroupVersionResource]Resource{}}
	for _, r := range Resources {
		s.resources[r.GroupVersionResource] = r
	}
	s.SetVersion(kubernetesVersion)
	return s
}

// SetForwarder says what a Pod's port-forward reaches.
func (s *Server) SetForwarder(f Forwarder) { s.forward = f }

// SetVersion changes the Kubernetes version /version reports (an upgraded control plane).
func (s *Server) SetVersion(kubernetesVersion string) {
	v := strings.TrimPrefix(kubernetesVersion, "v")
	major, rest, _ := strings.Cut(v, ".")
	minor, _, _ := strings.Cut(rest, ".")
	s.version.Store(&version.Info{Major: major, Minor: minor, GitVersion: "v" + v, Platform: "linux/amd64"})
}

// Version is the Kubernetes version /version reports (v1.34.4).
func (s *Server) Version() string { return s.version.Load().GitVersion }

// request is a resource request, parsed from its path.
type request struct {
	Resource
	namespace, name, subresource string
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.Trim(r.URL.Path, "/")
	switch path {
	case "":
		writeJSON(w, http.StatusOK, map[string][]string{"paths": {"/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"}})
		return
	case "healthz", "livez", "readyz":
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok")
		return
	case "version":
		writeJSON(w, http.StatusOK, s.version.Load())
		return
	case "api":
		writeJSON(w, http.StatusOK, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
		return
	case "apis":
		writeJSON(w, http.StatusOK, s.groups())
		return
	}
	req, discovery, err := s.parse(strings.Split(path, "/"))
	switch {
	case err != nil:
		writeError(w, err)
	case discovery != nil:
		writeJSON(w, http.StatusOK, discovery)
	default:
		s.serve(w, r, req)
	}
}

// parse reads a path below /api/v1 or /apis/GROUP/VERSION: the group version's resource list,
// or a resource request.
func (s *Server) parse(segs []string) (*request, *metav1.APIResourceList, error) {
	var gv schema.GroupVersion
	switch {
	case len(segs) >= 2 && segs[0] == "api" && segs[1] == "v1":
		gv, segs = schema.GroupVersion{Version: "v1"}, segs[2:]
	case len(segs) >= 3 && segs[0] == "apis":
		gv, segs = schema.GroupVersion{Group: segs[1], Version: segs[2]}, segs[3:]
	default:
		return nil, nil, apierrors.NewNotFound(schema.GroupResource{}, strings.Join(segs, "/"))
	}
	if len(segs) == 0 {
		list := s.resourceList(gv)
		if list == nil {
			return nil, nil, apierrors.NewNotFound(schema.GroupResource{Group: gv.Group}, gv.Version)
		}
		return nil, list, nil
	}
	req := &request{}
	if len(segs) >= 3 && segs[0] == "namespaces" {
		if r, ok := s.resources[gv.WithResource(segs[2])]; ok && r.Namespaced {
			req.namespace, segs = segs[1], segs[2:]
		}
	}
	r, ok := s.resources[gv.WithResource(segs[0])]
	if !ok || len(segs) > 3 {
		return nil, nil, apierrors.NewNotFound(gv.WithResource(segs[0]).GroupResource(), "")
	}
	req.Resource = r
	if len(segs) > 1 {
		req.name = segs[1]
	}
	if len(segs) > 2 {
		req.subresource = segs[2]
		if !slices.Contains(r.Subresources, req.subresource) {
			return nil, nil, apierrors.NewNotFound(r.GroupResource(), req.name+"/"+req.subresource)
		}
	}
	return req, nil, nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, req *request) {
	q := r.URL.Query()
	gr := req.GroupResource()
	var (
		obj *unstructured.Unstructured
		err error
	)
	switch {
	case r.Method == http.MethodGet && req.name == "" && (q.Get("watch") == "true" || q.Get("watch") == "1"):
		s.watch(w, r, req)
		return
	case r.Method == http.MethodGet && req.name == "":
		s.list(w, req, q.Get("labelSelector"), q.Get("fieldSelector"))
		return
	case r.Method == http.MethodGet:
		obj, err = s.store.Get(gr, req.namespace, req.name)
	case (r.Method == http.MethodPost || r.Method == http.MethodGet) && req.subresource == "portforward":
		s.portForward(w, r, req)
		return
	case r.Method == http.MethodPost && req.subresource == "eviction":
		s.evict(w, req)
		return
	case r.Method == http.MethodPost && req.name == "":
		obj, err = s.create(r, req)
		if err == nil {
			writeJSON(w, http.StatusCreated, obj.Object)
			return
		}
	case r.Method == http.MethodPut && req.name != "":
		obj, err = s.update(r, req)
	case r.Method == http.MethodPatch && req.name != "":
		obj, err = s.patch(r, req)
	case r.Method == http.MethodDelete && req.name != "":
		obj, err = s.store.Delete(gr, req.namespace, req.name)
	default:
		err = apierrors.NewMethodNotSupported(gr, r.Method)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, obj.Object)
}

func (s *Server) list(w http.ResponseWriter, req *request, labelSelector, fieldSelector string) {
	sel, err := selector(labelSelector, fieldSelector)
	if err != nil {
		writeError(w, err)
		return
	}
	items, rv := s.store.List(req.GroupResource(), req.namespace, sel)
	list := map[string]any{
		"apiVersion": req.GroupVersion().String(), "kind": req.Kind + "List",
		"metadata": map[string]any{"resourceVersion": rv},
		"items":    itemsOf(items),
	}
	writeJSON(w, http.StatusOK, list)
}

func itemsOf(objs []*unstructured.Unstructured) []map[string]any {
	out := make([]map[string]any, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.Object)
	}
	return out
}

// watch streams a watch's events as kube-apiserver does (one JSON object per event), until the
// client goes, timeoutSeconds pass or the watcher falls behind.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, req *request) {
	q := r.URL.Query()
	sel, err := selector(q.Get("labelSelector"), q.Get("fieldSelector"))
	if err != nil {
		writeError(w, err)
		return
	}
	watcher, err := s.store.Watch(req.GroupResource(), req.namespace, q.Get("resourceVersion"), sel, q.Get("sendInitialEvents") == "true")
	if err != nil {
		writeError(w, err)
		return
	}
	defer watcher.Stop()
	timeout := 30 * time.Minute
	if t, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && t > 0 {
		timeout = time.Duration(t) * time.Second
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	enc := json.NewEncoder(w)
	bookmarks := q.Get("allowWatchBookmarks") == "true" || q.Get("sendInitialEvents") == "true"
	for {
		select {
		case <-r.Context().Done():
			return
		case <-timer.C:
			return
		case e, ok := <-watcher.Events():
			if !ok {
				return
			}
			if e.Type == "BOOKMARK" && !bookmarks {
				continue
			}
			obj := e.Object
			if e.Type == "BOOKMARK" {
				obj = obj.DeepCopy()
				obj.SetAPIVersion(req.GroupVersion().String())
				obj.SetKind(req.Kind)
			}
			if err := enc.Encode(map[string]any{"type": e.Type, "object": obj.Object}); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
}

// create stores the request's object in the path's namespace.
func (s *Server) create(r *http.Request, req *request) (*unstructured.Unstructured, error) {
	obj, err := readObject(r, req)
	if err != nil {
		return nil, err
	}
	if obj.GetName() == "" && obj.GetGenerateName() != "" {
		obj.SetName(obj.GetGenerateName() + utilrand.String(5))
	}
	return s.store.Create(req.GroupResource(), obj)
}

// update replaces an object; through the status subresource only its status, and through the
// object all but its status (for kinds that have the subresource), as kube-apiserver does.
func (s *Server) update(r *http.Request, req *request) (*unstructured.Unstructured, error) {
	obj, err := readObject(r, req)
	if err != nil {
		return nil, err
	}
	if obj.GetName() != req.name {
		return nil, apierrors.NewBadRequest("metadata.name " + obj.GetName() + " does not match the path's " + req.name)
	}
	current, err := s.store.Get(req.GroupResource(), req.namespace, req.name)
	if err != nil {
		return nil, err
	}
	return s.store.Update(req.GroupResource(), s.scoped(req, current, obj))
}

// scoped is what a write through req changes of current: the status only through the status
// subresource; all but the status through the object when the kind has a status subresource.
func (s *Server) scoped(req *request, current, written *unstructured.Unstructured) *unstructured.Unstructured {
	switch {
	case req.subresource == "status":
		out := current.DeepCopy()
		out.Object["status"] = written.Object["status"]
		if rv := written.GetResourceVersion(); rv != "" {
			out.SetResourceVersion(rv)
		}
		return out
	case slices.Contains(req.Subresources, "status"):
		out := written.DeepCopy()
		if st, ok := current.Object["status"]; ok {
			out.Object["status"] = st
		} else {
			delete(out.Object, "status")
		}
		return out
	}
	return written
}

// patch applies a JSON, merge or strategic merge patch to an object, or an apply patch (which
// also creates it). An apply patch is applied as a merge patch of the applied configuration:
// fields an applier stops applying stay, as no field ownership is kept.
func (s *Server) patch(r *http.Request, req *request) (*unstructured.Unstructured, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return nil, apierrors.NewBadRequest("reading the patch: " + err.Error())
	}
	gr := req.GroupResource()
	contentType, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	current, err := s.store.Get(gr, req.namespace, req.name)
	if contentType == string(types.ApplyPatchType) {
		var convErr error
		if body, convErr = yaml.YAMLToJSON(body); convErr != nil {
			return nil, apierrors.NewBadRequest("the apply patch is neither YAML nor JSON: " + convErr.Error())
		}
		if apierrors.IsNotFound(err) {
			obj := &unstructured.Unstructured{}
			if err := obj.UnmarshalJSON(body); err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			obj.SetNamespace(req.namespace)
			return s.store.Create(gr, obj)
		}
		contentType = string(types.MergePatchType)
	}
	if err != nil {
		return nil, err
	}
	original, err := current.MarshalJSON()
	if err != nil {
		return nil, errors.Wrap(err, "encoding the stored object")
	}
	var patched []byte
	switch contentType {
	case string(types.JSONPatchType):
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(body); err == nil {
			patched, err = p.Apply(original)
		}
	case string(types.MergePatchType):
		patched, err = jsonpatch.MergePatch(original, body)
	case string(types.StrategicMergePatchType):
		patched, err = strategicMerge(req, original, body)
	default:
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
			Message: "the patch's content type " + contentType + " is not one of " + strings.Join([]string{
				string(types.JSONPatchType), string(types.MergePatchType), string(types.StrategicMergePatchType), string(types.ApplyPatchType)}, ", "),
		}}
	}
	if err != nil {
		return nil, apierrors.NewBadRequest("the patch does not apply: " + err.Error())
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(patched); err != nil {
		return nil, apierrors.NewBadRequest("the patched object: " + err.Error())
	}
	if obj.GetName() != req.name || obj.GetNamespace() != req.namespace {
		return nil, apierrors.NewBadRequest("a patch may not change an object's name or namespace")
	}
	return s.store.Update(gr, s.scoped(req, current, obj))
}

// strategicMerge applies a strategic merge patch with the kind's Go type (client-go's), which
// says how its lists merge.
func strategicMerge(req *request, original, patch []byte) ([]byte, error) {
	typed, err := clientgoscheme.Scheme.New(req.GroupVersion().WithKind(req.Kind))
	if err != nil {
		return jsonpatch.MergePatch(original, patch)
	}
	return strategicpatch.StrategicMergePatch(original, patch, typed)
}

// evict deletes a Pod through its eviction subresource, as a drain asks (PodDisruptionBudgets
// are not weighed: no Pod of a simulated cluster runs anything).
func (s *Server) evict(w http.ResponseWriter, req *request) {
	if _, err := s.store.Delete(req.GroupResource(), req.namespace, req.name); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
}

// readObject reads a request's object, in the path's namespace, of the path's kind.
func readObject(r *http.Request, req *request) (*unstructured.Unstructured, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return nil, apierrors.NewBadRequest("reading the object: " + err.Error())
	}
	obj, err := decode(body)
	if err != nil {
		return nil, err
	}
	if ns := obj.GetNamespace(); ns != "" && ns != req.namespace {
		return nil, apierrors.NewBadRequest("metadata.namespace " + ns + " does not match the request's namespace " + req.namespace)
	}
	if obj.GetKind() != req.Kind {
		return nil, apierrors.NewBadRequest("kind " + obj.GetKind() + " is not " + req.Kind + " (the path's)")
	}
	obj.SetNamespace(req.namespace)
	return obj, nil
}

// decoder reads Kubernetes' own kinds in any of their encodings (client-go sends protobuf for
// them), as typed objects.
var decoder = serializer.NewCodecFactory(clientgoscheme.Scheme).UniversalDeserializer()

// decode reads an object sent as JSON, YAML or protobuf.
func decode(body []byte) (*unstructured.Unstructured, error) {
	if typed, gvk, err := decoder.Decode(body, nil, nil); err == nil {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
		if err != nil {
			return nil, apierrors.NewBadRequest("the object: " + err.Error())
		}
		obj := &unstructured.Unstructured{Object: content}
		obj.SetGroupVersionKind(*gvk)
		return obj, nil
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(body); err != nil {
		return nil, apierrors.NewBadRequest("the object is not a Kubernetes object in JSON, YAML or protobuf: " + err.Error())
	}
	return obj, nil
}

// selector parses a request's label and field selectors; fields are matched for equality only.
func selector(labelSelector, fieldSelector string) (Selector, error) {
	var sel Selector
	if labelSelector != "" {
		l, err := labels.Parse(labelSelector)
		if err != nil {
			return sel, apierrors.NewBadRequest("labelSelector: " + err.Error())
		}
		sel.Labels = l
	}
	if fieldSelector != "" {
		f, err := fields.ParseSelector(fieldSelector)
		if err != nil {
			return sel, apierrors.NewBadRequest("fieldSelector: " + err.Error())
		}
		sel.Fields = map[string]string{}
		for _, req := range f.Requirements() {
			if req.Operator != "=" && req.Operator != "==" {
				return sel, apierrors.NewBadRequest("fieldSelector: only equality is served, not " + string(req.Operator))
			}
			sel.Fields[req.Field] = req.Value
		}
	}
	return sel, nil
}

// groups is the /apis discovery document.
func (s *Server) groups() *metav1.APIGroupList {
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	for _, r := range Resources {
		if r.Group == "" || slices.ContainsFunc(list.Groups, func(g metav1.APIGroup) bool { return g.Name == r.Group }) {
			continue
		}
		gv := metav1.GroupVersionForDiscovery{GroupVersion: r.GroupVersion().String(), Version: r.Version}
		list.Groups = append(list.Groups, metav1.APIGroup{Name: r.Group, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv})
	}
	return list
}

// resourceList is a group version's discovery document; nil when the server has no such group
// version.
func (s *Server) resourceList(gv schema.GroupVersion) *metav1.APIResourceList {
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	verbs := metav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}
	for _, r := range Resources {
		if r.GroupVersion() != gv {
			continue
		}
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: r.Resource, SingularName: strings.ToLower(r.Kind), Namespaced: r.Namespaced, Kind: r.Kind, Verbs: verbs,
		})
		for _, sub := range r.Subresources {
			v := metav1.Verbs{"get", "patch", "update"}
			if sub == "eviction" || sub == "portforward" {
				v = metav1.Verbs{"create"}
			}
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: r.Resource + "/" + sub, Namespaced: r.Namespaced, Kind: r.Kind, Verbs: v})
		}
	}
	if len(list.APIResources) == 0 {
		return nil
	}
	return list
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers with an error's metav1.Status: an API error's own, or 500.
func writeError(w http.ResponseWriter, err error) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		status = apierrors.NewInternalError(err)
	}
	st := status.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	code := int(st.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	writeJSON(w, code, &st)
}
