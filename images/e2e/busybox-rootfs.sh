# Extracts Debian's static busybox and its applet list; the busybox image is that binary with a
# link per applet in /bin, like the upstream image, and nothing of Debian besides.
set -eu
mkdir -p /.dockyard
cp /bin/busybox /.dockyard/busybox
/bin/busybox --list >/.dockyard/busybox-applets
