package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientgo "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

// The owners of the tests: two management namespaces of one management cluster.
const (
	ownerA = "3f2a9c01d2e4a6b7/team-a"
	ownerB = "3f2a9c01d2e4a6b7/team-b"
)

// clientset is a fake infrastructure cluster that gives every object it creates a UID, as a
// real one does.
func clientset() *fake.Clientset {
	cs := fake.NewClientset()
	made := 0
	cs.PrependReactor("create", "*", func(a k8stesting.Action) (bool, kruntime.Object, error) {
		if c, ok := a.(k8stesting.CreateAction); ok {
			if o, ok := c.GetObject().(metav1.Object); ok && o.GetUID() == "" {
				made++
				o.SetUID(types.UID(fmt.Sprintf("uid-%d", made)))
			}
		}
		return false, nil, nil
	})
	return cs
}

// ownedEngine is an engine of the namespace "pods" acting for an owner.
func ownedEngine(cs clientgo.Interface, owner string, opts ...Option) *Runtime {
	return newRuntime(nil, cs, "pods", append([]Option{WithOwner(owner)}, opts...)...)
}

// clusterLabels are the labels the node layer gives a cluster's objects.
var clusterLabels = map[string]string{"dockyard.x-k8s.io/cluster": "team-a/dev", "io.x-k8s.kind.role": "control-plane"}

// earlierPod is a container's Pod as an engine without owners made it (an earlier release, or
// anyone who copies its labels): Dockyard's labels and annotations, no owner.
func earlierPod(name string, labels map[string]string) *corev1.Pod {
	spec, _ := json.Marshal(container.ContainerSpec{Name: name, Image: "kindest/node:v1.34.0", Labels: labels})
	l := objectLabels("container", labels)
	l[podLabel] = podSelectorValue(name)
	a := annotated(labels)
	a[specAnnotation] = string(spec)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "pods", UID: types.UID("earlier-" + name), Labels: l, Annotations: a},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: mainContainer, Image: "kindest/node:v1.34.0"}}},
	}
}

// claimed makes the engine claim its namespace, as its first creation does.
func claimed(t *testing.T, r *Runtime) {
	t.Helper()
	if err := r.CreateVolume(context.Background(), container.VolumeSpec{Name: "first"}); err != nil {
		t.Fatal(err)
	}
}

// Two management namespaces whose kubeconfigs name one namespace of an infrastructure cluster:
// the first to make something there holds it, and every creation of the second is refused,
// naming the holder and the field to change, with nothing made. The second sees nothing of
// the first's. Once the holder's claim is gone, the second may claim it: a claim found taken
// is read again, not remembered as a refusal.
func TestASecondOwnerIsRefusedTheNamespace(t *testing.T) {
	ctx := context.Background()
	cs := clientset()
	a, b := ownedEngine(cs, ownerA), ownedEngine(cs, ownerB)
	if err := a.CreateNetwork(ctx, container.NetworkSpec{Name: "a-net", Labels: clusterLabels}); err != nil {
		t.Fatal(err)
	}
	before := objectCount(t, cs)
	for what, create := range map[string]func() error{
		"a network": func() error { return b.CreateNetwork(ctx, container.NetworkSpec{Name: "b-net"}) },
		"a volume":  func() error { return b.CreateVolume(ctx, container.VolumeSpec{Name: "b-var"}) },
		"a container": func() error {
			return b.CreateContainer(ctx, container.ContainerSpec{Name: "b-node", Image: "kindest/node:v1.34.0"})
		},
		"a front": func() error { _, err := b.EnsureFront(ctx, container.FrontSpec{Name: "b-lb", Port: 6443}); return err },
	} {
		err := create()
		if !policy.IsRefused(err) || !strings.Contains(err.Error(), ownerA) || !strings.Contains(err.Error(), "spec.infrastructure.kubernetes.namespace") {
			t.Errorf("%s of a second management namespace: %v; want a refusal naming %s and spec.infrastructure.kubernetes.namespace", what, err, ownerA)
		}
	}
	if after := objectCount(t, cs); after != before {
		t.Errorf("the second management namespace's refused calls made %d objects", after-before)
	}
	if nets, err := b.ListNetworks(ctx, nil); err != nil || len(nets) != 0 {
		t.Errorf("the second management namespace lists %v (%v), want none of the first's networks", nets, err)
	}
	if _, err := b.InspectNetwork(ctx, "a-net"); !container.IsNotFound(err) {
		t.Errorf("the second management namespace inspects the first's network: %v, want ErrNotFound", err)
	}

	if err := cs.CoreV1().ConfigMaps("pods").Delete(ctx, "dockyard-claim", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("releasing the first claim: %v", err)
	}
	if err := b.CreateVolume(ctx, container.VolumeSpec{Name: "b-var"}); err != nil {
		t.Errorf("the namespace released, the second management namespace still may not make anything: %v", err)
	}
	if err := ownedEngine(cs, ownerA).CreateVolume(ctx, container.VolumeSpec{Name: "a-var"}); !policy.IsRefused(err) {
		t.Errorf("a new engine of the first management namespace once the second holds the namespace: %v, want a refusal", err)
	}
}

