package server

import (
	"net/netip"

	"github.com/dnsd/dnsd/config"
)

// acl is the compiled access list (the acl: block of dnsd.yaml).
type acl struct {
	allow []netip.Prefix
	deny  []netip.Prefix
	def   bool
	drop  bool
}

func newACL(a config.ACL) acl {
	c := acl{def: a.Default, drop: a.Drop}
	for _, p := range a.Allow {
		c.allow = append(c.allow, unmapPrefix(p))
	}
	for _, p := range a.Deny {
		c.deny = append(c.deny, unmapPrefix(p))
	}
	return c
}

// unmapPrefix turns ::ffff:a.b.c.d/n into a.b.c.d/(n-96) so that it
// matches clients, whose addresses are always unmapped.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	p = p.Masked()
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// allowed reports whether client (unmapped, no zone) may query a listener;
// loopbackListener says whether that listener's address is loopback.
//
// Deny wins over allow. The default (no allow list configured) admits
// everyone on a loopback listener, else exactly loopback, RFC 1918
// (10/8, 172.16/12, 192.168/16) and RFC 4193 (fc00::/7) clients.
// Link-local clients (169.254/16, fe80::/10) are deliberately not in the
// default: the docs name only the ranges above, and a DNS server reachable
// from anything on the link is a choice the operator makes with an explicit
// allow entry. An explicit empty allow list admits nobody.
func (a *acl) allowed(client netip.Addr, loopbackListener bool) bool {
	for _, p := range a.deny {
		if p.Contains(client) {
			return false
		}
	}
	if a.def {
		return loopbackListener || client.IsLoopback() || client.IsPrivate()
	}
	for _, p := range a.allow {
		if p.Contains(client) {
			return true
		}
	}
	return false
}
