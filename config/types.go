// Package config reads and validates dnsd.yaml into typed,
// defaulted values. Every problem is reported with FILE:LINE:COL; parsing
// never touches the network.
package config

import (
	"fmt"
	"log/slog"
	"net/netip"
	"time"
)

// Pos is a position in a config file.
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// Config is a whole, validated dnsd.yaml with defaults applied.
type Config struct {
	File   string // path it was read from
	Listen []Listen
	TLS    *TLS   // nil when absent
	HTTP   string // "" = disabled
	Log    Log
	ACL    ACL
	Limits Limits
	Cache  Cache
	// Rotate: answers rotate the order of their A and AAAA records, one
	// step per response (key rotate, default false).
	Rotate bool
	Zones  []Zone // in file order
	Views  []View // in file order; the first that matches a query wins
	// Transfers are the zone transfer items (key transfer), in file order.
	Transfers []Transfer
}

// View is one split-horizon view: its own zones for the clients and/or
// listen entries it names (key views).
type View struct {
	Name    string
	Clients []netip.Prefix // empty: every client
	Listen  []Listen       // entries of the top-level listen; empty: all
	Zones   []Zone
	Pos     Pos
}

// Listen is one listen entry. Proto "" means UDP and TCP on Addr.
type Listen struct {
	Proto string // "", "udp", "tcp", "tls", "https" (DNS over HTTPS)
	Addr  string // host:port normalised (host is an IP literal or "", port 1-65535)
	Pos   Pos
}

func (l Listen) String() string {
	if l.Proto == "" {
		return l.Addr
	}
	return l.Proto + "://" + l.Addr
}

// TLS is the server certificate for tls:// listeners.
type TLS struct {
	Cert string
	Key  string
	Pos  Pos
}

// Log configures log/slog.
type Log struct {
	Level   slog.Level // default info
	Format  string     // "text" (default) | "json"
	Queries bool       // one line per query
}

// ACL says who may query. When Default is true, Allow was not given and
// the documented safe default applies: everyone on a loopback listen
// address, else only loopback and RFC 1918/4193 ranges.
type ACL struct {
	Allow   []netip.Prefix
	Deny    []netip.Prefix
	Default bool
	Drop    bool // UDP: drop refused clients instead of answering REFUSED (key acl.drop)
}

// Limits are the server's resource limits.
type Limits struct {
	UDPBuffer         uint16        // default 1232
	MaxTCPConnections int           // default 1000
	MaxTCPPerClient   int           // TCP/TLS connections per client /24 (/56), default 64
	UDPRcvBuf         int           // socket receive buffer of UDP listeners in bytes, default 4 MiB; 0 = the kernel's default
	TCPIdleTimeout    time.Duration // default 10s
	RatePerClient     int           // UDP responses/s per /24 (/56), 0 = off
	RateDrop          bool          // over the rate: drop instead of TC=1 (key limits.rate_drop)
}

// Cache configures the forward response cache.
type Cache struct {
	Size        int           // default 100000
	MinTTL      time.Duration // default 0
	MaxTTL      time.Duration // default 1h
	NegativeTTL time.Duration // default 5m
	ServeStale  time.Duration // default 1h, 0 = off
	Prefetch    bool          // default true
}

// Zone is one key of `zones:`: one or more zone names sharing one ordered
// source list.
type Zone struct {
	Key     string   // the key as written
	Names   []string // lower-case FQDNs ("example.internal.", "10.in-addr.arpa.", ".")
	Sources []Source
	Pos     Pos
}

// Source kinds.
const (
	KindKubernetes = "kubernetes"
	KindEtcd       = "etcd"
	KindHosts      = "hosts"
	KindForward    = "forward"
)

// Source is one entry of a zone's source list. Exactly one of the kind
// pointers is set, matching Kind.
type Source struct {
	Kind        string
	Fallthrough bool // defaulted per kind: false for kubernetes, true otherwise
	Pos         Pos

	Kubernetes *Kubernetes
	Etcd       *Etcd
	Hosts      *Hosts
	Forward    *Forward
}

// Kubernetes is the kubernetes source's settings.
type Kubernetes struct {
	Kubeconfig       string // "" = in-cluster, then $KUBECONFIG, then ~/.kube/config; when set: readable, ~ expanded, relative to the config file
	Context          string
	Pods             string   // disabled (default) | insecure | verified
	Namespaces       []string // lower-case DNS labels; empty = all
	EndpointPodNames bool
	Expose           string        // cluster_ip (default) | external
	TTL              time.Duration // default 5s, 0..1h, whole seconds
	SyncTimeout      time.Duration // default 5s, > 0
}

// Etcd is the etcd source's settings.
type Etcd struct {
	Endpoints    []string // default ["http://127.0.0.1:2379"]
	Prefix       string   // default "/skydns"; starts with "/", no trailing "/" (except "/" itself)
	TLS          ClientTLS
	Username     string
	PasswordFile string        // readable file; set together with Username
	TTL          time.Duration // default 5m, 0..7d, whole seconds
	SyncTimeout  time.Duration // default 5s
}

// ClientTLS is a TLS client configuration. Files are resolved paths,
// checked readable (CA: at least one PEM certificate; Cert+Key: a matching
// pair); ServerName is lower case without a trailing dot.
type ClientTLS struct {
	CA         string
	Cert       string
	Key        string
	ServerName string
}

// Hosts is the hosts source's settings.
type Hosts struct {
	Files   []string // readable regular files; ~ expanded, relative paths resolved against the config file's directory
	Entries []HostsEntry
	TTL     time.Duration // default 1h, 0..7d, whole seconds
	Reverse bool          // default true
}

// HostsEntry is one inline entry, with names already completed (a name
// without a dot gets the zone key's first zone appended) and lower-cased.
type HostsEntry struct {
	Line  string // as written
	Addr  netip.Addr
	Names []string // lower-case FQDNs
	Pos   Pos
}

// Forward is the forward source's settings.
type Forward struct {
	Upstreams     []Upstream
	TLSCA         string        // PEM bundle for tls:// upstreams ("" = system roots)
	Policy        string        // random (default) | round_robin | sequential
	Timeout       time.Duration // default 2s
	HealthCheck   time.Duration // default 500ms
	MaxFails      int           // default 2
	MaxConcurrent int           // default 1000
	Except        []string      // lower-case FQDNs
}

// Upstream is one upstream of a forward source. ResolvConf marks the
// "resolv.conf" form, expanded at compile time.
type Upstream struct {
	Proto      string // "udp" (plain or udp://: UDP with TCP retry), "tcp", "tls", "https"; "" for resolv.conf
	Addr       string // ip:port, normalised; default port 53, 853 for tls, 443 for https
	Path       string // https: the URL path, default /dns-query
	ServerName string // tls:// or https:// ...@name, lower case, no trailing dot; "" = verify the IP
	ResolvConf bool
	Raw        string
	Pos        Pos
}
