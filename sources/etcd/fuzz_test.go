package etcd

import (
	"encoding/binary"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// FuzzKeyName checks the key → name mapping for any prefix (normalized
// as Open does) and key: a name is a lower-case FQDN of at most 254
// characters with one label per non-empty key segment; it maps back (its
// labels reversed below the prefix give it again), and the key with its
// segments in upper case gives the same name.
func FuzzKeyName(f *testing.F) {
	for _, k := range []string{"/skydns/internal/example/b/a", "/skydns/", "/skydns//a//", "/skydns/arpa/in-addr/10/0/0/1", "/skydns/a/*", "/skydnsx", "/skydns/A-b_c", "/skydns/a/**", "/skydns/a.b", "/skydns/a/@a-1f", "/skydns/@x/", "/skydns/a/@x/b", "/skydns/a/@.", "/skydns/" + strings.Repeat("x", 64), "/skydns/" + strings.Repeat("abcdefg/", 32)} {
		f.Add("/skydns", k)
	}
	f.Add("/", "/x/y")
	f.Add("/skydns/", "/skydns/x")
	f.Add("/a//", "/a/b")
	f.Fuzz(func(t *testing.T, prefix, key string) {
		if !strings.HasPrefix(prefix, "/") {
			return // Open refuses it
		}
		if prefix != "/" {
			prefix = strings.TrimRight(prefix, "/")
			if prefix == "" {
				prefix = "/"
			}
		}
		name, err := keyName(prefix, key)
		if err != nil {
			if name != "" {
				t.Fatalf("keyName(%q, %q) = %q with error %v", prefix, key, name, err)
			}
			return
		}
		if _, ok := dns.IsDomainName(name); !ok || !strings.HasSuffix(name, ".") || name != strings.ToLower(name) || strings.Contains(name, "..") && name != "." {
			t.Fatalf("keyName(%q, %q) = %q: not a lower-case FQDN", prefix, key, name)
		}
		if len(name) > maxNameLen {
			t.Fatalf("name %q too long", name)
		}
		rest := strings.TrimPrefix(key, prefix)
		segments := 0
		for s := range strings.SplitSeq(rest, "/") {
			if s != "" {
				segments++
			}
		}
		if recordKey(key) {
			segments-- // the record ID names no label
		}
		labels := dns.SplitDomainName(name)
		if len(labels) != segments {
			t.Fatalf("keyName(%q, %q) = %q: %d labels for %d segments", prefix, key, name, len(labels), segments)
		}
		if name != "." {
			buf := make([]byte, 256)
			if _, err := dns.PackDomainName(name, buf, 0, nil, false); err != nil {
				t.Fatalf("name %q does not pack: %v", name, err)
			}
		}
		// The name maps back: its labels reversed below the prefix.
		slices.Reverse(labels)
		back := strings.TrimSuffix(prefix, "/") + "/" + strings.Join(labels, "/")
		if again, err := keyName(prefix, back); err != nil || again != name {
			t.Fatalf("round trip of %q via %q: %q, %v", name, back, again, err)
		}
		if again, err := keyName(prefix, prefix+strings.ToUpper(rest)); err != nil || again != name {
			t.Fatalf("upper case of %q: %q, %v; want %q", key, again, err, name)
		}
	})
}

// FuzzParseValue checks a SkyDNS value stored at a key's name: a bad one
// gives an error and no record; a good one gives at least one record,
// each owned by the name, class IN, with the value's ttl (else the
// default), that survives the wire (pack, unpack) and the presentation
// format (String, then miekg/dns's parser) unchanged; the TXT record's
// character-strings on the wire are exactly the value's text; SRV and MX
// targets are valid names; parsing twice gives the same records.
func FuzzParseValue(f *testing.F) {
	for _, s := range []string{
		`{"host":"10.0.0.5"}`, `{"host":"fd00::1","port":80,"priority":1,"weight":2,"ttl":30}`,
		`{"host":"a.example","mail":true}`, `{"text":"x\u0000y\"z"}`, `{"host":"1.2.3.4","targetstrip":3,"port":1}`,
		`{"host":"a","group":"g","ttl":"5"}`, `{"host":"::ffff:1.2.3.4"}`, `{}`, `null`, `{"host":null}`,
		`{"text":"\\\\ ; ( ) \u00e9 \u0001 \"q\" $ @"}`, `{"text":"` + strings.Repeat("ab\\\"", 100) + `"}`,
		`{"host":"web.example.internal","port":"443","targetstrip":"1"}`, `{"host":"x","port":-1}`,
		`{"host":"10.0.0.1"} {}`, `{"host":"10.0.0.1","extra":1}`, `{"HOST":"10.0.0.1","Ttl":7}`,
		`{"host":"*.example","port":1}`, `{"host":"fe80::1%eth0"}`, `{"host":"1.2.3"}`, `{"ttl":2147483648,"text":"t"}`,
	} {
		f.Add("internal/example/svc/x", []byte(s))
	}
	f.Add("arpa/in-addr/10/0/0/1", []byte(`{"host":"a.example."}`))
	f.Add("arpa/ip6/0/0/d/f", []byte(`{"host":"a.example."}`))
	f.Add("internal/example/*", []byte(`{"host":"10.0.0.80"}`))
	const defaultTTL = 300
	f.Fuzz(func(t *testing.T, key string, data []byte) {
		// The hand-written decoder of usual values decodes as
		// encoding/json does whenever it accepts.
		if fv, ok := fastValue(data); ok {
			if dv, err := decodeValue(data); err != nil || dv != fv {
				t.Fatalf("%q: fastValue gives %+v, encoding/json %+v (%v)", data, fv, dv, err)
			}
		}
		name, err := keyName("/skydns", "/skydns/"+key)
		if err != nil || name == "." {
			return
		}
		p, err := parseValue(name, data, defaultTTL)
		if err != nil {
			if len(p.rrs) != 0 {
				t.Fatalf("error %v with %d records", err, len(p.rrs))
			}
			return
		}
		if len(p.rrs) == 0 {
			t.Fatalf("%q: no error and no record", data)
		}
		// What the value says, read leniently (the strict decode accepted it).
		var v struct {
			Text string  `json:"text"`
			TTL  jsonInt `json:"ttl"`
		}
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("parseValue accepted %q, encoding/json does not: %v", data, err)
		}
		ttl := uint32(defaultTTL)
		if v.TTL > 0 {
			ttl = uint32(v.TTL)
		}
		buf := make([]byte, 65535)
		txts := 0
		for _, rr := range p.rrs {
			h := rr.Header()
			if h.Name != name || h.Class != dns.ClassINET || h.Ttl != ttl {
				t.Fatalf("record %v: want owner %q, class IN, TTL %d", rr, name, ttl)
			}
			off, err := dns.PackRR(rr, buf, 0, nil, false)
			if err != nil {
				t.Fatalf("%q gives an unpackable record %v: %v", data, rr, err)
			}
			back, _, err := dns.UnpackRR(buf[:off], 0)
			if err != nil || !dns.IsDuplicate(rr, back) {
				t.Fatalf("record %v comes back from the wire as %v, %v", rr, back, err)
			}
			if again, err := dns.NewRR(rr.String()); err != nil || !dns.IsDuplicate(rr, again) {
				t.Fatalf("record %v reads back from %q as %v, %v", rr, rr.String(), again, err)
			}
			switch rr := rr.(type) {
			case *dns.TXT:
				txts++
				if got := wireText(t, buf[:off]); got != v.Text {
					t.Fatalf("TXT on the wire %q, value text %q", got, v.Text)
				}
			case *dns.SRV:
				checkTarget(t, rr.Target)
			case *dns.MX:
				checkTarget(t, rr.Mx)
			}
		}
		if want := min(1, len(v.Text)); txts != want {
			t.Fatalf("%d TXT records for text %q", txts, v.Text)
		}
		again, err := parseValue(name, data, defaultTTL)
		if err != nil || !slices.Equal(rrStrings(again.rrs), rrStrings(p.rrs)) || again.group != p.group {
			t.Fatalf("second parse differs: %v %v", again.rrs, err)
		}
	})
}

