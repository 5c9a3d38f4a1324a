package secondary

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/dnsd/dnsd/config"
)

// DefaultPort is a primary's port when its entry names none.
const DefaultPort = 53

// Config is a secondary source's settings (its block in dnsd.yaml).
type Config struct {
	// Primaries are asked in order, the next only when one fails;
	// required, at least one.
	Primaries []netip.AddrPort `dnsd:"primaries,required" minitems:"1" doc:"The primaries' IP addresses (port 53 unless given: \"10.0.0.6:5300\"), asked in order." item:"An IP address, or IP:port." pattern:"^(\\[[0-9A-Fa-f:.]+\\]|[0-9A-Fa-f:.]+)(:[0-9]+)?$"`
	// TSIG describes the tsig block for the schema; default none. It is
	// read as a transfer item's, into Key.
	TSIG TSIGSettings `dnsd:"tsig" doc:"TSIG key signing the requests; every message of the answers must be signed with it."`

	// Key signs every request and must sign every message of the
	// answers and every NOTIFY; nil: unsigned.
	Key *config.TSIG
	// Zone is the zone copied: the zone key's only zone (lower-case
	// FQDN); "" only when the key names several (an error).
	Zone string
	// StateDir is the config's state_dir (set by Build; "" until then):
	// the copy is kept under StateDir/secondary.
	StateDir string
}

// TSIGSettings is the tsig block: the keys of a transfer item's tsig.
type TSIGSettings struct {
	// Name is the key's name; required in the block.
	Name string `dnsd:"name" doc:"The key's name."`
	// Algorithm is the HMAC; required in the block.
	Algorithm string `dnsd:"algorithm" enum:"hmac-sha256,hmac-sha512,hmac-sha384,hmac-sha224,hmac-sha1" doc:"HMAC algorithm."`
	// SecretFile holds the base64 secret; required in the block.
	SecretFile string `dnsd:"secret_file" doc:"File holding the base64 secret (never inline)."`
}

// describe describes the secondary block: primaries, tsig.
func describe() *config.Settings {
	return config.NewSettings(config.Description[Config]{
		Schema: config.Schema{Description: "A copy of the zone transferred from its primaries (AXFR, then IXFR), kept in state_dir.", Type: "object"},
		Fields: map[string]func(*config.Block, *Config){
			"primaries": parsePrimaries,
			"tsig":      func(b *config.Block, c *Config) { c.Key = b.Parser.TSIG(b.Mapping, b.Path) },
		},
		Check: func(b *config.Block, c *Config) {
			switch n := len(b.Zone.Names); {
			case n == 1:
				c.Zone = b.Zone.Names[0]
			case n > 1:
				b.Errorf(nil, b.Path, "secondary copies one zone; the zone key names %d (give each its own key)", n)
			}
		},
	})
}

// parsePrimaries reads primaries: IP addresses, port 53 by default.
func parsePrimaries(b *config.Block, c *Config) {
	vals, nodes, path, present := b.Strings("primaries")
	if !present || len(vals) == 0 && b.EmptyList("primaries") {
		b.Errorf(nil, config.KeyPath(b.Path, "primaries"), `secondary needs primaries: the IP addresses of the zone's primaries, such as ["10.0.0.5", "10.0.0.6:5300"]`)
	}
	seen := map[netip.AddrPort]bool{}
	for i, s := range vals {
		ap, err := ParsePrimary(s)
		ipath := config.IndexPath(path, i)
		switch {
		case err != nil:
			b.Errorf(nodes[i], ipath, "%v", err)
		case seen[ap]:
			b.Errorf(nodes[i], ipath, "primary %s is listed twice", ap)
		default:
			seen[ap] = true
			c.Primaries = append(c.Primaries, ap)
		}
	}
}

// ParsePrimary reads a primary entry: an IP address with an optional
// port ("10.0.0.5", "10.0.0.6:5300", "2001:db8::5", "[2001:db8::5]:5300").
func ParsePrimary(s string) (netip.AddrPort, error) {
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil && !strings.Contains(s, "%") {
		return netip.AddrPortFrom(a.Unmap(), DefaultPort), nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = s, strconv.Itoa(DefaultPort)
	}
	a, err := netip.ParseAddr(host)
	if err != nil || a.Zone() != "" {
		return netip.AddrPort{}, fmt.Errorf("primary %q: %q is not an IP address (primaries are IP addresses, not hostnames)", s, host)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return netip.AddrPort{}, fmt.Errorf("primary %q: bad port %q (1-65535)", s, port)
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(p)), nil
}
