# Debian's nginx shaped like the upstream nginx image: port 80, logs to the container's output,
# run in the foreground by the image's entrypoint.
set -eu
sed -i -e 's#access_log .*;#access_log /dev/stdout;#' -e 's#error_log .*;#error_log /dev/stderr;#' /etc/nginx/nginx.conf
