package config_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	. "github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/sources"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

// TestSchemaInSync: dnsd.schema.json is what go generate ./config writes.
func TestSchemaInSync(t *testing.T) {
	want, err := JSONSchema(sources.ConfigKinds())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../dnsd.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("dnsd.schema.json is out of date: run go generate ./config")
	}
}

// TestSchemaKeys: every mapping of the schema has exactly the keys the
// parser accepts there. The parser names its known keys when it meets an
// unknown one; each probe puts an unknown key in one mapping.
func TestSchemaKeys(t *testing.T) {
	var root Schema
	data, err := JSONSchema(sources.ConfigKinds())
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	const zone = "zones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n"
	type probe struct {
		name string
		yaml string
		in   *Schema
	}
	probes := []probe{
		{"top level", "zz_probe: 1\n" + zone, &root},
		{"tls", "tls: {zz_probe: 1}\n" + zone, root.Properties["tls"]},
		{"log", "log: {zz_probe: 1}\n" + zone, root.Properties["log"]},
		{"acl", "acl: {zz_probe: 1}\n" + zone, root.Properties["acl"]},
		{"limits", "limits: {zz_probe: 1}\n" + zone, root.Properties["limits"]},
		{"transfer", "transfer: [{zz_probe: 1}]\n" + zone, root.Properties["transfer"].Items},
		{"transfer tsig", "transfer: [{tsig: {zz_probe: 1}}]\n" + zone, root.Properties["transfer"].Items.Properties["tsig"]},
		{"update", "update: [{zz_probe: 1}]\n" + zone, root.Properties["update"].Items},
		{"update tsig", "update: [{tsig: {zz_probe: 1}}]\n" + zone, root.Properties["update"].Items.Properties["tsig"]},
	}
	// Every kind of the kind list, and every nested mapping of its
	// settings.
	for _, k := range sources.Kinds() {
		if o, ok := k.(BlockOwner); ok {
			key, _ := o.Block()
			probes = append(probes, probe{key, key + ": {zz_probe: 1}\n" + zone, root.Properties[key]})
		}
		name := k.Name()
		def := root.Defs[name]
		if def == nil {
			t.Errorf("kind %s has no schema ($defs)", name)
			continue
		}
		probes = append(probes, probe{name, "zones:\n  x:\n    - " + name + ": {zz_probe: 1}\n", def})
		for _, key := range slices.Sorted(maps.Keys(def.Properties)) {
			if sub := def.Properties[key]; sub.Properties != nil {
				probes = append(probes, probe{name + " " + key, "zones:\n  x:\n    - " + name + ": {" + key + ": {zz_probe: 1}}\n", sub})
			}
		}
	}
	known := regexp.MustCompile(`unknown key "zz_probe" \(known: ([^)]*)\)`)
	for _, p := range probes {
		_, err := Parse("probe.yaml", []byte(p.yaml), sources.ConfigKinds())
		m := known.FindStringSubmatch(errString(err))
		if m == nil {
			t.Errorf("%s: the parser did not reject zz_probe with its known keys: %v", p.name, err)
			continue
		}
		parser := strings.Split(m[1], ", ")
		var inSchema []string
		for k := range p.in.Properties {
			inSchema = append(inSchema, k)
		}
		if p.in.AdditionalProperties != false {
			t.Errorf("%s: the schema allows other keys", p.name)
		}
		slices.Sort(parser)
		slices.Sort(inSchema)
		// A key the parser knows only to refuse it (etcd's "password":
		// "use password_file") is not in the schema, which rejects it
		// like any unknown key.
		parser = slices.DeleteFunc(parser, func(k string) bool {
			if slices.Contains(inSchema, k) {
				return false
			}
			refused, err := Parse("probe.yaml", []byte(strings.Replace(p.yaml, "zz_probe", k, 1)), sources.ConfigKinds())
			return refused == nil && strings.Contains(errString(err), "."+k+": ") && !strings.Contains(errString(err), "unknown key")
		})
		if !slices.Equal(parser, inSchema) {
			t.Errorf("%s: the parser knows %q, the schema %q", p.name, parser, inSchema)
		}
	}
	// Source kinds: as a mapping with settings, and as a bare word.
	var kinds, bare []string
	for _, alt := range root.Properties["zones"].AdditionalProperties.(map[string]any)["items"].(map[string]any)["oneOf"].([]any) {
		if props, ok := alt.(map[string]any)["properties"].(map[string]any); ok {
			for k := range props {
				kinds = append(kinds, k)
			}
			continue
		}
		for _, k := range alt.(map[string]any)["enum"].([]any) {
			bare = append(bare, k.(string))
		}
	}
	slices.Sort(kinds)
	slices.Sort(bare)
	var kindNames []string
	for _, k := range sources.ConfigKinds() {
		kindNames = append(kindNames, k.Name())
	}
	slices.Sort(kindNames)
	if !slices.Equal(kinds, kindNames) {
		t.Errorf("source kinds: the parser knows %q, the schema %q", kindNames, kinds)
	}
	// A bare word is in the schema exactly for the kinds dnsd takes
	// written so (every setting has a default).
	var bareOK []string
	for _, name := range kindNames {
		_, err := Parse("bare.yaml", []byte("zones:\n  x.test:\n    - "+name+"\n"), sources.ConfigKinds())
		if err == nil {
			bareOK = append(bareOK, name)
		}
	}
	if !slices.Equal(bare, bareOK) {
		t.Errorf("source kinds as a bare word: the parser takes %q, the schema %q", bareOK, bare)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	data, err := JSONSchema(sources.ConfigKinds())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("dnsd.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("dnsd.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// yamlInstance reads a YAML file as the JSON value a YAML-aware editor
// validates (aliases and merge keys resolved).
func yamlInstance(t *testing.T, file string) (any, error) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(j))
}

// errorLocations lists every instance location ("/zones/x/0/hosts") that
// a validation error or one of its causes points at.
func errorLocations(err error) map[string]bool {
	out := map[string]bool{}
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		out["/"+strings.Join(e.InstanceLocation, "/")] = true
		for _, c := range e.Causes {
			walk(c)
		}
	}
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		walk(ve)
	}
	return out
}

