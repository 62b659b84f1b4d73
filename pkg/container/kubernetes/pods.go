package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

const (
	// startGate holds a created container's Pod until StartContainer.
	startGate = "dockyard.x-k8s.io/start"
	// specAnnotation keeps the spec a Pod was made of, to make it again when it ended.
	specAnnotation = "dockyard.x-k8s.io/spec"
	// mainContainer is the name of the Pod's one container.
	mainContainer = "node"
	// seedMount is where a seeding init container mounts the volume it fills.
	seedMount = "/dockyard-seed"
)

// lostHostSeconds is how long a Pod stays on a node Kubernetes declared lost (unreachable or
// not ready) before it is evicted.
const lostHostSeconds int64 = 15

// CreateContainer creates the container's Pod held by its start gate, with its Service when it
// publishes ports. A spec the engine cannot honour (fixed addresses, device rules) is refused
// before anything is made, and so is every creation in a namespace another owner holds (a
// policy refusal); a network that does not exist (or is not the owner's) is ErrNotFound.
func (r *Runtime) CreateContainer(ctx context.Context, spec container.ContainerSpec) error {
	pod, err := r.podOf(ctx, spec, true)
	if err != nil {
		return err
	}
	if err := r.claim(ctx); err != nil {
		return errors.Wrapf(err, "creating container %s", spec.Name)
	}
	_, err = r.createPod(ctx, pod)
	return err
}

// createPod creates a Pod the namespace's claim allows; a Pod of its name that is not the
// owner's is said so.
func (r *Runtime) createPod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	made, err := r.client.CoreV1().Pods(r.namespace).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		if _, theirs := r.ownPod(ctx, pod.Name); container.IsNotFound(theirs) {
			return nil, r.notTheOwners("Pod", pod.Name)
		}
	}
	if err != nil {
		return nil, errors.Wrapf(err, "creating Pod %s", pod.Name)
	}
	return made, nil
}

