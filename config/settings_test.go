package config

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// demoSettings is a described struct with one field of each kind the
// decoder reads plainly, a nested mapping, a per-key hook and a check.
type demoSettings struct {
	Name    string        `dnsd:"name" default:"x" pattern:"^x" doc:"A name."`
	File    string        `dnsd:"file,file" doc:"A file."`
	Mode    string        `dnsd:"mode" default:"a" enum:"a,b" doc:"A mode."`
	On      bool          `dnsd:"on" default:"true" doc:"On."`
	N       int           `dnsd:"n" default:"3" min:"1" max:"9" doc:"A number."`
	TTL     time.Duration `dnsd:"ttl" default:"1h" dur:"ttl" doc:"A TTL."`
	Wait    time.Duration `dnsd:"wait" default:"5s" dur:"positive" doc:"A wait."`
	List    []string      `dnsd:"list" default:"p,q" doc:"A list." item:"An item."`
	Upper   []string      `dnsd:"upper" doc:"Upper-cased." item:"A word."`
	Sub     demoSub       `dnsd:"sub" doc:"A nested mapping."`
	derived int
}

type demoSub struct {
	Host string `dnsd:"host" doc:"A host."`
}

func demo() *Settings {
	return NewSettings(Description[demoSettings]{
		Schema: Schema{Description: "Demo.", Type: "object"},
		Fields: map[string]func(*Block, *demoSettings){"upper": func(b *Block, c *demoSettings) {
			vals, _, _, _ := b.Strings("upper")
			for _, v := range vals {
				c.Upper = append(c.Upper, strings.ToUpper(v))
			}
		}},
		Unlisted: map[string]func(*Block, *demoSettings){"secret": func(b *Block, _ *demoSettings) {
			b.Errorf(b.KeyNode("secret"), KeyPath(b.Path, "secret"), "never inline")
		}},
		Check: func(b *Block, c *demoSettings) {
			c.derived = c.N * 2
			if b.Sub("sub") != nil && c.Sub.Host == "" {
				b.Errorf(nil, b.Path, "sub needs host")
			}
		},
	})
}

// demoKind is a kind with the demo settings.
type demoKind struct{ s *Settings }

func (demoKind) Name() string             { return "demo" }
func (demoKind) DefaultFallthrough() bool { return false }
func (k demoKind) Settings() *Settings    { return k.s }

func parseDemo(t *testing.T, settings string) (*demoSettings, error) {
	t.Helper()
	cfg, err := Parse("demo.yaml", []byte("zones:\n  x.test:\n    - demo: "+settings+"\n"), KindParsers{demoKind{demo()}})
	if err != nil {
		return nil, err
	}
	return cfg.Zones[0].Sources[0].Settings.(*demoSettings), nil
}

func TestSettingsDefaults(t *testing.T) {
	got, err := parseDemo(t, "{}")
	if err != nil {
		t.Fatal(err)
	}
	want := demoSettings{Name: "x", Mode: "a", On: true, N: 3, TTL: time.Hour, Wait: 5 * time.Second, List: []string{"p", "q"}, derived: 6}
	if got.Name != want.Name || got.Mode != want.Mode || got.On != want.On || got.N != want.N || got.TTL != want.TTL ||
		got.Wait != want.Wait || !slices.Equal(got.List, want.List) || got.derived != want.derived || got.Upper != nil {
		t.Errorf("defaults: got %+v, want %+v", *got, want)
	}
	// Each value has its own default list.
	got.List[0] = "changed"
	again, _ := parseDemo(t, "{}")
	if again.List[0] != "p" {
		t.Errorf("a parse changed the default list: %q", again.List)
	}
}

func TestSettingsDecode(t *testing.T) {
	got, err := parseDemo(t, "{name: y, mode: b, on: false, n: 9, ttl: 5m, wait: 1s, list: [r], upper: [a, b], sub: {host: h}}")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "y" || got.Mode != "b" || got.On || got.N != 9 || got.TTL != 5*time.Minute || got.Wait != time.Second ||
		!slices.Equal(got.List, []string{"r"}) || !slices.Equal(got.Upper, []string{"A", "B"}) || got.Sub.Host != "h" || got.derived != 18 {
		t.Errorf("got %+v", *got)
	}
}

