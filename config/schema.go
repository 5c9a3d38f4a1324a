package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

//go:generate go run ./internal/schemagen -o ../dnsd.schema.json

// JSONSchema returns dnsd.schema.json: a JSON Schema (2020-12) of
// dnsd.yaml for editors (yaml-language-server) and CI linters. It is built
// here, beside the parser, from the same key lists, enums, bounds and
// defaults; TestSchemaKeys checks every mapping's keys against what the
// parser accepts. The schema catches what a schema can (unknown keys,
// wrong types, bad durations, unknown enum values, malformed addresses,
// out-of-range numbers); dnsd check catches the rest (readable files,
// duplicates, names inside their zone, whole-second TTLs, upper bounds of
// durations).
func JSONSchema() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rootSchema()); err != nil {
		return nil, fmt.Errorf("encoding the schema: %w", err)
	}
	return buf.Bytes(), nil
}

// schema is the part of JSON Schema 2020-12 the dnsd.yaml schema uses.
type schema struct {
	Schema               string              `json:"$schema,omitempty"`
	Ref                  string              `json:"$ref,omitempty"`
	Title                string              `json:"title,omitempty"`
	Description          string              `json:"description,omitempty"`
	Type                 any                 `json:"type,omitempty"` // string or []string
	Const                any                 `json:"const,omitempty"`
	Enum                 []any               `json:"enum,omitempty"`
	Default              any                 `json:"default,omitempty"`
	Pattern              string              `json:"pattern,omitempty"`
	Minimum              *int                `json:"minimum,omitempty"`
	Maximum              *int                `json:"maximum,omitempty"`
	MinItems             *int                `json:"minItems,omitempty"`
	MaxItems             *int                `json:"maxItems,omitempty"`
	Items                *schema             `json:"items,omitempty"`
	Properties           map[string]*schema  `json:"properties,omitempty"`
	PropertyNames        *schema             `json:"propertyNames,omitempty"`
	AdditionalProperties any                 `json:"additionalProperties,omitempty"` // false or *schema
	MinProperties        *int                `json:"minProperties,omitempty"`
	Required             []string            `json:"required,omitempty"`
	DependentRequired    map[string][]string `json:"dependentRequired,omitempty"`
	AnyOf                []*schema           `json:"anyOf,omitempty"`
	OneOf                []*schema           `json:"oneOf,omitempty"`
	Defs                 map[string]*schema  `json:"$defs,omitempty"`
}

func ptr(n int) *int { return &n }

// Every key may be written without a value (null): the default applies.
var (
	tString   = []string{"string", "null"}
	tBool     = []string{"boolean", "null"}
	tInt      = []string{"integer", "null"}
	tArray    = []string{"array", "null"}
	tObject   = []string{"object", "null"}
	noOthers  = false
	durationP = `^\+?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`
	// host:port with an IP literal (IPv6 in brackets) or no host, port not 0.
	hostPortP = `(\[[0-9A-Fa-f:.]+\]|[0-9.]*):[0-9]*[1-9][0-9]*`
	nameP     = `[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.?|\.`
)

// object is a mapping with exactly the keys in props.
func object(desc string, props map[string]*schema) *schema {
	return &schema{Description: desc, Type: tObject, Properties: props, AdditionalProperties: noOthers}
}

func str(desc string, def string) *schema {
	s := &schema{Description: desc, Type: tString}
	if def != "" {
		s.Default = def
	}
	return s
}

func file(desc string) *schema {
	return str(desc+" A path relative to dnsd.yaml's directory, or absolute; ~/ expands to $HOME. \"\" = unset.", "")
}

func boolean(desc string, def bool) *schema {
	return &schema{Description: desc, Type: tBool, Default: def}
}

func integer(desc string, def, lo int, hi *int) *schema {
	return &schema{Description: desc, Type: tInt, Default: def, Minimum: ptr(lo), Maximum: hi}
}

func enum(desc, def string, values ...string) *schema {
	s := &schema{Description: desc, Default: def}
	for _, v := range values {
		s.Enum = append(s.Enum, v)
	}
	s.Enum = append(s.Enum, nil)
	return s
}

