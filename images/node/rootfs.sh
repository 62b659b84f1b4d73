# Runs with /bin/sh inside the node's Debian root filesystem after debootstrap, before
# rootfs/clean.sh. Node-specific setup that belongs to the distribution layer; Dockyard's own
# files (entrypoint, kubelet, containerd configuration) come in a later layer.
set -eu

# Boot to multi-user.target, not graphical.target.
ln -sf /lib/systemd/system/multi-user.target /etc/systemd/system/default.target

# Periodic maintenance a throw-away node must not run (apt, dpkg backups, filesystem scrubs),
# and units that only make sense on a machine with real consoles or storage.
rm -f /etc/systemd/system/timers.target.wants/apt-daily.timer \
  /etc/systemd/system/timers.target.wants/apt-daily-upgrade.timer \
  /etc/systemd/system/timers.target.wants/dpkg-db-backup.timer \
  /etc/systemd/system/timers.target.wants/e2scrub_all.timer \
  /etc/systemd/system/timers.target.wants/fstrim.timer \
  /etc/systemd/system/multi-user.target.wants/e2scrub_reap.service \
  /etc/systemd/system/sysinit.target.wants/systemd-pstore.service \
  /etc/systemd/system/getty.target.wants/getty@tty1.service
for unit in getty@tty1.service serial-getty@ttyS0.service console-getty.service \
  systemd-pstore.service e2scrub_reap.service systemd-firstboot.service \
  sys-kernel-debug.mount sys-kernel-tracing.mount sys-kernel-config.mount \
  systemd-journald-audit.socket; do
  ln -sf /dev/null "/etc/systemd/system/$unit"
done

# kubelet and containerd look for CNI plugins in /opt/cni/bin; Debian installs them in
# /usr/lib/cni.
mkdir -p /opt/cni /etc/cni/net.d
ln -sfn /usr/lib/cni /opt/cni/bin

# What the image build needs to know about the installed containerd.
mkdir -p /.dockyard
containerd config default >/.dockyard/containerd-default.toml
containerd --version >/.dockyard/containerd-version
