package config

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/dnsd/dnsd/internal/fsutil"
)

// Transfer is one item of the top-level transfer list: zones that
// secondaries may copy (AXFR, IXFR) and are told about (NOTIFY).
type Transfer struct {
	Zones  []string       // lower-case FQDNs of top-level zones; required, not empty
	Allow  []netip.Prefix // clients that may transfer; required, not empty
	TSIG   *TSIG          // default nil: unsigned transfers
	Notify []string       // secondaries to NOTIFY, ip:port (default port 53); default none
	// NotifySource is the address NOTIFYs leave from; default invalid
	// (unset): the address of the listen entry of the target's family.
	NotifySource netip.Addr
	Pos          Pos // where the item is written; always set
}

// TSIG is a transfer item's shared key (RFC 8945). Its String and
// LogValue never show the secret.
type TSIG struct {
	Name       string // key name, lower-case FQDN; required
	Algorithm  string // miekg/dns name: "hmac-sha256." ...; required
	SecretFile string // resolved path; required
	Secret     string // base64 of the decoded key (what miekg/dns takes), read from SecretFile; never empty
}

func (k *TSIG) String() string {
	if k == nil {
		return "<nil>"
	}
	return fmt.Sprintf("tsig{name: %s, algorithm: %s, secret_file: %s}", k.Name, k.Algorithm, k.SecretFile)
}

// LogValue keeps the secret out of logs.
func (k *TSIG) LogValue() slog.Value { return slog.StringValue(k.String()) }

// tsigAlgorithms maps the configured algorithm names to miekg/dns's.
var tsigAlgorithms = map[string]string{
	"hmac-sha1":   "hmac-sha1.",
	"hmac-sha224": "hmac-sha224.",
	"hmac-sha256": "hmac-sha256.",
	"hmac-sha384": "hmac-sha384.",
	"hmac-sha512": "hmac-sha512.",
}

var tsigAlgorithmNames = []string{"hmac-sha256", "hmac-sha512", "hmac-sha384", "hmac-sha224", "hmac-sha1"}

// maxSecretFile bounds a TSIG secret file (a key is tens of bytes).
const maxSecretFile = 64 << 10

// transfers parses the top-level transfer list. zones are the top-level
// zones: only those can be transferred.
func (p *Parser) transfers(m *Mapping, zones []Zone) []Transfer {
	items, path, present := m.List("transfer")
	if !present {
		return nil
	}
	known := map[string]bool{}
	for _, z := range zones {
		for _, n := range z.Names {
			known[n] = true
		}
	}
	first := map[string]string{} // zone -> the item path that lists it
	var out []Transfer
	for i, n := range items {
		ipath := IndexPath(path, i)
		tm := p.Mapping(n, ipath, "zones", "allow", "tsig", "notify", "notify_source")
		if tm == nil {
			continue
		}
		t := Transfer{Pos: p.Pos(n)}
		vals, nodes, zpath, zok := tm.Strings("zones")
		if !zok || len(vals) == 0 {
			p.Errorf(n, KeyPath(ipath, "zones"), "a transfer item needs zones: the zones secondaries may copy")
		}
		for j, s := range vals {
			jpath := IndexPath(zpath, j)
			names, err := zoneNamesOf(s) // as in zone keys
			if err != nil {
				p.Errorf(nodes[j], jpath, "%v", err)
				continue
			}
			for _, name := range names {
				what := fmt.Sprintf("%q", s)
				if strings.Contains(s, "/") {
					what = fmt.Sprintf("%q (from %s)", name, s)
				}
				switch {
				case !known[name]:
					p.Errorf(nodes[j], jpath, "zone %s is not a configured zone (transfer names top-level zones)", what)
				case first[name] != "":
					p.Errorf(nodes[j], jpath, "zone %s is already transferred by %s", what, first[name])
				default:
					first[name] = ipath
					t.Zones = append(t.Zones, name)
				}
			}
		}
		allow, aok := p.prefixList(tm, "allow")
		an, apath := tm.Get("allow")
		switch {
		case !aok:
			p.Errorf(n, apath, "a transfer item needs allow: the client ranges of its secondaries")
		case an.Kind == yaml.SequenceNode && len(an.Content) == 0:
			p.Errorf(an, apath, "empty allow list: no secondary could transfer")
		}
		t.Allow = allow
		t.TSIG = p.tsig(tm, ipath)
		t.Notify = p.notifyTargets(tm)
		t.NotifySource = p.notifySource(tm, t.Notify)
		out = append(out, t)
	}
	return out
}

// TSIG parses the tsig block of m (at YAML path path), as a transfer
// item's: nil when absent; problems are reported.
func (p *Parser) TSIG(m *Mapping, path string) *TSIG { return p.tsig(m, path) }

