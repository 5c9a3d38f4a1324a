#!/bin/sh
# dnsd package: after install and upgrade (Debian postinst, RPM %post).
#
# Debian calls it with "configure" and the version upgraded from (empty on
# a first install); RPM with the number of dnsd packages installed once
# this one is (1: install, 2: upgrade).
set -e

upgrade=false
case "$1" in
	configure) [ -z "$2" ] || upgrade=true ;;
	abort-upgrade | abort-remove | abort-deconfigure) exit 0 ;;
	[0-9]*) [ "$1" -lt 2 ] || upgrade=true ;;
esac

# The system user (sysusers.d entry shipped in the package).
if command -v systemd-sysusers >/dev/null 2>&1; then
	systemd-sysusers /usr/lib/sysusers.d/dnsd.conf
elif ! getent passwd dnsd >/dev/null; then
	if command -v adduser >/dev/null 2>&1 && adduser --help 2>&1 | grep -q -- --system; then
		adduser --system --group --no-create-home --home / --shell /usr/sbin/nologin dnsd
	else
		useradd --system --user-group --no-create-home --home-dir / --shell /usr/sbin/nologin dnsd
	fi
fi

# /etc/dnsd holds what dnsd reads (kubeconfigs, keys, password files):
# readable by group dnsd, by no one else. Set on first install only, so an
# operator's own choice survives upgrades - except group root, which is
# what RPM leaves on an upgrade (it applies the package's root:root to the
# directory, and to the config file when it replaces an unmodified one),
# and with which the dnsd user could not read its config.
if [ "$upgrade" = false ]; then
	chown root:dnsd /etc/dnsd /etc/dnsd/dnsd.yaml
	chmod 0750 /etc/dnsd
	chmod 0640 /etc/dnsd/dnsd.yaml
else
	for f in /etc/dnsd /etc/dnsd/dnsd.yaml; do
		if [ "$(stat -c %G "$f" 2>/dev/null)" = root ]; then
			chgrp dnsd "$f"
		fi
	done
fi

# The kernel's cap on UDP receive buffers (sysctl.d drop-in shipped in the
# package, read at every boot): applied now, so that the first start gets
# the 4 MiB limits.udp_rcvbuf asks for, unless the running cap is larger
# already. Only that key, with every sysctl.d file's say (a file in
# /etc/sysctl.d wins). Never fails the installation (a container may not
# write /proc/sys).
rmem=$(cat /proc/sys/net/core/rmem_max 2>/dev/null || echo 0)
if [ "$rmem" -lt 4194304 ] 2>/dev/null; then
	if [ -x /usr/lib/systemd/systemd-sysctl ]; then
		/usr/lib/systemd/systemd-sysctl --prefix=net.core.rmem_max >/dev/null 2>&1 || applied=false
	elif command -v sysctl >/dev/null 2>&1; then
		sysctl -q --system >/dev/null 2>&1 || applied=false
	else
		applied=false
	fi
	if [ "${applied:-true}" = false ]; then
		echo "dnsd: could not apply /usr/lib/sysctl.d/60-dnsd.conf now (net.core.rmem_max); it applies at the next boot" >&2
	fi
fi

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
	# An upgrade restarts a running dnsd only when the config passes the new
	# version's check (as the service's user, as ExecStartPre will): a
	# config the new version rejects keeps the old process serving.
	if [ "$upgrade" = true ] && systemctl is-active --quiet dnsd.service; then
		if command -v runuser >/dev/null 2>&1; then
			check="runuser -u dnsd -- /usr/bin/dnsd check -config /etc/dnsd/dnsd.yaml"
		else
			check="/usr/bin/dnsd check -config /etc/dnsd/dnsd.yaml"
		fi
		if $check; then
			systemctl restart dnsd.service
		else
			echo "dnsd: /etc/dnsd/dnsd.yaml does not pass 'dnsd check' with the new version (above);" >&2
			echo "dnsd: NOT restarting: the running dnsd keeps serving with the old version." >&2
			echo "dnsd: fix the file, then run: systemctl restart dnsd" >&2
		fi
	fi
fi
exit 0
