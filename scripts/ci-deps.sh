#!/usr/bin/env bash
# Installs the Debian packages the tests need beyond Go, when missing:
# systemd-analyze (the unit check), dpkg-deb and rpm (the package test),
# groff and man (the man page check), kdig (knot-dnsutils: the DNS over
# HTTPS test's real client), knotd (knot) and named (bind9: the real
# secondaries of the zone transfer tests), curl, bind9-utils and
# bind9-dnsutils (dnssec-signzone, dnssec-verify, delv: the pre-signed zone
# tests), unbound (their validating resolver) and dnsperf (DNS over HTTPS
# with queries in flight), kea-dhcp-ddns (a real client of the dynamic
# update tests; nsupdate and knsupdate come with the packages above), and
# promtool (the alert rules test: only that binary is taken from Debian's
# prometheus package, which would also install and start a Prometheus
# server). Fast when everything is there; needs root (CI runs as root)
# otherwise.
set -euo pipefail

need=()
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v dpkg-deb >/dev/null || need+=(dpkg)
command -v rpm >/dev/null || need+=(rpm)
command -v groff >/dev/null || need+=(groff-base)
command -v man >/dev/null || need+=(man-db)
command -v gzip >/dev/null || need+=(gzip)
command -v kdig >/dev/null || need+=(knot-dnsutils)
command -v knotd >/dev/null || need+=(knot)
command -v named >/dev/null || need+=(bind9)
command -v curl >/dev/null || need+=(curl)
command -v dnssec-signzone >/dev/null || need+=(bind9-utils) # dnssec-keygen, -signzone, -verify: pre-signed zone tests
command -v delv >/dev/null || need+=(bind9-dnsutils)         # delv: the validator of the pre-signed zone test
command -v unbound >/dev/null || need+=(unbound)
command -v dnsperf >/dev/null || need+=(dnsperf)
command -v kea-dhcp-ddns >/dev/null || need+=(kea-dhcp-ddns-server) # Kea DHCP-DDNS: the dynamic update test's real client
promtool=false
command -v promtool >/dev/null || promtool=true
if [ ${#need[@]} -eq 0 ] && ! $promtool; then
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
if [ ${#need[@]} -gt 0 ]; then
	echo "ci-deps.sh: installing ${need[*]}" >&2
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if $promtool; then
	# The package's postinst enables and starts prometheus.service: take
	# the one static binary out of the .deb instead of installing it.
	echo "ci-deps.sh: installing promtool (from the prometheus package) into /usr/local/bin" >&2
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root prometheus)
	dpkg-deb --fsys-tarfile "$tmp"/prometheus_*.deb | tar -x -C "$tmp" ./usr/bin/promtool
	install -m 0755 "$tmp/usr/bin/promtool" /usr/local/bin/promtool
fi