// objectCount counts the Pods, Services, NetworkPolicies and ConfigMaps of the namespace.
func objectCount(t *testing.T, cs clientgo.Interface) int {
	t.Helper()
	ctx := context.Background()
	pods, err1 := cs.CoreV1().Pods("pods").List(ctx, metav1.ListOptions{})
	svcs, err2 := cs.CoreV1().Services("pods").List(ctx, metav1.ListOptions{})
	nps, err3 := cs.NetworkingV1().NetworkPolicies("pods").List(ctx, metav1.ListOptions{})
	cms, err4 := cs.CoreV1().ConfigMaps("pods").List(ctx, metav1.ListOptions{})
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return len(pods.Items) + len(svcs.Items) + len(nps.Items) + len(cms.Items)
}

// An engine whose credentials may not create ConfigMaps cannot claim its namespace, and says
// which right it lacks; it makes nothing.
func TestClaimingWithoutTheRightSaysWhichRight(t *testing.T) {
	ctx := context.Background()
	cs := clientset()
	cs.PrependReactor("create", "configmaps", func(k8stesting.Action) (bool, kruntime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "dockyard-claim", errors.New("RBAC: access denied"))
	})
	r := ownedEngine(cs, ownerA)
	err := r.CreateNetwork(ctx, container.NetworkSpec{Name: "dev"})
	if err == nil || !strings.Contains(err.Error(), "create") || !strings.Contains(err.Error(), "configmaps") || !strings.Contains(err.Error(), "pods") {
		t.Errorf("claiming without the right to create ConfigMaps: %v; want the verb, the resource and the namespace", err)
	}
	if n := objectCount(t, cs); n != 0 {
		t.Errorf("%d objects made without a claim", n)
	}
}