// ownPod reads a Pod of the owner's; ErrNotFound when there is none of that name.
func (r *Runtime) ownPod(ctx context.Context, name string) (*corev1.Pod, error) {
	o, err := r.owned(ctx, "Pod", name, func() (metav1.Object, error) {
		return r.client.CoreV1().Pods(r.namespace).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	return o.(*corev1.Pod), nil
}

// podOf renders the Pod of a container spec.
func (r *Runtime) podOf(ctx context.Context, spec container.ContainerSpec, gated bool) (*corev1.Pod, error) {
	if err := podCanRun(spec); err != nil {
		return nil, err
	}
	if spec.Network != "" {
		if _, err := r.InspectNetwork(ctx, spec.Network); err != nil {
			return nil, errors.Wrapf(err, "container %s", spec.Name)
		}
	}
	meta, err := r.podMeta(spec)
	if err != nil {
		return nil, err
	}
	main := nodeContainer(spec)
	pod := &corev1.Pod{ObjectMeta: meta, Spec: podBase(spec, gated)}
	if spec.DNSSearch != nil {
		dns, err := r.clusterDNS(ctx)
		if err != nil {
			return nil, errors.Wrapf(err, "container %s asks for its own DNS search list", spec.Name)
		}
		pod.Spec.DNSPolicy = corev1.DNSNone
		pod.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{dns}, Searches: *spec.DNSSearch}
	}
	if err := podVolumes(spec, pod, &main); err != nil {
		return nil, err
	}
	main.ReadinessProbe = readinessProbe(spec.ReadyPort)
	pod.Spec.Containers = []corev1.Container{main}
	spread, err := r.spreadConstraints(ctx, spec)
	if err != nil {
		return nil, err
	}
	pod.Spec.TopologySpreadConstraints = spread
	pod.Spec.Affinity = zoneAffinity(spec.Zone)
	place, err := r.placement(ctx)
	if err != nil {
		return nil, errors.Wrapf(err, "container %s", spec.Name)
	}
	place.apply(&pod.Spec)
	return pod, nil
}

// podCanRun refuses a spec a Pod cannot honour: fixed addresses, device rules without
// privileges, a hostname that is no DNS label, no image.
func podCanRun(spec container.ContainerSpec) error {
	if err := validName("container", spec.Name); err != nil {
		return err
	}
	for family, a := range map[string]string{"IPv4": spec.IPv4Address, "IPv6": spec.IPv6Address} {
		if a != "" {
			return errors.Errorf("container %s: a Pod cannot have a fixed %s address (%s); the cluster's network gives Pods theirs", spec.Name, family, a)
		}
	}
	if len(spec.Security.DeviceCgroupRules) > 0 && !spec.Security.Privileged {
		return errors.Errorf("container %s: a Pod cannot be granted devices by cgroup rules (%v); run it privileged", spec.Name, spec.Security.DeviceCgroupRules)
	}
	if spec.Hostname != "" {
		if errs := validation.IsDNS1123Label(spec.Hostname); len(errs) > 0 {
			return errors.Errorf("container %s: hostname %q cannot be a Pod's: %s", spec.Name, spec.Hostname, strings.Join(errs, "; "))
		}
	}
	if spec.Image == "" {
		return errors.Errorf("container %s names no image", spec.Name)
	}
	return nil
}

// podMeta names the Pod and carries the spec's labels, the spec itself, its network and the
// engine's owner.
func (r *Runtime) podMeta(spec container.ContainerSpec) (metav1.ObjectMeta, error) {
	kept, err := json.Marshal(spec)
	if err != nil {
		return metav1.ObjectMeta{}, errors.Wrapf(err, "recording the spec of container %s", spec.Name)
	}
	labels := objectLabels("container", spec.Labels)
	labels[podLabel] = podSelectorValue(spec.Name)
	annotations := annotated(spec.Labels)
	annotations[specAnnotation] = string(kept)
	r.own(labels, annotations)
	if spec.Network != "" {
		labels[networkLabel(spec.Network)] = ""
		annotations[networksAnnotation] = networksValue([]string{spec.Network})
	}
	return metav1.ObjectMeta{Name: spec.Name, Namespace: r.namespace, Labels: labels, Annotations: annotations}, nil
}

// nodeContainer is the Pod's one container: the spec's image, command, environment, ports,
// security and resources, before its volumes and probe.
func nodeContainer(spec container.ContainerSpec) corev1.Container {
	main := corev1.Container{
		Name: mainContainer, Image: spec.Image, Command: spec.Entrypoint, Args: spec.Cmd,
		TTY: spec.Tty, Stdin: spec.Tty,
		SecurityContext: securityContext(spec.Security),
		Resources:       resources(spec.Resources),
	}
	for _, e := range spec.Env {
		k, v, _ := strings.Cut(e, "=")
		main.Env = append(main.Env, corev1.EnvVar{Name: k, Value: v})
	}
	for _, p := range spec.Ports {
		main.Ports = append(main.Ports, corev1.ContainerPort{ContainerPort: int32(p.ContainerPort), Protocol: protocol(p.Protocol)})
	}
	return main
}

// podBase is the Pod's spec before its containers: hostname, restart policy, what a node does
// without, the tolerations of a lost host and, when gated, the start gate.
func podBase(spec container.ContainerSpec, gated bool) corev1.PodSpec {
	ps := corev1.PodSpec{
		Hostname:                      spec.Hostname,
		RestartPolicy:                 restartPolicy(spec.RestartPolicy),
		AutomountServiceAccountToken:  ptr.To(false),
		EnableServiceLinks:            ptr.To(false),
		TerminationGracePeriodSeconds: ptr.To[int64](10),
	}
	// A container's host that stops answering takes the container with it, as a host would:
	// the Pod is evicted soon after Kubernetes declares the node lost, instead of the default
	// five minutes, so the container is reported gone while its Pod is still being removed.
	for _, taint := range []string{corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady} {
		ps.Tolerations = append(ps.Tolerations, corev1.Toleration{
			Key: taint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(lostHostSeconds),
		})
	}
	if gated {
		ps.SchedulingGates = []corev1.PodSchedulingGate{{Name: startGate}}
	}
	return ps
}

// podVolumes gives the Pod a volume per mount and mounts it in main: a named volume is an
// empty directory its init container seeds from the image (and labels the Pod), tmpfs is one in
// memory, a bind is a host path (an optional one is left out).
func podVolumes(spec container.ContainerSpec, pod *corev1.Pod, main *corev1.Container) error {
	for i, m := range spec.Mounts {
		vol := fmt.Sprintf("m%d", i)
		switch m.Type {
		case container.MountVolume:
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, seedContainer(vol, spec.Image, m.Target, main.SecurityContext))
			pod.Labels[volumeLabel(m.Source)] = ""
		case container.MountTmpfs:
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
		case container.MountBind:
			if m.Optional {
				// The Pod's host is not known before it is scheduled; what an optional bind
				// covers (kernel modules) the node does without.
				continue
			}
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: m.Source}}})
		default:
			return errors.Errorf("container %s: unknown mount type %q", spec.Name, m.Type)
		}
		main.VolumeMounts = append(main.VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: m.Target, ReadOnly: m.ReadOnly})
	}
	return nil
}

