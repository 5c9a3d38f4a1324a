package pipeline

import "net/netip"

// TSIGKey is a TSIG key (RFC 8945) in miekg/dns's terms: of a transfer or
// update item, or of a secondary zone's primaries.
type TSIGKey struct {
	Name      string // lower-case FQDN; required
	Algorithm string // "hmac-sha256." ...; required
	Secret    string // base64; never logged
}

// String names the key without its secret.
func (k *TSIGKey) String() string { return k.Name + " (" + k.Algorithm + ")" }

// NotifyTaker is implemented by sources that copy their zone from
// primaries (secondary): the authority asks it who may NOTIFY (RFC 1996)
// and passes an accepted NOTIFY on.
type NotifyTaker interface {
	// NotifyFrom reports whether addr (any port) is one of zone's
	// primaries, and the key their NOTIFYs must be signed with (nil:
	// unsigned ones are taken).
	NotifyFrom(zone string, addr netip.Addr) (key *TSIGKey, primary bool)
	// Notify asks for a refresh of zone now; it never blocks.
	Notify(zone string)
}
