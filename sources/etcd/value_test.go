package etcd

import (
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func TestKeyName(t *testing.T) {
	for _, c := range []struct {
		prefix, key, want, err string
	}{
		{"/skydns", "/skydns/internal/example/b/a", "a.b.example.internal.", ""},
		{"/skydns", "/skydns/internal/example/db", "db.example.internal.", ""},
		{"/skydns", "/skydns/Internal/Example/DB", "db.example.internal.", ""},
		{"/skydns", "/skydns/internal/example/", "example.internal.", ""},
		{"/skydns", "/skydns//internal//example", "example.internal.", ""},
		{"/skydns", "/skydns/arpa/in-addr/10/0/0/127", "127.0.0.10.in-addr.arpa.", ""},
		{"/skydns", "/skydns/internal/example/*", "*.example.internal.", ""},
		{"/skydns", "/skydns/local/skydns/_tcp/_http", "_http._tcp.skydns.local.", ""},
		{"/skydns", "/skydns", ".", ""},
		{"/dns/corp", "/dns/corp/internal/x", "x.internal.", ""},
		{"/", "/internal/x", "x.internal.", ""},
		{"/skydns", "/skydnsx/internal", "", "not below the prefix"},
		{"/skydns", "/other/internal", "", "not below the prefix"},
		{"/skydns", "/skydns/internal/a.b", "", "not allowed"},
		{"/skydns", "/skydns/internal/a b", "", "not allowed"},
		{"/skydns", "/skydns/internal/a*", "", "not allowed"},
		{"/skydns", "/skydns/internal/" + strings.Repeat("a", 64), "", "longer than 63"},
		{"/skydns", "/skydns" + strings.Repeat("/"+strings.Repeat("a", 60), 5), "", "longer than 253"},
	} {
		got, err := keyName(c.prefix, c.key)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("keyName(%q, %q) = %q, %v; want error with %q", c.prefix, c.key, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("keyName(%q, %q) = %q, %v; want %q", c.prefix, c.key, got, err, c.want)
		}
	}
}

// rrStrings renders records as "TYPE rdata" lines, sorted.
func rrStrings(rrs []dns.RR) []string {
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		f := strings.Fields(rr.String())
		out = append(out, strings.Join(append([]string{f[3]}, f[4:]...), " "))
	}
	slices.Sort(out)
	return out
}

