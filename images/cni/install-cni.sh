#!/bin/sh
# Applies the CNI manifest of the node image the way kind does (kind's installcni action):
# /kind/manifests/default-cni.yaml is kindnetd in kindest/node and flannel in Dockyard's node
# image. When the file says "would you kindly template this file" it is a Go template whose
# field .PodSubnet is the pod subnet of kubeadm's ClusterConfiguration (Cluster API writes the
# Cluster's spec.clusterNetwork.pods.cidrBlocks there, comma-separated, which is also what kind
# puts in the field, and all kindnetd uses). For flannel, fields per family (the list has one
# or two entries, either first, at most one per family; IPv6 ones have a colon): .EnableIPv4
# and .EnableIPv6 (true or false), .PodSubnetIPv4 and .PodSubnetIPv6 (the family's entry, or
# 0.0.0.0/0 and ::/0, flannel's unset network, for an absent family). Fields are replaced as
# text/template prints them; nothing else is interpreted. When it says "would you kindly patch
# this file", the first container of each DaemonSet gets CONTROL_PLANE_ENDPOINT=<kubeadm's
# controlPlaneEndpoint> (kindnetd then reaches the API server without kube-proxy).
#
# Run on control plane nodes after kubeadm (postKubeadmCommands): it retries while the API
# server settles, and applying again (every control plane node runs it) changes nothing.
#
# One source for the clusterctl flavors (make templates inlines it), the management cluster
# (cmd/tools/mgmt) and test/images. Hence no dollar sign (clusterctl substitutes variables in the
# templates embedding it) and no double braces (bootstrap data may be a jinja template).
set -eu
export KUBECONFIG=/etc/kubernetes/admin.conf
mkdir -p /run/dockyard-cni
cd /run/dockyard-cni

# fetch reads kubeadm's ClusterConfiguration from the cluster.
fetch() {
	kubectl --request-timeout=10s -n kube-system get configmap kubeadm-config \
		-o 'jsonpath={.data.ClusterConfiguration}' >cluster-configuration.yaml
}

# render writes manifest.yaml from the node image's manifest; a cluster without a pod subnet
# (or, for a manifest to patch, without a control plane endpoint) is an error, not a retry.
render() {
	sed -n 's/^ *podSubnet: *//p' cluster-configuration.yaml | tr -d "\"'" >pod-subnet
	# One entry per line, without blanks; then each family's entry, its unspecified network
	# when it has none.
	tr ',' '\n' <pod-subnet | tr -d ' \t' | grep . >pod-subnets
	if ! grep -q . pod-subnets; then
		echo "install-cni: kubeadm's ClusterConfiguration has no networking.podSubnet (the Cluster's spec.clusterNetwork.pods.cidrBlocks)" >&2
		exit 1
	fi
	grep ':' pod-subnets >pod-subnet-ipv6 || echo '::/0' >pod-subnet-ipv6
	grep -v ':' pod-subnets >pod-subnet-ipv4 || echo '0.0.0.0/0' >pod-subnet-ipv4
	if [ "`grep -c . pod-subnet-ipv4`" != 1 ] || [ "`grep -c . pod-subnet-ipv6`" != 1 ]; then
		echo "install-cni: networking.podSubnet `cat pod-subnet` has more than one subnet of a family; want one or two, IPv4 and IPv6" >&2
		exit 1
	fi
	if grep -q ':' pod-subnets; then echo true >enable-ipv6; else echo false >enable-ipv6; fi
	if grep -qv ':' pod-subnets; then echo true >enable-ipv4; else echo false >enable-ipv4; fi
	if grep -q 'would you kindly template this file' /kind/manifests/default-cni.yaml; then
		sed -e "s#[{][{] *[.]PodSubnet *[}][}]#`cat pod-subnet`#g" \
			-e "s#[{][{] *[.]PodSubnetIPv4 *[}][}]#`cat pod-subnet-ipv4`#g" \
			-e "s#[{][{] *[.]PodSubnetIPv6 *[}][}]#`cat pod-subnet-ipv6`#g" \
			-e "s#[{][{] *[.]EnableIPv4 *[}][}]#`cat enable-ipv4`#g" \
			-e "s#[{][{] *[.]EnableIPv6 *[}][}]#`cat enable-ipv6`#g" \
			/kind/manifests/default-cni.yaml >cni.yaml || return 1
	else
		cp /kind/manifests/default-cni.yaml cni.yaml || return 1
	fi
	if ! grep -q 'would you kindly patch this file' cni.yaml; then
		mv cni.yaml manifest.yaml
		return
	fi
	sed -n 's/^controlPlaneEndpoint: *//p' cluster-configuration.yaml | tr -d "\"'" >endpoint
	if ! grep -q . endpoint; then
		echo "install-cni: kubeadm's ClusterConfiguration has no controlPlaneEndpoint" >&2
		exit 1
	fi
	cat >kustomization.yaml <<EOF
resources:
- cni.yaml
patches:
- target:
    group: apps
    version: v1
    kind: DaemonSet
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/env/-
      value:
        name: CONTROL_PLANE_ENDPOINT
        value: "`cat endpoint`"
EOF
	kubectl kustomize . >manifest.yaml
}

for attempt in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30; do
	if fetch && render && kubectl --request-timeout=30s apply -f manifest.yaml; then
		echo "install-cni: applied /kind/manifests/default-cni.yaml for pod subnet `cat pod-subnet`"
		exit 0
	fi
	echo "install-cni: attempt failed; retrying" >&2
	sleep 4
done
echo "install-cni: could not apply /kind/manifests/default-cni.yaml" >&2
exit 1