// TestSchemaFixtures: every good fixture (and the configs this repository
// ships) validates; each bad fixture is rejected at the places a schema
// can tell, and the ones only dnsd check can judge are named.
func TestSchemaFixtures(t *testing.T) {
	s := compileSchema(t)
	good, err := filepath.Glob("testdata/good/*.yaml")
	if err != nil || len(good) == 0 {
		t.Fatalf("no good fixtures: %v", err)
	}
	for _, f := range append(good, "../dnsd.yaml", "../contrib/dnsd.yaml") {
		v, err := yamlInstance(t, f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := s.Validate(v); err != nil {
			t.Errorf("%s is valid for dnsd but not for the schema: %v", f, err)
		}
	}

	// Where the schema must report each bad fixture (instance locations).
	// nil: the file is valid YAML whose problems only dnsd check sees;
	// yamlError: not one valid YAML document, no schema question.
	yamlError := []string{}
	bad := map[string][]string{
		"acl.yaml":            {"/acl/allow", "/acl/deny/4", "/acl/drop"},
		"documents.yaml":      nil, // two YAML documents: editors check each alone
		"duplicate_keys.yaml": yamlError,
		"durations.yaml": {"/cache/max_ttl", "/cache/negative_ttl", "/cache/serve_stale",
			"/zones/example.internal/1/forward/timeout"},
		"empty.yaml": {"/"},
		"etcd.yaml": {"/zones/skydns.local/0/etcd/endpoints/0", "/zones/skydns.local/0/etcd/endpoints/1",
			"/zones/skydns.local/0/etcd/endpoints/2", "/zones/skydns.local/0/etcd/prefix",
			"/zones/skydns.local/0/etcd", "/zones/other.local/0/etcd/endpoints"},
		"file.yaml":  {"/zones/dev.internal/0/file", "/zones/test.internal/0/file"}, // zone contents: dnsd check
		"files.yaml": nil,                                                           // unreadable, missing and mismatched files
		"forward.yaml": {"/zones/./0/forward/upstreams/2", "/zones/./0/forward/upstreams/5",
			"/zones/./0/forward/policy", "/zones/./0/forward/max_fails", "/zones/./0/forward/max_concurrent",
			"/zones/./0/forward/except/1", "/zones/corp.internal/0/forward"},
		"hosts.yaml": {"/zones/example.internal 10.in-addr.arpa/0/hosts/entries/2",
			"/zones/example.internal 10.in-addr.arpa/0/hosts/reverse",
			"/zones/lab.internal/0/hosts", "/zones/dev.internal/0/hosts"},
		"kubecontext.yaml": nil, // a context the kubeconfig lacks: dnsd check
		"kubernetes.yaml": {"/zones/cluster.local/0/kubernetes/pods", "/zones/cluster.local/0/kubernetes/namespaces/1",
			"/zones/cluster.local/0/kubernetes/namespaces/2", "/zones/cluster.local/0/kubernetes/expose",
			"/zones/cluster.local/0/kubernetes/endpoint_pod_names"},
		"control.yaml":               yamlError,
		"latin1.yaml":                yamlError,
		"limits.yaml":                {"/limits/max_transfers", "/limits/max_update_size", "/limits/max_update_rrs"},
		"listen.yaml":                {"/listen/1", "/listen/2", "/listen/7", "/listen/8", "/http"},
		"nulls.yaml":                 {"/tls/cert", "/tls/key", "/views/0"},
		"overlap.yaml":               nil, // addresses that overlap: dnsd check
		"views_listen_rejected.yaml": nil, // overlapping and foreign listen entries: dnsd check
		"syntax.yaml":                yamlError,
		"transfer.yaml": {"/transfer/0/zones/2", "/transfer/0/tsig/algorithm", "/transfer/0/notify/0", "/transfer/0/notify/1", // a /33, a missing host, unknown zones: dnsd check
			"/transfer/1/allow", "/transfer/1/tsig", "/transfer/2", "/transfer/2/tsig"},
		"types.yaml": {"/listen", "/http", "/log/queries", "/limits/udp_buffer", "/limits/max_tcp_connections",
			"/cache", "/zones/example.internal", "/zones/lab.internal/0/hosts/entries"},
		"update.yaml": {"/update/0/zones/5", "/update/0/allow", "/update/1/names/0", "/update/1/names/1", "/update/1/names/7", // zones unknown or not writable, names outside, managed types: dnsd check
			"/update/2/names", "/update/2/types", "/update/3/zones", "/update/3", "/update/4", "/update/5"},
		"unknown_keys.yaml": {"/", "/log", "/zones/example.internal/0/hosts", "/zones/example.internal/1/etcd/tls"},
		"views.yaml":        {"/views/2", "/views/5"}, // duplicate and reserved names, a /33, foreign listen entries: dnsd check
		"zones.yaml":        {"/zones", "/zones/dev.internal/0"},
	}
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		want, ok := bad[name]
		if !ok {
			t.Errorf("%s: new bad fixture: say in TestSchemaFixtures where the schema rejects it", f)
			continue
		}
		v, yerr := yamlInstance(t, f)
		switch {
		case want != nil && len(want) == 0:
			if yerr == nil {
				t.Errorf("%s: listed as not one valid YAML document, but it decodes", f)
			}
			continue
		case yerr != nil:
			t.Errorf("%s: %v", f, yerr)
			continue
		}
		err := s.Validate(v)
		if want == nil {
			if err != nil {
				t.Errorf("%s: only dnsd check can tell what is wrong here, but the schema rejects it: %v", f, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: the schema accepts it", f)
			continue
		}
		got := errorLocations(err)
		for _, loc := range want {
			if !got[loc] {
				t.Errorf("%s: the schema reports nothing at %s (it reports %v)", f, loc, sortedKeys(got))
			}
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
