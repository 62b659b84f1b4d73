# The root filesystem of the agnhost image (and nautilus, which adds files to it), after the
# upstream image's Dockerfile (test/images/agnhost of k8s.io/kubernetes): the tools the e2e
# tests run next to agnhost (dig, curl, nc, ss, iperf, bash), the user and group a
# SupplementalGroups test expects in the image, and netexec's upload directory.
set -eu
groupadd -g 50000 group-defined-in-image
useradd -M -U -u 1000 -s /bin/sh user-defined-in-image
usermod -a -G group-defined-in-image user-defined-in-image
mkdir -p /uploads
ln -sf /usr/bin/iperf /usr/local/bin/iperf