// wireText concatenates the character-strings of a packed TXT record.
func wireText(t *testing.T, rr []byte) string {
	t.Helper()
	_, off, err := dns.UnpackDomainName(rr, 0)
	if err != nil || off+10 > len(rr) {
		t.Fatalf("bad packed TXT % x", rr)
	}
	rdlen := int(binary.BigEndian.Uint16(rr[off+8:]))
	rdata := rr[off+10:]
	if len(rdata) != rdlen {
		t.Fatalf("rdlength %d, %d bytes", rdlen, len(rdata))
	}
	var b strings.Builder
	for len(rdata) > 0 {
		n := int(rdata[0])
		if 1+n > len(rdata) {
			t.Fatalf("character-string overruns the rdata: % x", rdata)
		}
		b.Write(rdata[1 : 1+n])
		rdata = rdata[1+n:]
	}
	return b.String()
}

func checkTarget(t *testing.T, target string) {
	t.Helper()
	if _, ok := dns.IsDomainName(target); !ok || !dns.IsFqdn(target) || target != strings.ToLower(target) {
		t.Fatalf("target %q is not a lower-case FQDN", target)
	}
}

// FuzzIndex applies up to 64 puts and deletes (one input byte each: the
// key, the value, put or delete) to an index and checks it against a
// plain map of the live keys after every step: the record count; each
// name's own records are its keys' records in key order; the tree holds
// exactly the live names and their ancestors, each with the right key
// count, wildcard link and count of children with records; a name's
// cached answer equals a fresh computation. Deleting every key at the end
// leaves an empty index.
func FuzzIndex(f *testing.F) {
	f.Add([]byte{0x00, 0x01, 0x12, 0x23, 0x81, 0x80})
	f.Add([]byte{0x08, 0x0a, 0x00, 0x88, 0x8a, 0x80})
	f.Add([]byte{0x04, 0x05, 0x24, 0x35, 0x01, 0x84, 0x85})
	f.Add([]byte{0x0c, 0x09, 0x0d, 0x06, 0x0b, 0x0e, 0x0f, 0x8c, 0x89})
	f.Add([]byte{0x51, 0x52, 0x41, 0x42, 0x71, 0x72, 0x30})
	// The pools the input picks from. The keys collide on purpose: three
	// spellings of one name, a name with children, wildcards, a record
	// key, keys that name no valid name or lie outside the prefix.
	keyPool := [16]string{
		"/skydns/test/a", "/skydns/test/a/x1", "/skydns/test/a/x2", "/skydns/test/b",
		"/skydns/test/*", "/skydns/test/a/*", "/skydns/test", "/skydns/test/b/c/d",
		"/skydns/Test/A", "/skydns/test/bad label", "/skydns/test//a/", "/skydns",
		"/skydns/test/a/x1/deep", "/skydnsx/a", "/skydns/arpa/in-addr/10/0/0/1", "/skydns/test/a/x1/@r",
	}
	valuePool := [8]string{
		`{"host":"10.0.0.1"}`, `{"host":"fd00::1"}`, `{"host":"10.0.0.2","group":"g1"}`,
		`{"text":"t","group":"g2"}`, `{"host":"srv.test","port":80}`, `{"host":`,
		`{"host":"other.test"}`, `{"host":"10.0.0.9","ttl":5,"group":"g1"}`,
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 64 {
			return // longer inputs find nothing new and are slow to minimize
		}
		ix := newIndex("/skydns", 60)
		live := map[string]string{} // key -> value
		liveRev := map[string]int64{}
		for i, op := range ops {
			key := keyPool[op&0x0f]
			val := valuePool[op>>4&0x07]
			if op&0x80 != 0 {
				changed := ix.del(key)
				_, was := live[key]
				if changed != was {
					t.Fatalf("step %d: del(%s) changed=%v, key was live: %v", i, key, changed, was)
				}
				delete(live, key)
				delete(liveRev, key)
			} else {
				if _, err := ix.put(key, []byte(val), int64(i+1)); err == nil && !validKey(key) {
					t.Fatalf("step %d: put(%s) accepted an invalid key", i, key)
				}
				live[key] = val
				liveRev[key] = int64(i + 1)
			}
			checkIndex(t, ix, live)
		}
		// A re-read of the prefix that finds some of the keys (at their
		// revision, or changed), with a view cloned half-way: both report
		// exactly the keys it did not find.
		ix.startMarks()
		var found []string
		want := map[string]bool{}
		var mid *index
		for j, key := range slices.Sorted(maps.Keys(live)) {
			if j == len(live)/2 {
				mid = ix.clone(ix.ttl + 3)
			}
			if j%3 == 1 {
				want[key] = true
				continue
			}
			found = append(found, key)
			rev, val := liveRev[key], live[key]
			if j%3 == 2 {
				rev, val = int64(len(ops)+j+1), valuePool[j%len(valuePool)]
			}
			for _, x := range []*index{ix, mid} {
				if x != nil {
					_, _ = x.put(key, []byte(val), rev)
				}
			}
			live[key], liveRev[key] = val, rev
		}
		if mid == nil {
			mid = ix.clone(ix.ttl + 3)
		}
		for _, x := range []*index{ix, mid} {
			got := map[string]bool{}
			for _, k := range x.unmarked() {
				got[k] = true
			}
			if !maps.Equal(got, want) {
				t.Fatalf("re-read found %q: unmarked %v, want %v", found, got, want)
			}
		}
		checkIndex(t, ix, live)
		// A view with another default TTL, cloned from the index, holds
		// the same keys and names; records that took the default TTL have
		// the new one, the others keep theirs.
		c := ix.clone(ix.ttl + 7)
		checkIndex(t, c, live)
		for key, e := range keyStatesOf(ix) {
			ce, ok := keyStatesOf(c)[key]
			if !ok || len(ce.rrs) != len(e.rrs) || ce.ownTTL != e.ownTTL || ce.modRev != e.modRev {
				t.Fatalf("clone: key %s differs", key)
			}
			for j, rr := range ce.rrs {
				want := e.rrs[j].Header().Ttl
				if !e.ownTTL {
					want = ix.ttl + 7
				}
				if rr.Header().Ttl != want {
					t.Fatalf("clone: %s has ttl %d, want %d", rr, rr.Header().Ttl, want)
				}
			}
		}
		for key := range live {
			ix.del(key)
		}
		if ix.names.len() != 0 || ix.keyCount() != 0 || ix.records != 0 || len(ix.multi) != 0 {
			t.Fatalf("after deleting every key: %d names, %d keys, %d records, %d in multi", ix.names.len(), ix.keyCount(), ix.records, len(ix.multi))
		}
	})
}