// A Service by the name the engine would give a front or a container's Service is not taken
// when it is not the engine's: another management namespace's, someone's own, or one labelled
// like the engine's without its owner after the namespace was claimed. Making the front says
// so, naming the Service; it is not found, and removing the front leaves it.
func TestAServiceNamedLikeTheEnginesIsNotAdopted(t *testing.T) {
	ctx := context.Background()
	front := container.FrontSpec{Name: "team-a.dev-lb", Labels: clusterLabels, Select: clusterLabels, Port: 6443}
	theirs := objectLabels("front", clusterLabels)
	theirs["dockyard.x-k8s.io/owner"] = "someone-else"
	for what, labels := range map[string]map[string]string{
		"another owner's":                   theirs,
		"someone's own":                     {"app": "theirs"},
		"labelled as a front, but no owner": objectLabels("front", clusterLabels),
	} {
		t.Run(what, func(t *testing.T) {
			cs := clientset()
			r := ownedEngine(cs, ownerA)
			claimed(t, r)
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: serviceName(front.Name), Namespace: "pods", Labels: labels,
					Annotations: map[string]string{frontNameAnnotation: front.Name, labelsAnnotation: annotated(clusterLabels)[labelsAnnotation]}},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.0.0.9", Selector: map[string]string{"app": "theirs"},
					Ports: []corev1.ServicePort{{Port: 6443}}},
			}
			if _, err := cs.CoreV1().Services("pods").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			f, err := r.EnsureFront(ctx, front)
			want := "Service " + svc.Name + " exists in namespace pods and is not Dockyard's for " + ownerA
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("making the front: %+v %v; want %q", f, err, want)
			}
			if f, err := r.InspectFront(ctx, front.Name); !container.IsNotFound(err) {
				t.Errorf("inspecting the front: %+v %v; want ErrNotFound", f, err)
			}
			if err := r.RemoveFront(ctx, front.Name); err != nil {
				t.Errorf("removing the front: %v", err)
			}
			if _, err := cs.CoreV1().Services("pods").Get(ctx, svc.Name, metav1.GetOptions{}); err != nil {
				t.Errorf("removing the front removed a Service not the engine's: %v", err)
			}
		})
	}

	// A container's Service: the engine publishes its ports, or says the name is taken.
	cs := clientset()
	r := ownedEngine(cs, ownerA)
	spec := container.ContainerSpec{Name: "team-a.dev-cp", Image: "kindest/node:v1.34.0", Labels: clusterLabels,
		Ports: []container.PortMapping{{ContainerPort: 6443, HostIP: "127.0.0.1"}}}
	if err := r.CreateContainer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: serviceName(spec.Name), Namespace: "pods", Labels: objectLabels("container", clusterLabels)},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "theirs"}, Ports: []corev1.ServicePort{{Port: 6443}}}}
	if _, err := cs.CoreV1().Services("pods").Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods("pods").Get(ctx, spec.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = r.ensureService(ctx, pod, spec)
	if want := "Service " + foreign.Name + " exists in namespace pods and is not Dockyard's for " + ownerA; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("publishing the container's ports: %v; want %q", err, want)
	}
	if c, err := r.InspectContainer(ctx, spec.Name); err != nil || len(c.Ports) != 0 {
		t.Errorf("the container %+v (%v) shows the ports of a Service not the engine's", c, err)
	}
}

// A Pod labelled like the engine's, but not made by it for its owner (after the namespace was
// claimed), is none of its containers: not listed, not found, not started (nor made again from
// the spec it keeps), not attached, no logs, no exec, and removing it leaves it; its events are
// not the engine's either.
func TestAPodLabelledLikeTheEnginesIsNotItsContainer(t *testing.T) {
	ctx := context.Background()
	cs := clientset()
	r := ownedEngine(cs, ownerA)
	if err := r.CreateNetwork(ctx, container.NetworkSpec{Name: "dev", Labels: clusterLabels}); err != nil {
		t.Fatal(err)
	}
	foreign := earlierPod("team-a.dev-cp", clusterLabels)
	if _, err := cs.CoreV1().Pods("pods").Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if cs, err := r.ListContainers(ctx, clusterLabels); err != nil || len(cs) != 0 {
		t.Errorf("listing the containers: %+v (%v), want none", cs, err)
	}
	if c, err := r.InspectContainer(ctx, foreign.Name); !container.IsNotFound(err) {
		t.Errorf("inspecting the Pod: %+v %v, want ErrNotFound", c, err)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := r.StartContainer(short, foreign.Name); !container.IsNotFound(err) {
		t.Errorf("starting the Pod: %v, want ErrNotFound", err)
	}
	if err := r.ConnectNetwork(ctx, "dev", foreign.Name); !container.IsNotFound(err) {
		t.Errorf("attaching the Pod to a network: %v, want ErrNotFound", err)
	}
	if logs, err := r.ContainerLogs(ctx, foreign.Name, 10); !container.IsNotFound(err) {
		t.Errorf("the Pod's logs: %q %v, want ErrNotFound", logs, err)
	}
	if _, err := r.Exec(ctx, foreign.Name, container.ExecOptions{Cmd: []string{"true"}}); !container.IsNotFound(err) {
		t.Errorf("exec in the Pod: %v, want ErrNotFound", err)
	}
	if err := r.RemoveContainer(ctx, foreign.Name); err != nil {
		t.Errorf("removing the Pod: %v, want nothing done", err)
	}
	if p, err := cs.CoreV1().Pods("pods").Get(ctx, foreign.Name, metav1.GetOptions{}); err != nil || p.UID != foreign.UID || len(p.Labels) != len(foreign.Labels) {
		t.Errorf("the Pod not the engine's was removed, changed or made again: %v", err)
	}
	err := r.CreateContainer(ctx, container.ContainerSpec{Name: foreign.Name, Image: "kindest/node:v1.34.0", Labels: clusterLabels})
	if want := "Pod " + foreign.Name + " exists in namespace pods and is not Dockyard's for " + ownerA; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("creating a container by its name: %v, want %q", err, want)
	}
}