// tsig parses a transfer item's tsig block (nil when absent).
func (p *Parser) tsig(m *Mapping, ipath string) *TSIG {
	n, path := m.Get("tsig")
	if n == nil {
		return nil
	}
	km := p.Mapping(n, path, "name", "algorithm", "secret_file")
	if km == nil {
		return nil
	}
	k := &TSIG{}
	var name, alg, file string
	if nn := km.Str("name", &name); nn == nil {
		p.Errorf(n, KeyPath(path, "name"), "tsig needs the key's name")
	} else if norm, err := NormalizeName(name); err != nil || norm == "." {
		p.Errorf(nn, KeyPath(path, "name"), "bad key name %q: a domain name such as xfr-key", name)
	} else {
		k.Name = norm
	}
	if an := km.Enum("algorithm", &alg, tsigAlgorithmNames...); an == nil {
		p.Errorf(n, KeyPath(path, "algorithm"), "tsig needs an algorithm (%s)", strings.Join(tsigAlgorithmNames, ", "))
	} else if alg != "" {
		k.Algorithm = tsigAlgorithms[alg]
	}
	fn := km.Str("secret_file", &file)
	fpath := KeyPath(path, "secret_file")
	if fn == nil || file == "" {
		p.Errorf(n, fpath, "tsig needs secret_file: a file holding the base64 secret (never inline)")
		return k
	}
	full, ok := p.ReadableFile(fn, fpath, file)
	if !ok {
		return k
	}
	k.SecretFile = full
	data, _, err := fsutil.ReadFile(full, maxSecretFile)
	if err != nil {
		p.Errorf(fn, fpath, "file %s: %v", shownPath(full), unwrapPathErr(err))
		return k
	}
	// The file's content is never quoted in an error: it is a secret.
	raw, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(data)))
	switch {
	case err != nil:
		p.Errorf(fn, fpath, "file %s: the secret is not base64 (generate one with: openssl rand -base64 32)", full)
	case len(raw) == 0:
		p.Errorf(fn, fpath, "file %s: empty secret", full)
	default:
		k.Secret = base64.StdEncoding.EncodeToString(raw)
	}
	return k
}

// notifySource parses a transfer item's notify_source: an address of this
// host, of the family of every notify target.
func (p *Parser) notifySource(m *Mapping, targets []string) netip.Addr {
	n, path := m.Get("notify_source")
	if n == nil {
		return netip.Addr{}
	}
	s, ok := p.scalar(n, path)
	if !ok {
		return netip.Addr{}
	}
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		p.Errorf(n, path, "bad notify_source %q: not an IP address (the address NOTIFYs leave from; no port)", s)
		return netip.Addr{}
	}
	ip = ip.Unmap()
	if ip.IsUnspecified() || ip.IsMulticast() {
		p.Errorf(n, path, "bad notify_source %q: not a host's address (leave notify_source out to let the system choose)", s)
		return netip.Addr{}
	}
	for _, t := range targets {
		if ap, err := netip.ParseAddrPort(t); err == nil && ap.Addr().Unmap().Is4() != ip.Is4() {
			p.Errorf(n, path, "notify_source %s cannot reach notify target %s: another address family", ip, t)
			break
		}
	}
	return ip
}

// notifyTargets parses a transfer item's notify list: ip or ip:port.
func (p *Parser) notifyTargets(m *Mapping) []string {
	vals, nodes, path, _ := m.Strings("notify")
	var out []string
	for i, s := range vals {
		addr := s
		if ip, err := netip.ParseAddr(s); err == nil && ip.Zone() == "" {
			addr = net.JoinHostPort(ip.String(), strconv.Itoa(53))
		} else {
			hp, err := hostPort(s)
			host, _, _ := net.SplitHostPort(s)
			_, hostErr := netip.ParseAddr(host)
			switch {
			case !strings.Contains(s, ":"), err != nil && host != "" && hostErr != nil:
				err = fmt.Errorf("not an IP address (dnsd resolves no names here)")
			case err == nil && strings.HasPrefix(hp, ":"):
				err = fmt.Errorf("the host is missing")
			}
			if err != nil {
				p.Errorf(nodes[i], IndexPath(path, i), "bad notify target %q: %v (an IP, or IP:port; default port 53)", s, err)
				continue
			}
			addr = hp
		}
		if ap, err := netip.ParseAddrPort(addr); err == nil && (ap.Addr().IsUnspecified() || ap.Addr().IsMulticast()) {
			p.Errorf(nodes[i], IndexPath(path, i), "bad notify target %q: not a host's address (an IP, or IP:port; default port 53)", s)
			continue
		}
		out = append(out, addr)
	}
	return out
}
