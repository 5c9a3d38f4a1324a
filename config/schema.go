package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"time"
)

//go:generate go run ../internal/schemagen -o ../dnsd.schema.json

// JSONSchema returns dnsd.schema.json: a JSON Schema (2020-12) of
// dnsd.yaml for editors (yaml-language-server) and CI linters. It is built
// here, beside the parser, from the same key lists, enums, bounds and
// defaults; TestSchemaKeys checks every mapping's keys against what the
// parser accepts. The schema catches what a schema can (unknown keys,
// wrong types, bad durations, unknown enum values, malformed addresses,
// out-of-range numbers); dnsd check catches the rest (readable files,
// duplicates, names inside their zone, whole-second TTLs, upper bounds of
// durations).
func JSONSchema(kinds KindParsers) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rootSchema(kinds)); err != nil {
		return nil, fmt.Errorf("encoding the schema: %w", err)
	}
	return buf.Bytes(), nil
}

// Schema is the part of JSON Schema 2020-12 the dnsd.yaml Schema uses.
type Schema struct {
	Schema               string              `json:"$schema,omitempty"`              // zero: omitted
	Ref                  string              `json:"$ref,omitempty"`                 // zero: omitted
	Title                string              `json:"title,omitempty"`                // zero: omitted
	Description          string              `json:"description,omitempty"`          // zero: omitted
	Type                 any                 `json:"type,omitempty"`                 // string or []string; nil: omitted
	Const                any                 `json:"const,omitempty"`                // zero: omitted
	Enum                 []any               `json:"enum,omitempty"`                 // zero: omitted
	Default              any                 `json:"default,omitempty"`              // zero: omitted
	Pattern              string              `json:"pattern,omitempty"`              // zero: omitted
	Minimum              *int                `json:"minimum,omitempty"`              // zero: omitted
	Maximum              *int                `json:"maximum,omitempty"`              // zero: omitted
	MinItems             *int                `json:"minItems,omitempty"`             // zero: omitted
	MaxItems             *int                `json:"maxItems,omitempty"`             // zero: omitted
	Items                *Schema             `json:"items,omitempty"`                // zero: omitted
	Properties           map[string]*Schema  `json:"properties,omitempty"`           // zero: omitted
	PropertyNames        *Schema             `json:"propertyNames,omitempty"`        // zero: omitted
	AdditionalProperties any                 `json:"additionalProperties,omitempty"` // false or *schema; nil: omitted
	MinProperties        *int                `json:"minProperties,omitempty"`        // zero: omitted
	Required             []string            `json:"required,omitempty"`             // zero: omitted
	DependentRequired    map[string][]string `json:"dependentRequired,omitempty"`    // zero: omitted
	AnyOf                []*Schema           `json:"anyOf,omitempty"`                // zero: omitted
	OneOf                []*Schema           `json:"oneOf,omitempty"`                // zero: omitted
	Defs                 map[string]*Schema  `json:"$defs,omitempty"`                // zero: omitted
}

func Ptr(n int) *int { return &n }

// Every key may be written without a value (null): the default applies.
var (
	TString   = []string{"string", "null"}
	TBool     = []string{"boolean", "null"}
	TInt      = []string{"integer", "null"}
	TArray    = []string{"array", "null"}
	TObject   = []string{"object", "null"}
	noOthers  = false
	durationP = `^\+?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`
	// host:port with an IP literal (IPv6 in brackets) or no host, port not 0.
	hostPortP   = `(\[[0-9A-Fa-f:.]+(%[^\]]+)?\]|[0-9.]*):[0-9]*[1-9][0-9]*` // [fe80::1%eth0]:53 too
	NamePattern = `[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.?|\.`
)

// ObjectSchema is a mapping with exactly the keys in props.
func ObjectSchema(desc string, props map[string]*Schema) *Schema {
	return &Schema{Description: desc, Type: TObject, Properties: props, AdditionalProperties: noOthers}
}

func StringSchema(desc string, def string) *Schema {
	s := &Schema{Description: desc, Type: TString}
	if def != "" {
		s.Default = def
	}
	return s
}

func FileSchema(desc string) *Schema {
	return StringSchema(desc+" A path relative to dnsd.yaml's directory, or absolute; ~/ expands to $HOME. \"\" = unset.", "")
}

// requiredFile is a FileSchema that must be set: a string, not empty.
func requiredFile(s *Schema) *Schema {
	s.Type, s.Pattern = "string", "."
	return s
}

