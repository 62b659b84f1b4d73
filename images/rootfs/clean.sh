# Runs with /bin/sh inside every Debian root filesystem dockyard-build creates, after the
# packages are installed and the image-specific setup ran. It records what is installed and
# drops what a container never needs: package lists and archives, documentation, manual pages,
# translations, logs and the host-specific identity debootstrap left behind.
set -eu

mkdir -p /.dockyard
dpkg-query -W -f '${Package}\t${Version}\n' | sort >/.dockyard/packages

# Later `apt-get install`s in a derived image skip documentation too.
mkdir -p /etc/dpkg/dpkg.cfg.d
cat >/etc/dpkg/dpkg.cfg.d/90-dockyard-nodoc <<'EOF'
# Containers built by dockyard-build carry no documentation.
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-include=/usr/share/locale/locale.alias
path-exclude=/usr/share/lintian/*
EOF

apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old /var/lib/dpkg/*-old
find /usr/share/doc -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
find /usr/share/doc -mindepth 1 -type d -empty -delete 2>/dev/null || true
rm -rf /usr/share/man/* /usr/share/info/* /usr/share/lintian /usr/share/linda
find /usr/share/locale -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} + 2>/dev/null || true
find /var/log -type f -delete
rm -f /etc/hostname /var/lib/dbus/machine-id
# An empty machine-id: the node entrypoint (or systemd) writes a fresh one per container.
: >/etc/machine-id
rm -rf /tmp/* /var/tmp/* /root/.bash_history
