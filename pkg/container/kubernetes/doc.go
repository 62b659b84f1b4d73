// Package kubernetes is the container engine Dockyard finds in a Kubernetes cluster (the
// infrastructure cluster): every container is a Pod in one namespace, so nodes spread over the
// cluster's machines and its zones instead of one host.
//
// What each part of container.Runtime becomes:
//
//   - A container is a Pod of the same name, with one container ("node") and restartPolicy from
//     the spec. A created container is a Pod held by a scheduling gate; StartContainer lifts the
//     gate. A Pod that ended (restartPolicy Never) starts again as a new Pod of the same spec,
//     kept in an annotation.
//   - Labels are the Pod's labels where Kubernetes allows their values, else a hash of the value
//     (a selector still finds it); the exact labels are kept in an annotation, which lists and
//     events check again.
//   - A named volume lives in the Pod that mounts it (an emptyDir), as long as that Pod: a
//     machine's Pod is never recreated behind Cluster API's back, so its /var lives as long as
//     the machine. An init container seeds an empty volume from the image's files at its mount
//     point, as Docker does. CreateVolume records the volume (a labelled ConfigMap without data).
//   - A network is a NetworkPolicy: Pods attached carry its label, and the policy admits into
//     them only their network's Pods and Pods of other namespaces (where Cluster API runs), so
//     one cluster's Pods are isolated from another's where the cluster's CNI enforces policies.
//     Addresses are the Pods' own; fixed addresses and subnets are refused.
//   - A published port is a port of a Service in front of the Pod: ClusterIP for a loopback
//     address (reachable from the infrastructure cluster, which is the management cluster when
//     it runs there), NodePort otherwise.
//   - Exec, copies and signals run over the exec API (copies as tar; signals with kill, so a
//     Pod's PID 1 gets only the signals it handles), logs come from the log API, and events from
//     watching the Pods and NetworkPolicies.
//   - An engine acts for one owner (WithOwner: a management cluster and namespace): the first
//     owner to make anything in the namespace claims it (the ConfigMap dockyard-claim), another
//     owner's creations are refused (a policy refusal), and every object the engine makes
//     carries the owner, which every read requires (owners.go). An ended Pod is made again only
//     once the owner's check (WithSpecCheck) allows the spec it kept.
//   - Images are pulled by the kubelet of the node a Pod lands on, from a registry those nodes
//     reach: ImageExists asks the nodes' status, PullImage leaves it to the kubelet, and images
//     cannot be saved from or loaded into the cluster.
package kubernetes