// readinessProbe checks that the container listens on its ready port; nil when it has none.
func readinessProbe(port int) *corev1.Probe {
	if port == 0 {
		return nil
	}
	return &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}},
		PeriodSeconds: 2, FailureThreshold: 2,
	}
}

// spreadConstraints spread the owner's Pods that share the spec's SpreadFrom labels over zones
// and hosts; none when it has no such labels.
func (r *Runtime) spreadConstraints(ctx context.Context, spec container.ContainerSpec) ([]corev1.TopologySpreadConstraint, error) {
	if len(spec.SpreadFrom) == 0 {
		return nil, nil
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{ownerLabel: ownerValue(r.owner)}}
	for k, v := range spec.SpreadFrom {
		if key, ok := labelKey(k); ok {
			sel.MatchLabels[key] = labelValue(v)
		}
	}
	// Over zones strictly, where the cluster has them (a node without one is then no place
	// for a container that spreads), counting only the zones whose nodes take Pods (a lost
	// zone does not hold the others back); over hosts as a preference.
	zones, err := r.Zones(ctx)
	if err != nil {
		return nil, errors.Wrapf(err, "container %s", spec.Name)
	}
	var constraints []corev1.TopologySpreadConstraint
	if len(zones) > 0 {
		constraints = append(constraints, corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel,
			NodeTaintsPolicy: ptr.To(corev1.NodeInclusionPolicyHonor),
		})
	}
	return append(constraints, corev1.TopologySpreadConstraint{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: sel,
	}), nil
}

// zoneAffinity keeps the Pod on the nodes of its zone; nil when it names none.
func zoneAffinity(zone string) *corev1.Affinity {
	if zone == "" {
		return nil
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
		}}},
	}}
}

// seedContainer fills an empty volume with the image's files at the volume's mount point, as
// Docker fills a new named volume, and leaves one that holds anything as it is.
func seedContainer(vol, image, target string, sec *corev1.SecurityContext) corev1.Container {
	script := `if [ -z "$(ls -A ` + seedMount + `)" ] && [ -d "$1" ]; then cp -a "$1"/. ` + seedMount + `/; fi`
	return corev1.Container{
		Name: "seed-" + vol, Image: image, Command: []string{"sh", "-c", script, "seed", target},
		SecurityContext: sec,
		VolumeMounts:    []corev1.VolumeMount{{Name: vol, MountPath: seedMount}},
	}
}

// volumeLabel marks a Pod that mounts a named volume.
func volumeLabel(volume string) string {
	name := volume
	if len(validation.IsQualifiedName("vol.dockyard.x-k8s.io/"+name)) != 0 {
		name = "h-" + hashOf(volume)
	}
	return "vol.dockyard.x-k8s.io/" + name
}

func securityContext(s container.SecuritySpec) *corev1.SecurityContext {
	sc := &corev1.SecurityContext{}
	if s.Privileged {
		sc.Privileged = ptr.To(true)
	}
	if len(s.CapAdd) > 0 || len(s.CapDrop) > 0 {
		sc.Capabilities = &corev1.Capabilities{}
		for _, c := range s.CapAdd {
			sc.Capabilities.Add = append(sc.Capabilities.Add, corev1.Capability(strings.TrimPrefix(strings.ToUpper(c), "CAP_")))
		}
		for _, c := range s.CapDrop {
			sc.Capabilities.Drop = append(sc.Capabilities.Drop, corev1.Capability(strings.TrimPrefix(strings.ToUpper(c), "CAP_")))
		}
	}
	if s.Unconfined {
		sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		sc.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
	}
	return sc
}

