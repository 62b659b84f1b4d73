package workloadapi

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
)

// historySize is how many changes a Store keeps for watches that start at a resourceVersion: a
// watch from an older one is told its version expired (410), and its client lists again, as
// with kube-apiserver's watch cache.
const historySize = 1024

// watchBuffer is how many events a watcher may be behind before it is closed: its client
// watches again from the last version it saw, as kube-apiserver does with slow watchers.
const watchBuffer = 256

// Store holds the objects of one workload cluster. Every change takes the next resourceVersion
// of the cluster (one counter for all kinds, as etcd's revision), and is sent to the watchers of
// its kind. Objects go in and come out as copies: callers never share them with the Store.
type Store struct {
	mu       sync.Mutex
	rv       uint64
	objects  map[schema.GroupResource]map[objectKey]*unstructured.Unstructured
	history  []Event
	watchers map[*Watcher]struct{}
	// now is the clock of creationTimestamp and deletionTimestamp.
	now func() time.Time
}

type objectKey struct{ namespace, name string }

// Event is a change of one object, as a watch sends it.
type Event struct {
	Type     watch.EventType
	Resource schema.GroupResource
	Object   *unstructured.Unstructured
	rv       uint64
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{objects: map[schema.GroupResource]map[objectKey]*unstructured.Unstructured{}, watchers: map[*Watcher]struct{}{}, now: time.Now}
}

// ResourceVersion is the Store's current version: a list's, and where a watch started after it
// begins.
func (s *Store) ResourceVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strconv.FormatUint(s.rv, 10)
}

// Get returns a copy of an object; a NotFound API error when there is none.
func (s *Store) Get(gr schema.GroupResource, namespace, name string) (*unstructured.Unstructured, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[gr][objectKey{namespace, name}]
	if !ok {
		return nil, apierrors.NewNotFound(gr, name)
	}
	return o.DeepCopy(), nil
}

// List returns copies of the objects of a kind in a namespace ("" for every namespace) that
// match the selectors, and the version the list is at.
func (s *Store) List(gr schema.GroupResource, namespace string, sel Selector) ([]*unstructured.Unstructured, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objectsOf(gr, namespace, sel), strconv.FormatUint(s.rv, 10)
}

// Create stores a new object: its uid, resourceVersion, creationTimestamp and generation are
// the Store's. AlreadyExists when an object of that name is there.
func (s *Store) Create(gr schema.GroupResource, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if obj.GetName() == "" {
		return nil, apierrors.NewBadRequest("metadata.name: Required value")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := objectKey{obj.GetNamespace(), obj.GetName()}
	if _, ok := s.objects[gr][k]; ok {
		return nil, apierrors.NewAlreadyExists(gr, obj.GetName())
	}
	o := obj.DeepCopy()
	o.SetUID(uuid.NewUUID())
	o.SetCreationTimestamp(metav1.NewTime(s.now().Truncate(time.Second)))
	o.SetGeneration(1)
	o.SetDeletionTimestamp(nil)
	s.store(gr, k, o, watch.Added)
	return o.DeepCopy(), nil
}

// Update replaces an object. A resourceVersion in obj must be the stored one (Conflict
// otherwise); none replaces whatever is stored. What the server owns (uid, creationTimestamp,
// deletionTimestamp) is kept; the generation grows when the spec changes. An object being
// deleted whose last finalizer goes is deleted.
func (s *Store) Update(gr schema.GroupResource, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := objectKey{obj.GetNamespace(), obj.GetName()}
	old, ok := s.objects[gr][k]
	if !ok {
		return nil, apierrors.NewNotFound(gr, obj.GetName())
	}
	if rv := obj.GetResourceVersion(); rv != "" && rv != old.GetResourceVersion() {
		return nil, apierrors.NewConflict(gr, obj.GetName(),
			errors.Errorf("the object has been modified; please apply your changes to the latest version (resourceVersion %s, not %s) and try again", old.GetResourceVersion(), rv))
	}
	o := obj.DeepCopy()
	o.SetUID(old.GetUID())
	o.SetCreationTimestamp(old.GetCreationTimestamp())
	o.SetDeletionTimestamp(old.GetDeletionTimestamp())
	o.SetGeneration(old.GetGeneration())
	if !equalField(old, o, "spec") {
		o.SetGeneration(old.GetGeneration() + 1)
	}
	if o.GetDeletionTimestamp() != nil && len(o.GetFinalizers()) == 0 {
		delete(s.objects[gr], k)
		s.store(gr, k, o, watch.Deleted)
		return o.DeepCopy(), nil
	}
	s.store(gr, k, o, watch.Modified)
	return o.DeepCopy(), nil
}

// Delete deletes an object, or marks it deleted while finalizers hold it. The object is
// returned as it was last stored. NotFound when there is none.
func (s *Store) Delete(gr schema.GroupResource, namespace, name string) (*unstructured.Unstructured, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := objectKey{namespace, name}
	old, ok := s.objects[gr][k]
	if !ok {
		return nil, apierrors.NewNotFound(gr, name)
	}
	o := old.DeepCopy()
	if len(o.GetFinalizers()) > 0 {
		if o.GetDeletionTimestamp() == nil {
			now := metav1.NewTime(s.now().Truncate(time.Second))
			o.SetDeletionTimestamp(&now)
			s.store(gr, k, o, watch.Modified)
		}
		return o.DeepCopy(), nil
	}
	delete(s.objects[gr], k)
	s.store(gr, k, o, watch.Deleted)
	return o.DeepCopy(), nil
}

// store records a change at the next version and sends it to the watchers; a deleted object
// is not put back. Called with mu held.
func (s *Store) store(gr schema.GroupResource, k objectKey, o *unstructured.Unstructured, t watch.EventType) {
	s.rv++
	o.SetResourceVersion(strconv.FormatUint(s.rv, 10))
	if t != watch.Deleted {
		if s.objects[gr] == nil {
			s.objects[gr] = map[objectKey]*unstructured.Unstructured{}
		}
		s.objects[gr][k] = o
	}
	e := Event{Type: t, Resource: gr, Object: o, rv: s.rv}
	s.history = append(s.history, e)
	if len(s.history) > historySize {
		s.history = s.history[len(s.history)-historySize:]
	}
	for w := range s.watchers {
		w.send(e)
	}
}

// Watch starts a watch of a kind in a namespace ("" for all) from a version: "" or "0" start
// with an ADDED event per object there now; a version sends the changes after it, or is
// Expired (410) when the Store no longer has them. With initialEvents, the objects there now
// are sent as ADDED events, then a BOOKMARK marking their end (the watch-list protocol).
func (s *Store) Watch(gr schema.GroupResource, namespace, from string, sel Selector, initialEvents bool) (*Watcher, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &Watcher{store: s, resource: gr, namespace: namespace, selector: sel, ch: make(chan Event, watchBuffer), done: make(chan struct{})}
	var backlog []Event
	switch {
	case from == "" || from == "0" || initialEvents:
		for _, o := range s.objectsOf(gr, namespace, sel) {
			backlog = append(backlog, Event{Type: watch.Added, Resource: gr, Object: o, rv: s.rv})
		}
		if initialEvents {
			mark := &unstructured.Unstructured{}
			mark.SetResourceVersion(strconv.FormatUint(s.rv, 10))
			mark.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
			backlog = append(backlog, Event{Type: watch.Bookmark, Resource: gr, Object: mark, rv: s.rv})
		}
	default:
		rv, err := strconv.ParseUint(from, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest("resourceVersion " + from + ": not a version of this server")
		}
		if rv > s.rv {
			return nil, apierrors.NewTimeoutError("resourceVersion "+from+" is newer than the server's "+strconv.FormatUint(s.rv, 10), 1)
		}
		if len(s.history) > 0 && s.history[0].rv > rv+1 || len(s.history) == 0 && rv < s.rv {
			return nil, apierrors.NewResourceExpired("too old resource version: " + from)
		}
		for _, e := range s.history {
			if e.rv > rv && w.wants(e) {
				backlog = append(backlog, e)
			}
		}
	}
	if len(backlog) > watchBuffer {
		w.ch = make(chan Event, len(backlog)+watchBuffer)
	}
	for _, e := range backlog {
		w.ch <- e
	}
	s.watchers[w] = struct{}{}
	return w, nil
}

// objectsOf returns copies of the objects a watch or list sees. Called with mu held.
func (s *Store) objectsOf(gr schema.GroupResource, namespace string, sel Selector) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for k, o := range s.objects[gr] {
		if (namespace == "" || k.namespace == namespace) && sel.Matches(o) {
			out = append(out, o.DeepCopy())
		}
	}
	sortObjects(out)
	return out
}

