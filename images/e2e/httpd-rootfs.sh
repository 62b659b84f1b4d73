# Debian's apache2 shaped like the upstream httpd image the e2e tests expect: it serves
# /usr/local/apache2/htdocs on port 80 (the StatefulSet tests move index.html out of that
# directory to fail a readiness probe, and back), logs to the container's output and runs in
# the foreground (/usr/local/bin/httpd-foreground).
set -eu
mkdir -p /usr/local/apache2/htdocs
cp /.dockyard/in/index.html /usr/local/apache2/htdocs/index.html
install -m 0755 /.dockyard/in/httpd-foreground /usr/local/bin/httpd-foreground
sed -i -e 's#DocumentRoot /var/www/html#DocumentRoot /usr/local/apache2/htdocs#' \
	-e 's#ErrorLog .*#ErrorLog /dev/stderr#' -e 's#CustomLog .*#CustomLog /dev/stdout combined#' \
	/etc/apache2/sites-available/000-default.conf
sed -i -e 's#^ErrorLog .*#ErrorLog /dev/stderr#' /etc/apache2/apache2.conf
cat >/etc/apache2/conf-available/dockyard-e2e.conf <<'CONF'
ServerName localhost
<Directory /usr/local/apache2/htdocs>
	Options Indexes FollowSymLinks
	AllowOverride None
	Require all granted
</Directory>
CONF
a2enconf -q dockyard-e2e