func BoolSchema(desc string, def bool) *Schema {
	return &Schema{Description: desc, Type: TBool, Default: def}
}

func IntSchema(desc string, def, lo int, hi *int) *Schema {
	return &Schema{Description: desc, Type: TInt, Default: def, Minimum: Ptr(lo), Maximum: hi}
}

func EnumSchema(desc, def string, values ...string) *Schema {
	s := &Schema{Description: desc, Default: def}
	for _, v := range values {
		s.Enum = append(s.Enum, v)
	}
	s.Enum = append(s.Enum, nil)
	return s
}

// DurationSchema is a Go DurationSchema string; the integer 0 is one too.
func DurationSchema(desc string, def time.Duration) *Schema {
	return &Schema{Description: desc + " A Go duration: 500ms, 5s, 1m30s, 1h (no days).", Default: fmtDuration(def),
		AnyOf: []*Schema{{Type: "string", Pattern: durationP}, {Const: 0}, {Const: "0"}, {Type: "null"}}}
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

func ListSchema(desc string, items *Schema) *Schema {
	return &Schema{Description: desc, Type: TArray, Items: items}
}

func PatternSchema(desc, pattern string) *Schema {
	return &Schema{Description: desc, Type: "string", Pattern: pattern}
}

// FallthroughSchema is the fallthrough key every source kind has.
func FallthroughSchema(def bool) *Schema {
	return BoolSchema("When the source has no data for a name, ask the next source of the zone instead of answering NXDOMAIN/NODATA.", def)
}

func rootSchema(kinds KindParsers) *Schema {
	cidr := PatternSchema("An address/prefix-length (10.0.0.0/8, fd00::/8) or a bare IP.", `^[0-9A-Fa-f:.]+(/[0-9]{1,3})?$`)
	source := &Schema{Description: "One source: a mapping with exactly one key, the source kind, and its settings; or just the kind, with every setting at its default."}
	defs := map[string]*Schema{}
	// Just the kind (- kubernetes), or the kind with no settings
	// (- kubernetes:), only for kinds whose every setting has a default.
	bare := &Schema{Type: "string"}
	source.OneOf = append(source.OneOf, bare)
	for _, name := range kinds.names() {
		k := kinds.lookup(name)
		ks := k.Settings().Schema()
		settings := &Schema{Ref: "#/$defs/" + name}
		if len(ks.Required) == 0 && len(ks.AnyOf) == 0 && len(ks.OneOf) == 0 {
			bare.Enum = append(bare.Enum, name)
			settings = &Schema{AnyOf: []*Schema{settings, {Type: "null"}}}
		}
		source.OneOf = append(source.OneOf, &Schema{
			Type: "object", Required: []string{name}, AdditionalProperties: noOthers,
			Properties: map[string]*Schema{name: settings},
		})
		def := *ks
		def.Properties = maps.Clone(def.Properties)
		def.Properties["fallthrough"] = FallthroughSchema(k.DefaultFallthrough())
		defs[name] = &def
	}
	zoneName := PatternSchema("A zone name, or a CIDR for its reverse zones.", `^(`+NamePattern+`|[0-9A-Fa-f.:]+/[0-9]+)$`)
	listenItem := PatternSchema("host:port with an IP literal ([v6]:port) or no host, optionally after udp://, tcp://, tls:// or https://.", `^((udp|tcp|tls|https)://)?`+hostPortP+`$`)
	zones := &Schema{
		Description: "Zones and their ordered sources. A key is one or more zone names separated by spaces; a CIDR stands for its reverse zones.",
		Type:        "object", MinProperties: Ptr(1),
		PropertyNames: &Schema{Pattern: `^ *[A-Za-z0-9_.:/-]+( +[A-Za-z0-9_.:/-]+)* *$`},
		AdditionalProperties: &Schema{
			Description: "The zone's sources, asked in order.",
			Type:        "array", MinItems: Ptr(1), Items: source,
		},
	}
	root := &Schema{
		Schema:      "https://json-schema.org/draft/2020-12/schema",
		Title:       "dnsd.yaml",
		Description: "The configuration file of dnsd, a DNS server for VMs and bare metal (man dnsd.yaml, docs/configuration.md). Generated by go generate ./config; do not edit.",
		Type:        "object",
		Required:    []string{"zones"},
		// Unknown top-level keys are errors like any other.
		AdditionalProperties: noOthers,
		Properties: map[string]*Schema{
			"listen": {
				Description: fmt.Sprintf("Addresses to serve on: host:port (UDP and TCP), udp://, tcp://, tls://host:port (DNS over TLS) or https://host:port (DNS over HTTPS); tls and https need the tls block. Default [%q].", DefaultListen),
				Type:        TArray, MinItems: Ptr(1),
				Items: listenItem,
			},
			"tls": {
				Description: "Certificate for tls:// listeners.", Type: "object", AdditionalProperties: noOthers,
				Required: []string{"cert", "key"},
				Properties: map[string]*Schema{
					"cert": requiredFile(FileSchema("PEM certificate chain file.")),
					"key":  requiredFile(FileSchema("PEM private key file.")),
				},
			},
			"http": {
				Description: "Address of the HTTP endpoints /metrics, /health, /ready. Omitted or \"\": disabled.",
				Type:        TString, Pattern: `^(` + hostPortP + `)?$`,
			},
			"log": ObjectSchema("Logging.", map[string]*Schema{
				"level":   EnumSchema("Lowest level logged.", "info", "debug", "info", "warn", "error"),
				"format":  EnumSchema("text or json. Applies at the next restart.", "text", "text", "json"),
				"queries": BoolSchema("Log one line per query.", false),
			}),
			"acl": ObjectSchema("Who may query. Default, per listen entry: everyone on a loopback address, else loopback and RFC 1918/4193 clients.", map[string]*Schema{
				"allow": {Description: "Client ranges allowed (omit for the default).", Type: TArray, MinItems: Ptr(1), Items: cidr},
				"deny":  ListSchema("Client ranges refused; deny wins over allow.", cidr),
				"drop":  BoolSchema("UDP: drop refused queries instead of answering REFUSED.", false),
			}),
			"limits": ObjectSchema("Resource limits.", map[string]*Schema{
				"udp_buffer":          IntSchema("EDNS0 UDP buffer size advertised and used upstream.", DefaultUDPBuffer, 512, Ptr(65535)),
				"max_tcp_connections": IntSchema("Concurrent TCP and TLS connections.", DefaultMaxTCPConnections, 1, nil),
				"max_tcp_per_client":  IntSchema("TCP and TLS connections per client /24 (/56 for IPv6).", DefaultMaxTCPPerClient, 1, nil),
				"max_tcp_pipeline":    IntSchema("Queries of one TCP or TLS connection answered at once (pipelined); more wait for answers.", DefaultMaxTCPPipeline, 1, Ptr(1024)),
				"udp_rcvbuf":          IntSchema("Receive buffer of each UDP listen socket, bytes; 0 = the kernel's default.", DefaultUDPRcvBuf, 0, Ptr(1<<30)),
				"tcp_idle_timeout":    DurationSchema("TCP and TLS connections with no query in flight are closed after this.", DefaultTCPIdleTimeout),
				"rate_per_client":     IntSchema("UDP responses per second per client /24 (/56 for IPv6); 0 = off.", 0, 0, nil),
				"rate_drop":           BoolSchema("Over the rate: drop instead of answering TC=1.", false),
				"max_transfers":       IntSchema("Zone transfers (AXFR, IXFR) sent at once; more get SERVFAIL.", DefaultMaxTransfers, 1, Ptr(10000)),
				"max_update_size":     IntSchema("Bytes of one UPDATE message.", DefaultMaxUpdateSize, 512, Ptr(65535)),
				"max_update_rrs":      IntSchema("Prerequisite and update records of one UPDATE.", DefaultMaxUpdateRRs, 1, Ptr(65535)),
			}),
			"rotate":    BoolSchema("Rotate the order of the A and AAAA records of each answer (round robin).", false),
			"zones":     zones,
			"state_dir": StringSchema("Directory for what dnsd keeps across restarts (the copies of secondary zones), relative to this file.", DefaultStateDir),
			"transfer": {
				Description: "Zone transfers (AXFR, IXFR) to secondaries and NOTIFY when a zone's serial rises. A zone appears in one item at most.",
				Type:        TArray,
				Items: &Schema{
					Description: "Zones, the secondaries that may copy them, an optional TSIG key and the secondaries to notify.", Type: TObject, AdditionalProperties: noOthers,
					Required: []string{"zones", "allow"},
					Properties: map[string]*Schema{
						"zones":         {Description: "Top-level zones (names as in zones keys).", Type: "array", MinItems: Ptr(1), Items: zoneName},
						"allow":         {Description: "Client ranges that may transfer (TCP and TLS only).", Type: "array", MinItems: Ptr(1), Items: cidr},
						"tsig":          tsigSchema("TSIG key (RFC 8945): transfers must be signed with it, responses and NOTIFYs are.", "secondaries"),
						"notify":        ListSchema("Secondaries told when the zone's serial rises: IP or IP:port (default port 53).", PatternSchema("IP or IP:port.", `^([0-9.]+|[0-9A-Fa-f:]+|`+hostPortP+`)$`)),
						"notify_source": PatternSchema("Address NOTIFYs leave from (default: the listen address of the target's family).", `^([0-9.]+|[0-9A-Fa-f:]+)$`),
					},
				},
			},
			"update": {
				Description: "Dynamic updates (RFC 2136 UPDATE): who may change which records of which zones. A zone may appear in several items, each a grant of its own.",
				Type:        TArray,
				Items: &Schema{
					Description: "Zones, a TSIG key and/or client ranges the update must come with, and the names and types it may change.", Type: "object", AdditionalProperties: noOthers,
					Required: []string{"zones"},
					AnyOf:    []*Schema{{Required: []string{"tsig"}}, {Required: []string{"allow"}}},
					Properties: map[string]*Schema{
						"zones": {Description: "Top-level zones (names as in zones keys), each with exactly one writable source (dynamic).", Type: "array", MinItems: Ptr(1), Items: zoneName},
						"tsig":  tsigSchema("TSIG key (RFC 8945): updates must be signed with it; with allow, both must hold.", "clients"),
						"allow": {Description: "Client ranges that may update; with tsig, both must hold. Omitted: any client (then tsig is required).", Type: "array", MinItems: Ptr(1), Items: cidr},
						"names": {Description: "Owner names the item lets clients change, a label * standing for one or more whole labels (*.dhcp.corp.internal, _acme-challenge.*). Omitted: every name of the zones.", Type: "array", MinItems: Ptr(1),
							Items: PatternSchema("A domain name whose labels may also be *.", `^((\*|[A-Za-z0-9_-]+)(\.(\*|[A-Za-z0-9_-]+))*\.?|\.)$`)},
						"types": {Description: "Record types the item lets clients change (A, AAAA, PTR, TXT, TYPEnnn; any case). Omitted: every type but SOA, the DNSSEC types and the apex NS.", Type: "array", MinItems: Ptr(1),
							Items: PatternSchema("A record type mnemonic or TYPEnnn.", `^[A-Za-z][A-Za-z0-9-]*$`)},
					},
				},
			},
			"views": {
				Description: "Split horizon: views checked in order, the first that matches a query answers it from its zones, then the top-level zones.",
				Type:        TArray, MaxItems: Ptr(maxViews),
				Items: &Schema{
					Description: "One view: its clients and/or listen entries, and its zones.", Type: TObject, AdditionalProperties: noOthers,
					Required: []string{"name", "zones"},
					// A key with no value is as if left out.
					AnyOf: []*Schema{
						{Required: []string{"clients"}, Properties: map[string]*Schema{"clients": {Type: "array"}}},
						{Required: []string{"listen"}, Properties: map[string]*Schema{"listen": {Type: "array"}}},
					},
					Properties: map[string]*Schema{
						"name":    PatternSchema("The view's name (metrics label view); not \"default\".", `^[A-Za-z0-9_-]{1,63}$`),
						"clients": {Description: "Client ranges of the view.", Type: TArray, MinItems: Ptr(1), Items: cidr},
						"listen":  {Description: "Entries of the top-level listen whose queries the view takes.", Type: TArray, MinItems: Ptr(1), Items: listenItem},
						"zones":   zones,
					},
				},
			},
		},
		Defs: defs,
	}
	for _, o := range kinds.blocks() {
		key, s := o.Block()
		root.Properties[key] = s.Schema()
	}
	return root
}

// tsigSchema is a tsig block's: a key the peers (who) know by its name.
func tsigSchema(desc, who string) *Schema {
	return &Schema{
		Description: desc, Type: "object", AdditionalProperties: noOthers,
		Required: []string{"name", "algorithm", "secret_file"},
		Properties: map[string]*Schema{
			"name":        PatternSchema("The key's name, as the "+who+" know it.", `^(`+NamePattern+`)$`),
			"algorithm":   {Description: "HMAC algorithm.", Enum: []any{"hmac-sha256", "hmac-sha512", "hmac-sha384", "hmac-sha224", "hmac-sha1"}},
			"secret_file": FileSchema("File holding the base64 secret (never inline)."),
		},
	}
}