// resources turns limits into a Pod's: CPU and memory limits, and CPU shares as the CPU
// request (the kubelet turns requests into shares, 1024 to a core); the memory request stays
// small, so a limit is not a reservation the scheduler must find whole.
func resources(res container.Resources) corev1.ResourceRequirements {
	rr := corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("10m"),
		corev1.ResourceMemory: resource.MustParse("64Mi"),
	}}
	if res.CPUShares > 0 {
		rr.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(res.CPUShares*1000/1024, resource.DecimalSI)
	}
	if res.NanoCPUs > 0 || res.MemoryBytes > 0 {
		rr.Limits = corev1.ResourceList{}
	}
	if res.NanoCPUs > 0 {
		limit := resource.NewMilliQuantity(res.NanoCPUs/1_000_000, resource.DecimalSI)
		rr.Limits[corev1.ResourceCPU] = *limit
		if req := rr.Requests[corev1.ResourceCPU]; req.Cmp(*limit) > 0 {
			rr.Requests[corev1.ResourceCPU] = *limit
		}
	}
	if res.MemoryBytes > 0 {
		limit := resource.NewQuantity(res.MemoryBytes, resource.BinarySI)
		rr.Limits[corev1.ResourceMemory] = *limit
		if req := rr.Requests[corev1.ResourceMemory]; req.Cmp(*limit) > 0 {
			rr.Requests[corev1.ResourceMemory] = *limit
		}
	}
	return rr
}

func restartPolicy(p string) corev1.RestartPolicy {
	switch p {
	case "always", "unless-stopped":
		return corev1.RestartPolicyAlways
	case "on-failure":
		return corev1.RestartPolicyOnFailure
	}
	return corev1.RestartPolicyNever
}

func protocol(p string) corev1.Protocol {
	if strings.EqualFold(p, "udp") {
		return corev1.ProtocolUDP
	}
	return corev1.ProtocolTCP
}

// clusterDNS is the address of the cluster's DNS Service, which Pods with their own search
// list still ask.
func (r *Runtime) clusterDNS(ctx context.Context) (string, error) {
	svc, err := r.client.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		return "", errors.Wrap(err, "finding the cluster's DNS Service kube-system/kube-dns")
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return "", errors.New("the cluster's DNS Service kube-system/kube-dns has no address")
	}
	return svc.Spec.ClusterIP, nil
}

// StartContainer lifts a created Pod's start gate, or makes a Pod that ended anew from its
// spec, and waits (within ctx) for it to run or fail. A Pod still pulling its image when ctx
// ends is left to start: InspectContainer tells when it runs. Its Service is made when it
// publishes ports. A Pod not the owner's is ErrNotFound.
func (r *Runtime) StartContainer(ctx context.Context, name string) error {
	pod, err := r.ownPod(ctx, name)
	if err != nil {
		return errors.Wrapf(err, "starting container %s", name)
	}
	var spec container.ContainerSpec
	if err := json.Unmarshal([]byte(pod.Annotations[specAnnotation]), &spec); err != nil {
		return errors.Wrapf(err, "Pod %s was not made by Dockyard's engine", name)
	}
	spec.Name = name
	switch {
	case podPhaseEnded(pod):
		if pod, err = r.remake(ctx, pod, spec); err != nil {
			return err
		}
	case len(pod.Spec.SchedulingGates) > 0:
		patch := []byte(`{"spec":{"schedulingGates":null}}`)
		if pod, err = r.client.CoreV1().Pods(r.namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return errors.Wrapf(err, "lifting the start gate of Pod %s", name)
		}
	}
	if err := r.ensureService(ctx, pod, spec); err != nil {
		return err
	}
	return r.waitStarted(ctx, name)
}

// remake makes an ended Pod again from the spec it kept, which anyone who may edit the Pod may
// have changed: the owner's check (WithSpecCheck) must allow it, and the Pod must render and
// the namespace's claim allow it, before the ended Pod is removed; a refusal leaves it as it is.
func (r *Runtime) remake(ctx context.Context, ended *corev1.Pod, spec container.ContainerSpec) (*corev1.Pod, error) {
	if r.check != nil {
		if err := r.check(spec); err != nil {
			return nil, errors.Wrapf(err, "making container %s again from the spec its Pod kept", spec.Name)
		}
	}
	fresh, err := r.podOf(ctx, spec, false)
	if err != nil {
		return nil, err
	}
	if err := r.claim(ctx); err != nil {
		return nil, errors.Wrapf(err, "making container %s again", spec.Name)
	}
	if err := r.removePod(ctx, ended); err != nil {
		return nil, err
	}
	pod, err := r.createPod(ctx, fresh)
	return pod, errors.Wrapf(err, "making container %s again", spec.Name)
}