func TestParseValue(t *testing.T) {
	const name = "x1.svc.example.internal."
	for _, c := range []struct {
		val  string
		want string // records, "TYPE rdata" sorted, joined by "; "
		ttl  uint32
		err  string
	}{
		{val: `{"host":"10.0.0.5"}`, want: "A 10.0.0.5", ttl: 300},
		{val: `{"host":"fd00::5","ttl":60}`, want: "AAAA fd00::5", ttl: 60},
		{val: `{"host":"::ffff:10.0.0.5"}`, want: "A 10.0.0.5", ttl: 300},
		{val: `{"host":"db.Example.Internal"}`, want: "CNAME db.example.internal.", ttl: 300},
		{val: `{"host":"db.example.internal.","port":5432}`, want: "SRV 10 100 5432 db.example.internal.", ttl: 300},
		{val: `{"host":"db.example.internal","port":5432,"priority":20,"weight":5}`, want: "SRV 20 5 5432 db.example.internal.", ttl: 300},
		{val: `{"host":"10.0.0.5","port":80}`, want: "A 10.0.0.5; SRV 10 100 80 x1.svc.example.internal.", ttl: 300},
		{val: `{"host":"10.0.0.5","port":80,"targetstrip":1}`, want: "A 10.0.0.5; SRV 10 100 80 svc.example.internal.", ttl: 300},
		{val: `{"host":"10.0.0.5","port":80,"targetstrip":9}`, want: "A 10.0.0.5; SRV 10 100 80 x1.svc.example.internal.", ttl: 300},
		{val: `{"host":"a.b.example.internal","port":80,"targetstrip":1}`, want: "SRV 10 100 80 b.example.internal.", ttl: 300},
		{val: `{"host":"mx.example.internal","mail":true,"priority":5}`, want: "MX 5 mx.example.internal.", ttl: 300},
		{val: `{"host":"10.0.0.25","mail":true}`, want: "A 10.0.0.25; MX 10 x1.svc.example.internal.", ttl: 300},
		{val: `{"text":"hello world"}`, want: `TXT "hello world"`, ttl: 300},
		{val: `{"text":"say \"hi\"\\"}`, want: `TXT "say \"hi\"\\"`, ttl: 300},
		{val: `{"host":"10.0.0.5","text":"v=1"}`, want: `A 10.0.0.5; TXT "v=1"`, ttl: 300},
		{val: `{"host":"10.0.0.5","ttl":"60"}`, want: "A 10.0.0.5", ttl: 60},
		{val: `{"host":"10.0.0.5","group":"g1"}`, want: "A 10.0.0.5", ttl: 300},
		{val: ` {"host":"10.0.0.5"} `, want: "A 10.0.0.5", ttl: 300},
		{val: `{"host":"10.0.0.300"}`, err: "bad IP"},
		{val: `{"host":"fd00::zz"}`, err: "bad IP"},
		{val: `{"host":"fe80::1%eth0"}`, err: "bad IP"},
		{val: `{"host":"a b.example"}`, err: "not allowed"},
		{val: `{"host":"a..b"}`, err: "neither an IP"},
		{val: `{"host":"10.0.0.5","colour":"red"}`, want: "A 10.0.0.5", ttl: 300},
		{val: `{"host":"10.0.0.5","key":"/skydns/internal/example/x"}`, want: "A 10.0.0.5", ttl: 300},
		{val: `{"hots":"10.0.0.5"}`, err: "no record"},
		{val: `{"host":10}`, err: "bad JSON"},
		{val: `{"host":"10.0.0.5"`, err: "bad JSON"},
		{val: `{"host":"10.0.0.5"} {}`, err: "data after"},
		{val: `[]`, err: "bad JSON"},
		{val: ``, err: "bad JSON"},
		{val: `{}`, err: "no record"},
		{val: `{"port":80,"text":"x"}`, err: "port without host"},
		{val: `{"mail":true,"text":"x"}`, err: "mail without host"},
		{val: `{"host":"10.0.0.5","port":70000}`, err: "port 70000 out of range"},
		{val: `{"host":"10.0.0.5","ttl":-1}`, err: "ttl -1 out of range"},
		{val: `{"host":"10.0.0.5","ttl":"soon"}`, err: "not an integer"},
	} {
		p, err := parseValue(name, []byte(c.val), 300)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err = %v, want %q", c.val, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.val, err)
			continue
		}
		if got := strings.Join(rrStrings(p.rrs), "; "); got != c.want {
			t.Errorf("%s: records %q, want %q", c.val, got, c.want)
		}
		for _, rr := range p.rrs {
			if rr.Header().Name != name || rr.Header().Ttl != c.ttl {
				t.Errorf("%s: %v: owner/ttl wrong", c.val, rr)
			}
		}
	}
	// A PTR below in-addr.arpa.
	p, err := parseValue("127.0.0.10.in-addr.arpa.", []byte(`{"host":"reverse.example.internal"}`), 300)
	if err != nil || strings.Join(rrStrings(p.rrs), ";") != "PTR reverse.example.internal." {
		t.Errorf("PTR: %v %v", p.rrs, err)
	}
	// Long text is split into 255-byte strings.
	p, err = parseValue(name, []byte(`{"text":"`+strings.Repeat("a", 600)+`"}`), 300)
	if err != nil || len(p.rrs) != 1 || len(p.rrs[0].(*dns.TXT).Txt) != 3 || len(p.rrs[0].(*dns.TXT).Txt[2]) != 90 {
		t.Errorf("long text: %v %v", p.rrs, err)
	}
}