// Watcher receives the changes of one watch until Stop, or until it fell too far behind: then
// its channel closes and its client watches again from the last version it saw.
type Watcher struct {
	store     *Store
	resource  schema.GroupResource
	namespace string
	selector  Selector
	ch        chan Event
	done      chan struct{}
	stopOnce  sync.Once
}

// Events is the watch's stream; closed when the watch ends.
func (w *Watcher) Events() <-chan Event { return w.ch }

// Stop ends the watch.
func (w *Watcher) Stop() {
	w.store.mu.Lock()
	defer w.store.mu.Unlock()
	w.end()
}

// end closes the watch. Called with the store's mu held.
func (w *Watcher) end() {
	w.stopOnce.Do(func() {
		delete(w.store.watchers, w)
		close(w.done)
		close(w.ch)
	})
}

func (w *Watcher) wants(e Event) bool {
	return e.Resource == w.resource && (w.namespace == "" || e.Object.GetNamespace() == w.namespace) && w.selector.Matches(e.Object)
}

// send gives the watcher an event it wants, without waiting: a watcher too far behind is ended.
// Called with the store's mu held.
func (w *Watcher) send(e Event) {
	if !w.wants(e) {
		return
	}
	select {
	case w.ch <- e:
	default:
		w.end()
	}
}

// Selector chooses objects by labels and by fields (metadata.name, metadata.namespace and, for
// Pods, spec.nodeName, the fields Cluster API's drain and kubectl select on).
type Selector struct {
	Labels labels.Selector
	Fields map[string]string
}

// Matches reports whether an object is selected; the zero Selector selects everything.
func (sel Selector) Matches(o *unstructured.Unstructured) bool {
	if sel.Labels != nil && !sel.Labels.Matches(labels.Set(o.GetLabels())) {
		return false
	}
	for f, want := range sel.Fields {
		var got string
		switch f {
		case "metadata.name":
			got = o.GetName()
		case "metadata.namespace":
			got = o.GetNamespace()
		default:
			got, _, _ = unstructured.NestedString(o.Object, splitField(f)...)
		}
		if got != want {
			return false
		}
	}
	return true
}

// sortObjects orders objects by namespace and name, as kube-apiserver lists them.
func sortObjects(objs []*unstructured.Unstructured) {
	slices.SortFunc(objs, func(a, b *unstructured.Unstructured) int {
		return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	})
}

// equalField reports whether two objects have the same value at a top-level field.
func equalField(a, b *unstructured.Unstructured, field string) bool {
	return equality.Semantic.DeepEqual(a.Object[field], b.Object[field])
}

// splitField splits a field selector's path (spec.nodeName) into its keys.
func splitField(f string) []string { return strings.Split(f, ".") }