// startWait bounds how long StartContainer waits for a Pod to run.
const startWait = 45 * time.Second

// waitStarted waits for the Pod's container to run, or says why it cannot.
func (r *Runtime) waitStarted(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, startWait)
	defer cancel()
	var ended, last *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pod, err := r.ownPod(ctx, name)
		if err != nil {
			return false, errors.Wrapf(err, "starting container %s", name)
		}
		last = pod
		if st := mainStatus(pod); st != nil && st.State.Running != nil {
			return true, nil
		}
		if podPhaseEnded(pod) {
			ended = pod
			return true, nil
		}
		return false, nil
	})
	switch {
	case ended != nil:
		return errors.Errorf("Pod %s (%s) ended as it started (%s): %s", name, ended.UID, ended.Status.Phase, lastWords(ended))
	case err != nil && ctx.Err() == nil:
		return err
	case last != nil:
		// Still waiting: fine while it is scheduled and pulls, not when it cannot be.
		return stuck(last)
	}
	return nil
}

// stuckReasons are why a Pod's containers wait that waiting does not cure.
var stuckReasons = sets.New("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "CrashLoopBackOff")

// stuck says why a Pod that does not run yet cannot start: no node takes it, or its image or
// configuration is refused; nil while it is on its way.
func stuck(pod *corev1.Pod) error {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return errors.Errorf("Pod %s cannot be scheduled: %s", pod.Name, c.Message)
		}
	}
	for _, st := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		if w := st.State.Waiting; w != nil && stuckReasons.Has(w.Reason) {
			return errors.Errorf("Pod %s cannot start: %s: %s: %s", pod.Name, st.Name, w.Reason, w.Message)
		}
	}
	return nil
}

// lastWords says how a Pod's containers ended or why they wait.
func lastWords(pod *corev1.Pod) string {
	var out []string
	for _, st := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		switch {
		case st.State.Terminated != nil:
			t := st.State.Terminated
			out = append(out, fmt.Sprintf("%s exited %d (%s) %s", st.Name, t.ExitCode, t.Reason, strings.TrimSpace(t.Message)))
		case st.State.Waiting != nil:
			out = append(out, fmt.Sprintf("%s waits: %s %s", st.Name, st.State.Waiting.Reason, st.State.Waiting.Message))
		}
	}
	if len(out) == 0 {
		return pod.Status.Reason + " " + pod.Status.Message
	}
	return strings.Join(out, "; ")
}

// mainStatus is the status of the Pod's one container; nil before it has one.
func mainStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == mainContainer {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// InspectContainer returns the state of a container's Pod; ErrNotFound when there is none of
// the owner's.
func (r *Runtime) InspectContainer(ctx context.Context, name string) (*container.Container, error) {
	pod, err := r.ownPod(ctx, name)
	if err != nil {
		return nil, errors.Wrapf(err, "inspecting container %s", name)
	}
	svc, err := r.ownService(ctx, serviceName(name))
	if err != nil && !container.IsNotFound(err) {
		return nil, errors.Wrapf(err, "reading the Service of container %s", name)
	}
	c := containerOf(pod, svc)
	c.Hostname = pod.Spec.Hostname
	return c, nil
}

// ListContainers returns the owner's containers carrying the labels.
func (r *Runtime) ListContainers(ctx context.Context, want map[string]string) ([]container.Container, error) {
	pods, err := r.ownPods(ctx, selector("container", want))
	if err != nil {
		return nil, errors.Wrap(err, "listing Dockyard's Pods")
	}
	svcs, err := r.ownedList(ctx, func() ([]metav1.Object, error) {
		l, err := r.client.CoreV1().Services(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: selector("container", nil)})
		if err != nil {
			return nil, err
		}
		return objects(l.Items), nil
	})
	if err != nil {
		return nil, errors.Wrap(err, "listing Dockyard's Services")
	}
	byName := map[string]*corev1.Service{}
	for _, svc := range typed[*corev1.Service](svcs) {
		byName[svc.Name] = svc
	}
	var out []container.Container
	for _, pod := range pods {
		if !container.MatchLabels(labelsOf(pod), want) {
			continue
		}
		out = append(out, *containerOf(pod, byName[serviceName(pod.Name)]))
	}
	return out, nil
}

