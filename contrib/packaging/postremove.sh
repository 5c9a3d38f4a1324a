#!/bin/sh
# dnsd package: after removal (Debian postrm, RPM %postun). The unit file
# is gone: systemd forgets it. The user dnsd and /etc/dnsd stay (Debian's
# purge removes the conffile, never the user).
set -e

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