// Events are the engine's Pods' only: a Pod labelled like its own that starts is not seen, one
// of its own that starts after it is the first event.
func TestEventsAreTheOwnersPodsOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs := clientset()
	watching := make(chan struct{}, 2)
	cs.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		watching <- struct{}{}
		return false, nil, nil
	})
	r := ownedEngine(cs, ownerA)
	own := container.ContainerSpec{Name: "team-a.dev-md-0", Image: "kindest/node:v1.34.0", Labels: clusterLabels}
	if err := r.CreateContainer(ctx, own); err != nil {
		t.Fatal(err)
	}
	events, errs := r.Events(ctx, clusterLabels)
	select {
	case <-watching:
	case err := <-errs:
		t.Fatal(err)
	}
	running := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: mainContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
	}}}
	foreign := earlierPod("team-a.dev-cp", clusterLabels)
	foreign.Status = running
	if _, err := cs.CoreV1().Pods("pods").Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods("pods").Get(ctx, own.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = running
	if _, err := cs.CoreV1().Pods("pods").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-events:
		if e.Name != own.Name || e.Action != "start" {
			t.Errorf("first event %+v, want the start of %s", e, own.Name)
		}
	case err := <-errs:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("no event")
	}
}

// A NetworkPolicy that looks like one of the engine's networks (its labels, and an annotation
// claiming the cluster's labels) without the engine's owner is no network of the engine's: not
// listed, not found, not joined, not removed, and creating the network by its name says so.
func TestANetworkPolicyWithForgedLabelsIsNotTaken(t *testing.T) {
	ctx := context.Background()
	cs := clientset()
	r := ownedEngine(cs, ownerA)
	claimed(t, r)
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "dev", Namespace: "pods",
		Labels: objectLabels("network", clusterLabels), Annotations: annotated(clusterLabels)}}
	if _, err := cs.NetworkingV1().NetworkPolicies("pods").Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if nets, err := r.ListNetworks(ctx, clusterLabels); err != nil || len(nets) != 0 {
		t.Errorf("listing the networks: %+v (%v), want none", nets, err)
	}
	if n, err := r.InspectNetwork(ctx, "dev"); !container.IsNotFound(err) {
		t.Errorf("inspecting the network: %+v %v, want ErrNotFound", n, err)
	}
	err := r.CreateContainer(ctx, container.ContainerSpec{Name: "team-a.dev-cp", Image: "kindest/node:v1.34.0", Network: "dev"})
	if !container.IsNotFound(err) {
		t.Errorf("a container on the network: %v, want ErrNotFound", err)
	}
	err = r.CreateNetwork(ctx, container.NetworkSpec{Name: "dev", Labels: clusterLabels})
	if want := "NetworkPolicy dev exists in namespace pods and is not Dockyard's for " + ownerA; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("creating the network: %v, want %q", err, want)
	}
	if err := r.RemoveNetwork(ctx, "dev"); err != nil {
		t.Errorf("removing the network: %v", err)
	}
	if _, err := cs.NetworkingV1().NetworkPolicies("pods").Get(ctx, "dev", metav1.GetOptions{}); err != nil {
		t.Errorf("removing the network removed a NetworkPolicy not the engine's: %v", err)
	}

	// The engine's own network whose annotation was changed to claim another cluster's labels
	// is not that cluster's.
	if err := r.CreateNetwork(ctx, container.NetworkSpec{Name: "own", Labels: map[string]string{"not a label key": "a"}}); err != nil {
		t.Fatal(err)
	}
	own, err := cs.NetworkingV1().NetworkPolicies("pods").Get(ctx, "own", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	own.Annotations = annotated(map[string]string{"not a label key": "b", "dockyard.x-k8s.io/cluster": "team-b/prod"})
	if _, err := cs.NetworkingV1().NetworkPolicies("pods").Update(ctx, own, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if nets, err := r.ListNetworks(ctx, map[string]string{"not a label key": "b"}); err != nil || len(nets) != 0 {
		t.Errorf("a network whose annotation claims labels it does not carry is listed: %+v (%v)", nets, err)
	}
}

// An ended Pod is made again from the spec it keeps only once the owner's check allows that
// spec: a spec edited to mount the host's /etc is refused, the Pod left as it is and nothing
// made; an unchanged one is made again, with the owner's label, the check having seen its
// image, mounts and ports.
func TestAnEndedPodIsNotMadeAgainFromAnEditedSpec(t *testing.T) {
	ctx := context.Background()
	cs := clientset()
	var checked []container.ContainerSpec
	check := func(s container.ContainerSpec) error {
		checked = append(checked, s)
		for _, m := range s.Mounts {
			if m.Type == container.MountBind && m.Source == "/etc" {
				return policy.Refusedf("host path /etc may not be mounted (%s)", policy.HostPathsFlag)
			}
		}
		return nil
	}
	r := ownedEngine(cs, ownerA, WithSpecCheck(check))
	spec := container.ContainerSpec{Name: "team-a.dev-md-0", Image: "kindest/node:v1.34.0", Labels: clusterLabels,
		Mounts: []container.Mount{{Type: container.MountTmpfs, Target: "/run"}},
		Ports:  []container.PortMapping{{ContainerPort: 80, HostIP: "127.0.0.1"}}}
	ended := func(name string, edit func(*container.ContainerSpec)) *corev1.Pod {
		t.Helper()
		pod, err := cs.CoreV1().Pods("pods").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			var kept container.ContainerSpec
			if err := json.Unmarshal([]byte(pod.Annotations[specAnnotation]), &kept); err != nil {
				t.Fatal(err)
			}
			edit(&kept)
			b, _ := json.Marshal(kept)
			pod.Annotations[specAnnotation] = string(b)
			if pod, err = cs.CoreV1().Pods("pods").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		pod.Status.Phase = corev1.PodFailed
		if pod, err = cs.CoreV1().Pods("pods").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return pod
	}
	if err := r.CreateContainer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	before := ended(spec.Name, func(s *container.ContainerSpec) {
		s.Mounts = append(s.Mounts, container.Mount{Type: container.MountBind, Source: "/etc", Target: "/host/etc"})
	})
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := r.StartContainer(short, spec.Name); !policy.IsRefused(err) {
		t.Errorf("starting an ended Pod whose spec mounts /etc: %v, want a refusal", err)
	}
	after, err := cs.CoreV1().Pods("pods").Get(ctx, spec.Name, metav1.GetOptions{})
	if err != nil || after.UID != before.UID {
		t.Errorf("the Pod of a refused spec was removed or made again (%v)", err)
	}
	for _, v := range after.Spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("the Pod mounts the host's %s", v.HostPath.Path)
		}
	}

	other := spec
	other.Name = "team-a.dev-md-1"
	if err := r.CreateContainer(ctx, other); err != nil {
		t.Fatal(err)
	}
	before = ended(other.Name, nil)
	checked = nil
	short2, cancel2 := context.WithTimeout(ctx, time.Second)
	defer cancel2()
	if err := r.StartContainer(short2, other.Name); err != nil {
		t.Errorf("starting an ended Pod of an unchanged spec: %v", err)
	}
	after, err = cs.CoreV1().Pods("pods").Get(ctx, other.Name, metav1.GetOptions{})
	if err != nil || after.UID == before.UID || after.Labels["dockyard.x-k8s.io/owner"] == "" || after.Labels["dockyard.x-k8s.io/owner"] != before.Labels["dockyard.x-k8s.io/owner"] {
		t.Errorf("the Pod made again: %v (%v); want a new Pod with the owner's label %q", after.Labels, err, before.Labels["dockyard.x-k8s.io/owner"])
	}
	if len(checked) != 1 || checked[0].Image != other.Image || len(checked[0].Mounts) != 1 || len(checked[0].Ports) != 1 {
		t.Errorf("the check saw %+v, want the kept spec once", checked)
	}
}

