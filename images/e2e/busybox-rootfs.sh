# Extracts Debian's static busybox, its applet list and Debian's static bash; the busybox image
# is busybox with a link per applet in /bin, like the upstream image, and bash as /bin/sh
# (pkg/imagebuild's busyboxFiles says why), and nothing of Debian besides.
set -eu
mkdir -p /.dockyard
cp /bin/busybox /.dockyard/busybox
/bin/busybox --list >/.dockyard/busybox-applets
cp "$(command -v bash-static)" /.dockyard/bash