// ownPods lists the owner's Pods a label selector selects.
func (r *Runtime) ownPods(ctx context.Context, sel string) ([]*corev1.Pod, error) {
	objs, err := r.ownedList(ctx, func() ([]metav1.Object, error) {
		l, err := r.client.CoreV1().Pods(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, err
		}
		return objects(l.Items), nil
	})
	return typed[*corev1.Pod](objs), err
}

// containerOf describes a Pod as a container: "created" until its container first runs (gated,
// scheduling, pulling, initialising), "running", "exited" when it stopped (waiting to restart,
// or ended), "removing" while it is deleted.
func containerOf(pod *corev1.Pod, svc *corev1.Service) *container.Container {
	c := &container.Container{ID: string(pod.UID), Name: pod.Name, Labels: labelsOf(pod), State: "created", Networks: map[string]container.Endpoint{}}
	if len(pod.Spec.Containers) > 0 {
		c.Image = pod.Spec.Containers[0].Image
	}
	st := mainStatus(pod)
	switch {
	case pod.DeletionTimestamp != nil:
		c.State = "removing"
	case st != nil && st.State.Running != nil:
		c.State, c.Running, c.StartedAt = "running", true, st.State.Running.StartedAt.Time
	case st != nil && st.State.Terminated != nil:
		c.State, c.ExitCode = "exited", int(st.State.Terminated.ExitCode)
		c.StartedAt = st.State.Terminated.StartedAt.Time
	case st != nil && st.LastTerminationState.Terminated != nil:
		c.State, c.ExitCode = "exited", int(st.LastTerminationState.Terminated.ExitCode)
		c.StartedAt = st.LastTerminationState.Terminated.StartedAt.Time
	case podPhaseEnded(pod):
		c.State = "exited"
	}
	var ep container.Endpoint
	for _, ip := range pod.Status.PodIPs {
		if strings.Contains(ip.IP, ":") {
			ep.IPv6 = ip.IP
		} else {
			ep.IPv4 = ip.IP
		}
	}
	for _, n := range joinedNetworks(pod) {
		if _, ok := pod.Labels[networkLabel(n)]; ok {
			c.Networks[n] = ep
		}
	}
	if svc != nil {
		c.Ports = servicePorts(svc)
	}
	return c
}

// SignalContainer sends a signal to the container's PID 1 with kill, in the container: PID 1
// receives only the signals it handles (the kernel protects a namespace's init from the rest).
func (r *Runtime) SignalContainer(ctx context.Context, name, signal string) error {
	sig := strings.TrimPrefix(strings.ToUpper(signal), "SIG")
	var stderr strings.Builder
	code, err := r.Exec(ctx, name, container.ExecOptions{Cmd: []string{"kill", "-s", sig, "1"}, Stderr: &stderr})
	if err != nil {
		return errors.Wrapf(err, "signalling container %s", name)
	}
	if code != 0 {
		return errors.Errorf("signalling container %s with %s: kill exited %d: %s", name, signal, code, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// RemoveContainer deletes the container's Pod at once, with its Service, and waits for it to be
// gone, so the name is free again. A Pod or Service of its name not the owner's is left.
func (r *Runtime) RemoveContainer(ctx context.Context, name string) error {
	pod, err := r.ownPod(ctx, name)
	switch {
	case container.IsNotFound(err):
		return r.removeService(ctx, name)
	case err != nil:
		return errors.Wrapf(err, "removing container %s", name)
	}
	return r.removePod(ctx, pod)
}

// removePod deletes one of the owner's Pods (that one: its UID) with its Service, and waits for
// it to be gone.
func (r *Runtime) removePod(ctx context.Context, pod *corev1.Pod) error {
	pods := r.client.CoreV1().Pods(r.namespace)
	err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: sameObject(pod)})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return errors.Wrapf(err, "removing Pod %s", pod.Name)
	}
	if err := r.removeService(ctx, pod.Name); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		now, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && now.UID != pod.UID) {
			return true, nil
		}
		return false, err
	})
}