// Objects an engine without owners made (an earlier release) before anyone claimed the
// namespace are the first claimant's, in that engine and in every later engine of the same
// owner; not another owner's, and nothing labelled so after the claim.
func TestObjectsOfEarlierReleasesAreTheFirstClaimants(t *testing.T) {
	ctx := context.Background()
	cs := clientset()
	made := []kruntime.Object{
		earlierPod("team-a.dev-cp", clusterLabels),
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team-a.dev", Namespace: "pods", UID: "earlier-net", Labels: objectLabels("network", clusterLabels), Annotations: annotated(clusterLabels)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: volumeObject("team-a.dev-cp"), Namespace: "pods", UID: "earlier-vol", Labels: objectLabels("volume", clusterLabels), Annotations: annotated(clusterLabels)}},
	}
	for _, o := range made {
		if err := cs.Tracker().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	sees := func(r *Runtime) (int, int, int) {
		t.Helper()
		pods, err1 := r.ListContainers(ctx, clusterLabels)
		nets, err2 := r.ListNetworks(ctx, clusterLabels)
		vols, err3 := r.ListVolumes(ctx, clusterLabels)
		for _, err := range []error{err1, err2, err3} {
			if err != nil {
				t.Fatal(err)
			}
		}
		return len(pods), len(nets), len(vols)
	}
	a := ownedEngine(cs, ownerA)
	if p, n, v := sees(a); p != 1 || n != 1 || v != 1 {
		t.Errorf("the first claimant sees %d containers, %d networks, %d volumes of an earlier release; want 1 each", p, n, v)
	}
	if _, err := a.InspectContainer(ctx, "team-a.dev-cp"); err != nil {
		t.Errorf("the first claimant inspects its container of an earlier release: %v", err)
	}
	if p, n, v := sees(ownedEngine(cs, ownerA)); p != 1 || n != 1 || v != 1 {
		t.Errorf("another engine of the first claimant (a restarted manager) sees %d containers, %d networks, %d volumes; want 1 each", p, n, v)
	}
	if p, n, v := sees(ownedEngine(cs, ownerB)); p != 0 || n != 0 || v != 0 {
		t.Errorf("another owner sees %d containers, %d networks, %d volumes; want none", p, n, v)
	}
	if _, err := cs.CoreV1().Pods("pods").Create(ctx, earlierPod("team-a.dev-md-0", clusterLabels), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p, _, _ := sees(ownedEngine(cs, ownerA)); p != 1 {
		t.Errorf("a Pod labelled like an earlier release's after the claim is taken: %d containers, want 1", p)
	}
}

// The claim goes with the owner's last object: while a network or a volume of the owner's is
// left it stays, once the last is removed the ConfigMap is gone (nothing left in the namespace)
// and another owner may claim the namespace.
func TestTheClaimGoesWithTheOwnersLastObject(t *testing.T) {
	ctx := context.Background()
	cs := clientset()
	a := ownedEngine(cs, ownerA)
	if err := a.CreateNetwork(ctx, container.NetworkSpec{Name: "dev", Labels: clusterLabels}); err != nil {
		t.Fatal(err)
	}
	if err := a.CreateVolume(ctx, container.VolumeSpec{Name: "dev-var"}); err != nil {
		t.Fatal(err)
	}
	claim := func() bool {
		t.Helper()
		_, err := cs.CoreV1().ConfigMaps("pods").Get(ctx, "dockyard-claim", metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	if err := a.RemoveNetwork(ctx, "dev"); err != nil {
		t.Fatal(err)
	}
	if !claim() {
		t.Fatal("the claim went while a volume of the owner's is left")
	}
	if err := a.RemoveVolume(ctx, "dev-var"); err != nil {
		t.Fatal(err)
	}
	if claim() {
		t.Error("the claim is left after the owner's last object was removed")
	}
	if n := objectCount(t, cs); n != 0 {
		t.Errorf("%d objects left in the namespace", n)
	}
	if err := ownedEngine(cs, ownerB).CreateVolume(ctx, container.VolumeSpec{Name: "b-var"}); err != nil {
		t.Errorf("another owner once the namespace is free: %v", err)
	}
}