// duration is a Go duration string; the integer 0 is one too.
func duration(desc string, def time.Duration) *schema {
	return &schema{Description: desc + " A Go duration: 500ms, 5s, 1m30s, 1h (no days).", Default: fmtDuration(def),
		AnyOf: []*schema{{Type: "string", Pattern: durationP}, {Const: 0}, {Type: "null"}}}
}

// fmtDuration writes a default the way the docs do (1h, 5m, 500ms).
func fmtDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

func list(desc string, items *schema) *schema {
	return &schema{Description: desc, Type: tArray, Items: items}
}

func patterned(desc, pattern string) *schema {
	return &schema{Description: desc, Type: "string", Pattern: pattern}
}

func fallthroughKey(def bool) *schema {
	return boolean("When the source has no data for a name, ask the next source of the zone instead of answering NXDOMAIN/NODATA.", def)
}

func rootSchema() *schema {
	cidr := patterned("An address/prefix-length (10.0.0.0/8, fd00::/8) or a bare IP.", `^[0-9A-Fa-f:.]+(/[0-9]{1,3})?$`)
	kinds := map[string]string{
		KindKubernetes: "kubernetes", KindEtcd: "etcd", KindHosts: "hosts", KindForward: "forward",
	}
	source := &schema{Description: "One source: a mapping with exactly one key, the source kind, and its settings."}
	for _, k := range sourceKinds {
		source.OneOf = append(source.OneOf, &schema{
			Type: "object", Required: []string{k}, AdditionalProperties: noOthers,
			Properties: map[string]*schema{k: {Ref: "#/$defs/" + kinds[k]}},
		})
	}
	listenItem := patterned("host:port with an IP literal ([v6]:port) or no host, optionally after udp://, tcp://, tls:// or https://.", `^((udp|tcp|tls|https)://)?`+hostPortP+`$`)
	zones := &schema{
		Description: "Zones and their ordered sources. A key is one or more zone names separated by spaces; a CIDR stands for its reverse zones.",
		Type:        "object", MinProperties: ptr(1),
		PropertyNames: &schema{Pattern: `^ *[A-Za-z0-9_.:/-]+( +[A-Za-z0-9_.:/-]+)* *$`},
		AdditionalProperties: &schema{
			Description: "The zone's sources, asked in order.",
			Type:        "array", MinItems: ptr(1), Items: source,
		},
	}
	return &schema{
		Schema:      "https://json-schema.org/draft/2020-12/schema",
		Title:       "dnsd.yaml",
		Description: "The configuration file of dnsd, a DNS server for VMs and bare metal (man dnsd.yaml, docs/configuration.md). Generated by go generate ./config; do not edit.",
		Type:        "object",
		Required:    []string{"zones"},
		// Unknown top-level keys are errors like any other.
		AdditionalProperties: noOthers,
		Properties: map[string]*schema{
			"listen": {
				Description: fmt.Sprintf("Addresses to serve on: host:port (UDP and TCP), udp://, tcp://, tls://host:port (DNS over TLS) or https://host:port (DNS over HTTPS); tls and https need the tls block. Default [%q].", DefaultListen),
				Type:        tArray, MinItems: ptr(1),
				Items: listenItem,
			},
			"tls": {
				Description: "Certificate for tls:// listeners.", Type: "object", AdditionalProperties: noOthers,
				Required: []string{"cert", "key"},
				Properties: map[string]*schema{
					"cert": file("PEM certificate chain file."),
					"key":  file("PEM private key file."),
				},
			},
			"http": {
				Description: "Address of the HTTP endpoints /metrics, /health, /ready. Omitted or \"\": disabled.",
				Type:        tString, Pattern: `^(` + hostPortP + `)?$`,
			},
			"log": object("Logging.", map[string]*schema{
				"level":   enum("Lowest level logged.", "info", "debug", "info", "warn", "error"),
				"format":  enum("text or json. Applies at the next restart.", "text", "text", "json"),
				"queries": boolean("Log one line per query.", false),
			}),
			"acl": object("Who may query. Default: everyone when every listen address is loopback, else loopback and RFC 1918/4193 clients.", map[string]*schema{
				"allow": {Description: "Client ranges allowed (omit for the default).", Type: tArray, MinItems: ptr(1), Items: cidr},
				"deny":  list("Client ranges refused; deny wins over allow.", cidr),
				"drop":  boolean("UDP: drop refused queries instead of answering REFUSED.", false),
			}),
			"limits": object("Resource limits.", map[string]*schema{
				"udp_buffer":          integer("EDNS0 UDP buffer size advertised and used upstream.", DefaultUDPBuffer, 512, ptr(65535)),
				"max_tcp_connections": integer("Concurrent TCP and TLS connections.", DefaultMaxTCPConnections, 1, nil),
				"max_tcp_per_client":  integer("TCP and TLS connections per client /24 (/56 for IPv6).", DefaultMaxTCPPerClient, 1, nil),
				"udp_rcvbuf":          integer("Receive buffer of each UDP listen socket, bytes; 0 = the kernel's default.", DefaultUDPRcvBuf, 0, ptr(1<<30)),
				"tcp_idle_timeout":    duration("Idle TCP connections are closed after this.", DefaultTCPIdleTimeout),
				"rate_per_client":     integer("UDP responses per second per client /24 (/56 for IPv6); 0 = off.", 0, 0, nil),
				"rate_drop":           boolean("Over the rate: drop instead of answering TC=1.", false),
			}),
			"cache": object("The response cache of forward sources.", map[string]*schema{
				"size":         integer("Entries.", DefaultCacheSize, 0, nil),
				"min_ttl":      duration("Lowest TTL an answer is cached for (at most 7 days, whole seconds).", 0),
				"max_ttl":      duration("Highest TTL an answer is cached for (at most 7 days, whole seconds).", DefaultMaxTTL),
				"negative_ttl": duration("Cap for NXDOMAIN/NODATA answers (whole seconds).", DefaultNegativeTTL),
				"serve_stale":  duration("Serve expired entries this long while upstreams fail; 0 = off.", DefaultServeStale),
				"prefetch":     boolean("Refresh popular entries before they expire.", true),
			}),
			"rotate": boolean("Rotate the order of the A and AAAA records of each answer (round robin).", false),
			"zones":  zones,
			"views": {
				Description: "Split horizon: views checked in order, the first that matches a query answers it from its zones, then the top-level zones.",
				Type:        tArray, MaxItems: ptr(maxViews),
				Items: &schema{
					Description: "One view: its clients and/or listen entries, and its zones.", Type: tObject, AdditionalProperties: noOthers,
					Required: []string{"name", "zones"},
					AnyOf:    []*schema{{Required: []string{"clients"}}, {Required: []string{"listen"}}},
					Properties: map[string]*schema{
						"name":    patterned("The view's name (metrics label view); not \"default\".", `^[A-Za-z0-9_-]{1,63}$`),
						"clients": {Description: "Client ranges of the view.", Type: tArray, MinItems: ptr(1), Items: cidr},
						"listen":  {Description: "Entries of the top-level listen whose queries the view takes.", Type: tArray, MinItems: ptr(1), Items: listenItem},
						"zones":   zones,
					},
				},
			},
		},
		Defs: map[string]*schema{
			"kubernetes": object("Cluster DNS from a Kubernetes API server.", map[string]*schema{
				"kubeconfig":         file("kubeconfig file. Omitted: in-cluster config, then $KUBECONFIG, then ~/.kube/config."),
				"context":            str("kubeconfig context; \"\" = the current one.", ""),
				"pods":               enum("Pod A records (a-b-c-d.ns.pod.zone).", "disabled", "disabled", "insecure", "verified"),
				"namespaces":         list("Only these namespaces are served; empty = all.", patterned("A namespace name.", `^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)),
				"endpoint_pod_names": boolean("Name endpoints without a hostname by their pod's name instead of their dashed IP.", false),
				"expose":             enum("cluster_ip, or external: LoadBalancer ingress and externalIPs.", "cluster_ip", "cluster_ip", "external"),
				"ttl":                duration("TTL of the answers (at most 1h, whole seconds).", DefaultKubernetesTTL),
				"sync_timeout":       duration("How long start-up readiness and a reload wait for the first sync.", DefaultSyncTimeout),
				"fallthrough":        fallthroughKey(defaultFallthrough(KindKubernetes)),
			}),
			"etcd": {
				Description: "SkyDNS records under an etcd prefix.", Type: tObject, AdditionalProperties: noOthers,
				DependentRequired: map[string][]string{"username": {"password_file"}, "password_file": {"username"}},
				Properties: map[string]*schema{
					"endpoints": {Description: fmt.Sprintf("etcd client URLs. Default [%q].", DefaultEtcdEndpoint), Type: tArray, MinItems: ptr(1),
						Items: patterned("http://host:port or https://host:port.", `^https?://[^/@?#\s]+/?$`)},
					"prefix": {Description: "Key prefix.", Type: tString, Default: DefaultEtcdPrefix, Pattern: `^/`},
					"tls": object("TLS for https:// endpoints.", map[string]*schema{
						"ca":          file("PEM CA bundle (default: system roots)."),
						"cert":        file("Client certificate (with key)."),
						"key":         file("Client key (with cert)."),
						"server_name": str("Name to verify in the server's certificate.", ""),
					}),
					"username":      str("User name; needs password_file.", ""),
					"password_file": file("File holding the password (never inline)."),
					"ttl":           duration("TTL of records without their own (whole seconds).", DefaultEtcdTTL),
					"sync_timeout":  duration("How long start-up readiness and a reload wait for the first sync.", DefaultSyncTimeout),
					"fallthrough":   fallthroughKey(defaultFallthrough(KindEtcd)),
				},
			},
			"hosts": {
				Description: "/etc/hosts-format files and inline entries; needs files, entries or both.", Type: "object", AdditionalProperties: noOthers,
				AnyOf: []*schema{
					{Required: []string{"files"}, Properties: map[string]*schema{"files": {Type: "array", MinItems: ptr(1)}}},
					{Required: []string{"entries"}, Properties: map[string]*schema{"entries": {Type: "array", MinItems: ptr(1)}}},
				},
				Properties: map[string]*schema{
					"files":       list("hosts files, watched for changes.", str("A hosts file (relative to dnsd.yaml's directory).", "")),
					"entries":     list("Inline entries \"IP name [name...]\"; a name without a dot gets the key's first zone appended; a first label \"*\" makes a wildcard (*.apps).", patterned("IP name [name...]", `^\s*[0-9A-Fa-f:.]+\s+\S`)),
					"ttl":         duration("TTL of the answers (whole seconds).", DefaultHostsTTL),
					"reverse":     boolean("Answer PTR queries for these addresses.", true),
					"fallthrough": fallthroughKey(defaultFallthrough(KindHosts)),
				},
			},
			"forward": {
				Description: "Upstream resolvers with a health-checked pool and the response cache.", Type: "object", AdditionalProperties: noOthers,
				Required: []string{"upstreams"},
				Properties: map[string]*schema{
					"upstreams": {Description: "Upstream resolvers: IP, IP:port, [IPv6]:port, udp://, tcp://, tls://IP[:port][@servername], https://IP[:port][/path][@servername], or resolv.conf.",
						Type: "array", MinItems: ptr(1),
						Items: patterned("An upstream.", `^(resolv\.conf|((udp|tcp|tls)://)?(\[[0-9A-Fa-f:.]+\]|[0-9A-Fa-f:.]+)(:[0-9]+)?(@(`+nameP+`))?|https://(\[[0-9A-Fa-f:.]+\]|[0-9A-Fa-f:.]+)(:[0-9]+)?(/[^?#@ ]*)?(@(`+nameP+`))?)$`)},
					"tls_ca":         file("PEM CA bundle for tls:// and https:// upstreams (default: system roots)."),
					"policy":         enum("How an upstream is picked.", "random", "random", "round_robin", "sequential"),
					"timeout":        duration("Per attempt.", DefaultForwardTimeout),
					"health_check":   duration("Probe interval of an upstream after a failure.", DefaultForwardHealthCheck),
					"max_fails":      integer("Consecutive failures before an upstream is down.", DefaultForwardMaxFails, 1, nil),
					"max_concurrent": integer("Forwards in flight; over it: REFUSED.", DefaultForwardMaxConcurrent, 1, nil),
					"except":         list("Names under these are not forwarded.", patterned("A domain name.", `^(`+nameP+`)$`)),
					"fallthrough":    fallthroughKey(defaultFallthrough(KindForward)),
				},
			},
		},
	}
}
