#!/bin/sh
# Applies the CNI manifest of the node image, kind's way: /kind/manifests/default-cni.yaml
# (kindnetd in kindest/node, flannel in Dockyard's node image), a template whose
# PodSubnet field becomes the cluster's pod CIDR, read from kubeadm's ClusterConfiguration.
# Run on control plane nodes after kubeadm (postKubeadmCommands); it retries while the API
# server settles and applying again changes nothing.
#
# No dollar sign in this file: clusterctl substitutes variables in the templates embedding it.
set -eu
export KUBECONFIG=/etc/kubernetes/admin.conf
mkdir -p /run/dockyard-cni
for attempt in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30; do
	if kubectl -n kube-system get configmap kubeadm-config -o 'jsonpath={.data.ClusterConfiguration}' >/run/dockyard-cni/cluster.yaml &&
		sed -n 's/^ *podSubnet: *//p' /run/dockyard-cni/cluster.yaml | tr -d '"' | grep . >/run/dockyard-cni/pod-subnet &&
		sed -e "s#[{][{] *[.]PodSubnet *[}][}]#`cat /run/dockyard-cni/pod-subnet`#g" /kind/manifests/default-cni.yaml >/run/dockyard-cni/cni.yaml &&
		kubectl apply -f /run/dockyard-cni/cni.yaml; then
		exit 0
	fi
	echo "install-cni: attempt failed; retrying" >&2
	sleep 4
done
echo "install-cni: could not apply /kind/manifests/default-cni.yaml" >&2
exit 1
