package config

import (
	"fmt"
	"log/slog"
	"net/netip"
	"time"
)

// Pos is a position in a config file.
type Pos struct {
	File string // the config file; always set
	Line int    // 1-based; always set
	Col  int    // 1-based; always set
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// Config is a whole, validated dnsd.yaml with defaults applied.
type Config struct {
	File   string   // path it was read from; always set
	Listen []Listen // default one entry, DefaultListen
	TLS    *TLS     // default nil: no tls block
	HTTP   string   // default "": disabled
	// HTTPPos is where http is set (for errors such as a failed bind);
	// zero when http is not written.
	HTTPPos Pos
	Log     Log    // default level info, format text
	ACL     ACL    // default Default: true
	Limits  Limits // default: each field's default
	// Blocks are the top-level blocks the kinds own (BlockOwner), by
	// key: each the owner's settings value, its defaults when the block
	// is not written (forward's cache); always set.
	Blocks map[string]any
	// Rotate: answers rotate the order of their A and AAAA records, one
	// step per response (key rotate, default false).
	Rotate bool
	// StateDir is the directory dnsd keeps state in across restarts
	// (key state_dir, default DefaultStateDir; resolved).
	StateDir string
	Zones    []Zone // in file order; required, at least one
	Views    []View // in file order; the first that matches a query wins; default none
	// Transfers are the zone transfer items (key transfer), in file
	// order; default none.
	Transfers []Transfer
	// Updates are the dynamic update items (key update), in file order;
	// default none (nil).
	Updates []Update
}

// Update is one item of the top-level update list: who may change which
// records of some zones by dynamic update (RFC 2136).
type Update struct {
	Zones []string       // lower-case FQDNs of top-level zones; required, not empty
	TSIG  *TSIG          // nil: unsigned updates
	Allow []netip.Prefix // nil: any client (allow not written)
	// Names are owner patterns, lower-case FQDNs in which a label "*"
	// stands for one or more whole labels; nil: every name of the zones.
	Names []string
	Types []uint16 // allowed RR types; nil: the default (any type but SOA, DNSSEC types, apex NS)
	Pos   Pos      // where the item is written; always set
}

// View is one split-horizon view: its own zones for the clients and/or
// listen entries it names (key views).
type View struct {
	Name    string         // required
	Clients []netip.Prefix // default empty: every client
	Listen  []Listen       // entries of the top-level listen; default empty: all
	Zones   []Zone         // required
	Pos     Pos            // where the view is written; always set
}

// Listen is one listen entry. Proto "" means UDP and TCP on Addr.
type Listen struct {
	Proto string // default "" (UDP and TCP), "udp", "tcp", "tls", "https" (DNS over HTTPS)
	Addr  string // host:port normalised (host is an IP literal or "", port 1-65535)
	Pos   Pos    // where the entry is written; zero for the default entry
}

func (l Listen) String() string {
	if l.Proto == "" {
		return l.Addr
	}
	return l.Proto + "://" + l.Addr
}

// TLS is the server certificate for tls:// listeners.
type TLS struct {
	Cert string // resolved path; required
	Key  string // resolved path; required
	Pos  Pos    // where the block is written; always set
}

// Log configures log/slog.
type Log struct {
	Level   slog.Level // default info
	Format  string     // "text" (default) | "json"
	Queries bool       // one line per query; default false
}

// ACL says who may query. When Default is true, Allow was not given and
// the documented safe default applies: everyone on a loopback listen
// address, else only loopback and RFC 1918/4193 ranges.
type ACL struct {
	Allow   []netip.Prefix // default none (Default)
	Deny    []netip.Prefix // default none
	Default bool           // default true: allow was not written
	Drop    bool           // UDP: drop refused clients instead of answering REFUSED (key acl.drop); default false
}

// Limits are the server's resource limits.
type Limits struct {
	UDPBuffer         uint16        // default 1232
	MaxTCPConnections int           // default 1000
	MaxTCPPerClient   int           // TCP/TLS connections per client /24 (/56), default 64
	MaxTCPPipeline    int           // queries of one TCP/TLS connection answered at once, default 16
	UDPRcvBuf         int           // socket receive buffer of UDP listeners in bytes, default 4 MiB; 0 = the kernel's default
	TCPIdleTimeout    time.Duration // default 10s
	RatePerClient     int           // UDP responses/s per /24 (/56), default 0 = off
	RateDrop          bool          // over the rate: drop instead of TC=1 (key limits.rate_drop), default false
	MaxTransfers      int           // zone transfers (AXFR, IXFR) sent at once, default 10; more get SERVFAIL
	MaxUpdateSize     int           // bytes of one UPDATE message, default 65535 (512..65535)
	MaxUpdateRRs      int           // prerequisite and update RRs of one UPDATE, default 1000 (1..65535)
}

// Zone is one key of `zones:`: one or more zone names sharing one ordered
// source list.
type Zone struct {
	Key     string   // the key as written; never empty
	Names   []string // lower-case FQDNs ("example.internal.", "10.in-addr.arpa.", "."); never empty
	Sources []Source // required, at least one
	Pos     Pos      // where the key is written; always set
}

// Source is one entry of a zone's source list.
type Source struct {
	Kind        string // the kind's name (KindParser.Name); always set
	Fallthrough bool   // default per kind (KindParser.DefaultFallthrough)
	Pos         Pos    // where the source is written; always set
	// Settings is what the kind's Settings read: the kind's own
	// settings type, defaults applied; never nil.
	Settings any
}
