# Builds BusyBox from its release (/.dockyard/in/busybox.tar.bz2, from Debian's archive) with
# BusyBox's default configuration, linked statically, as the upstream busybox image is built.
# Debian's busybox packages are configured otherwise, and their ash drops environment variables
# whose names are not shell names (data-1, 1-data-1, ...), which conformance specs read with
# `sh -c env`. Leaves the binary and its applet list in /.dockyard; the image is that binary
# with a link per applet in /bin, and nothing of Debian besides.
set -eu
# The build date BusyBox prints: the release's, so that a rebuild makes the same binary.
export SOURCE_DATE_EPOCH=1727308800
mkdir -p /.dockyard /tmp/busybox
tar -xjf /.dockyard/in/busybox.tar.bz2 -C /tmp/busybox --strip-components=1
cd /tmp/busybox
make defconfig >/dev/null
sed -i 's/^# CONFIG_STATIC is not set$/CONFIG_STATIC=y/' .config
grep -qx 'CONFIG_STATIC=y' .config
if ! make -j"$(nproc)" busybox >build.log 2>&1; then
	tail -n 40 build.log >&2
	exit 1
fi
cp busybox /.dockyard/busybox
./busybox --list >/.dockyard/busybox-applets
cd /
rm -rf /tmp/busybox