func validKey(key string) bool {
	_, err := keyName("/skydns", key)
	return err == nil
}

// checkIndex compares ix with the live keys.
func checkIndex(t *testing.T, ix *index, live map[string]string) {
	t.Helper()
	own := map[string][]string{} // name -> its keys' records, in key order
	refs := map[string]int{}     // name -> live valid keys at or below it
	records := 0
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range live {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		name, err := keyName(ix.prefix, k)
		if err != nil {
			continue
		}
		p, _ := parseValue(name, []byte(live[k]), ix.ttl)
		records += len(p.rrs)
		for _, rr := range p.rrs {
			own[name] = append(own[name], rr.String())
		}
		if _, ok := own[name]; !ok {
			own[name] = nil
		}
		for n := name; ; n = parentName(n) {
			refs[n]++
			if n == "." {
				break
			}
		}
	}
	if ix.records != records || ix.keyCount() != len(live) || len(keyStatesOf(ix)) != len(live) {
		t.Fatalf("index: %d records, %d keys (%d listed); want %d, %d", ix.records, ix.keyCount(), len(keyStatesOf(ix)), records, len(live))
	}
	seen := 0
	ix.names.each(func(name string, n *node) bool {
		seen++
		if n.name != name || int(n.refs) != refs[name] {
			t.Fatalf("node %q (key %q): %d keys at or below, want %d", n.name, name, n.refs, refs[name])
		}
		var got []string
		for _, rr := range n.ownRecords() {
			got = append(got, rr.String())
		}
		if !slices.Equal(got, own[name]) {
			t.Fatalf("%s: own records %q, want %q", name, got, own[name])
		}
		kidRecs := 0
		var wild *node
		var in *inner
		if in = n.inner.Load(); in != nil {
			in.kids.each(func(label string, c *node) bool {
				if parentName(c.name) != n.name || c.label() != label || ix.names.get(c.name) != c {
					t.Fatalf("%s: child %q is %q", name, label, c.name)
				}
				if len(c.ownRecords()) > 0 {
					kidRecs++
				}
				if label == "*" {
					wild = c
				}
				return true
			})
		}
		var gotKidRecs int32
		var gotWild *node
		if in != nil {
			gotKidRecs, gotWild = in.kidRecs.Load(), in.wild.Load()
		}
		if int(gotKidRecs) != kidRecs || gotWild != wild {
			t.Fatalf("%s: kidRecs %d, wildcard %v; children say %d, %v", name, gotKidRecs, gotWild, kidRecs, wild)
		}
		if cached, fresh := n.records(), n.combine(); kidRecs > 0 && !slices.Equal(rrStrings(cached), rrStrings(fresh)) {
			t.Fatalf("%s: cached answer %v, computed %v", name, cached, fresh)
		}
		if (n.flags&hasRecs != 0) != (n.own.Load() != nil) {
			t.Fatalf("%s: hasRecs flag %v with own records %v", name, n.flags&hasRecs != 0, n.ownRecords())
		}
		if _, inMulti := ix.multi[n]; inMulti && n.flags&hasKey != 0 {
			t.Fatalf("%s: a plain key and keys in multi", name)
		}
		if p := ix.parent(n); p != nil {
			if c := p.inner.Load().kids.get(n.label()); c != n {
				t.Fatalf("%s is not its parent's child", name)
			}
		}
		return true
	})
	if seen != len(refs) {
		t.Fatalf("index holds %d names, want %d: %v", seen, len(refs), refs)
	}
}

// keyStatesOf lists every key the index holds with its state (writer
// only), malformed keys with their revision only.
func keyStatesOf(ix *index) map[string]keyState {
	out := map[string]keyState{}
	for k, rev := range ix.bad {
		out[k] = keyState{key: k, modRev: rev}
	}
	ix.names.each(func(_ string, n *node) bool {
		for _, ks := range ix.keyStates(n) {
			out[ks.key] = ks
		}
		return true
	})
	return out
}
