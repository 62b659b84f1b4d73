# Runs with /bin/sh inside the Debian root filesystem shared by the kube-proxy and flannel
# images, before rootfs/clean.sh: routes every iptables command through the wrapper that
# picks the node's backend on first use.
set -eu
install -m 0755 /.dockyard/in/iptables-wrapper /usr/sbin/iptables-wrapper
for cmd in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
  ln -sf iptables-wrapper "/usr/sbin/${cmd}"
done