// The plain decoding reports what the Mapping readers report, at the
// value's FILE:LINE:COL; hooks, unlisted keys and the check add theirs.
func TestSettingsErrors(t *testing.T) {
	_, err := parseDemo(t, "{mode: c, on: 1, n: 10, ttl: 1500ms, wait: 0s, list: x, secret: s, sub: {}, zz: 1}")
	want := []string{
		`demo.yaml:3:7: zones."x.test"[0].demo: sub needs host`,
		`demo.yaml:3:20: zones."x.test"[0].demo.mode: unknown value "c" (known: a, b)`,
		`demo.yaml:3:27: zones."x.test"[0].demo.on: expected true or false, got the number 1`,
		`demo.yaml:3:33: zones."x.test"[0].demo.n: 10 is out of range: must be between 1 and 9`,
		`demo.yaml:3:42: zones."x.test"[0].demo.ttl: duration 1500ms must be a whole number of seconds (it is a DNS TTL)`,
		`demo.yaml:3:56: zones."x.test"[0].demo.wait: duration must be greater than 0`,
		`demo.yaml:3:66: zones."x.test"[0].demo.list: expected a list, got the string "x" (write ["x"] for a list of one)`,
		`demo.yaml:3:69: zones."x.test"[0].demo.secret: never inline`,
		`demo.yaml:3:89: zones."x.test"[0].demo.zz: unknown key "zz" (known: fallthrough, file, list, mode, n, name, on, secret, sub, ttl, upper, wait)`,
	}
	if got := strings.Split(errString(err), "\n"); !slices.Equal(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// The schema is derived from the same tags: every listed key, the
// defaults, bounds, enums, patterns and item descriptions.
func TestSettingsSchema(t *testing.T) {
	data, err := json.Marshal(demo().Schema())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"description":"Demo.","type":"object","properties":{` +
		`"file":{"description":"A file. A path relative to dnsd.yaml's directory, or absolute; ~/ expands to $HOME. \"\" = unset.","type":["string","null"]},` +
		`"list":{"description":"A list. Default [\"p\", \"q\"].","type":["array","null"],"items":{"description":"An item.","type":["string","null"]}},` +
		`"mode":{"description":"A mode.","enum":["a","b",null],"default":"a"},` +
		`"n":{"description":"A number.","type":["integer","null"],"default":3,"minimum":1,"maximum":9},` +
		`"name":{"description":"A name.","type":["string","null"],"default":"x","pattern":"^x"},` +
		`"on":{"description":"On.","type":["boolean","null"],"default":true},` +
		`"sub":{"description":"A nested mapping.","type":["object","null"],"properties":{"host":{"description":"A host.","type":["string","null"]}},"additionalProperties":false},` +
		`"ttl":{"description":"A TTL. A Go duration: 500ms, 5s, 1m30s, 1h (no days).","default":"1h","anyOf":[{"type":"string","pattern":"^\\+?(([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$"},{"const":0},{"const":"0"},{"type":"null"}]},` +
		`"upper":{"description":"Upper-cased.","type":["array","null"],"items":{"description":"A word.","type":["string","null"]}},` +
		`"wait":{"description":"A wait. A Go duration: 500ms, 5s, 1m30s, 1h (no days).","default":"5s","anyOf":[{"type":"string","pattern":"^\\+?(([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$"},{"const":0},{"const":"0"},{"type":"null"}]}` +
		`},"additionalProperties":false}`
	if string(data) != want {
		t.Errorf("schema:\n%s\nwant:\n%s", data, want)
	}
}

// A struct the tags do not describe is a programming error, found when
// the kind is made.
func TestSettingsBadDescription(t *testing.T) {
	type badDefault struct {
		N int `dnsd:"n" default:"three"`
	}
	type badType struct {
		M map[string]string `dnsd:"m"`
	}
	type badOption struct {
		S string `dnsd:"s,secret"`
	}
	type listNeedsHook struct {
		L []int `dnsd:"l"`
	}
	for name, f := range map[string]func(){
		"default": func() { NewSettings(Description[badDefault]{}) },
		"type":    func() { NewSettings(Description[badType]{}) },
		"option":  func() { NewSettings(Description[badOption]{}) },
		"hook":    func() { NewSettings(Description[listNeedsHook]{}) },
		"unknown hook": func() {
			NewSettings(Description[badOption]{Fields: map[string]func(*Block, *badOption){"zz": nil}})
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: NewSettings did not panic", name)
				}
			}()
			f()
		}()
	}
}

// demoOwner is a kind that owns a top-level block.
type demoOwner struct {
	demoKind
	block *Settings
}

func (k demoOwner) Block() (string, *Settings) { return "demo_block", k.block }

// A kind's top-level block: a known key, read with its Settings into
// Config.Blocks (defaults when not written), described in the schema.
func TestSettingsBlock(t *testing.T) {
	kinds := KindParsers{demoOwner{demoKind{demo()}, demo()}}
	const zones = "zones:\n  x.test:\n    - demo\n"
	cfg, err := Parse("demo.yaml", []byte(zones), kinds)
	if err != nil {
		t.Fatal(err)
	}
	if b := cfg.Blocks["demo_block"].(*demoSettings); b.N != 3 || b.derived != 6 {
		t.Errorf("block not written: got %+v, want the defaults", *b)
	}
	cfg, err = Parse("demo.yaml", []byte("demo_block: {n: 4}\n"+zones), kinds)
	if err != nil {
		t.Fatal(err)
	}
	if b := cfg.Blocks["demo_block"].(*demoSettings); b.N != 4 || b.derived != 8 {
		t.Errorf("block: got %+v, want n 4", *b)
	}
	_, err = Parse("demo.yaml", []byte("demo_block: {n: 0, zz: 1}\n"+zones), kinds)
	want := "demo.yaml:1:17: demo_block.n: 0 is out of range: must be between 1 and 9\n" +
		"demo.yaml:1:20: demo_block.zz: unknown key \"zz\" (known: file, list, mode, n, name, on, secret, sub, ttl, upper, wait)"
	if errString(err) != want {
		t.Errorf("errors:\n%v\nwant:\n%s", err, want)
	}
	data, err := JSONSchema(kinds)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"demo_block": {`+"\n"+`      "description": "Demo.",`) {
		t.Errorf("the schema has no demo_block property:\n%s", data)
	}
}
