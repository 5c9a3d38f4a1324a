#!/bin/sh
# dnsd package: before removal (Debian prerm, RPM %preun). Stops and
# disables the service when the package goes away, not on an upgrade
# (postinstall.sh restarts it then).
#
# Debian calls it with "remove" (or "upgrade", "deconfigure", ...); RPM
# with the number of dnsd packages left afterwards (0: removal).
set -e

case "$1" in
	remove | 0) ;;
	*) exit 0 ;;
esac
if [ -d /run/systemd/system ]; then
	systemctl disable --now dnsd.service >/dev/null 2>&1 || true
fi
exit 0
