package etcd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dnsd/dnsd/pipeline"
)

// Dynamic updates (updates: true). An update is one etcd transaction
// guarded by the revision R the index reflected when it began: it
// succeeds only if no key at or below a name it read was created or
// changed after R and every key it read is still there at the revision
// it read. So any number of dnsd processes on one etcd accept updates and
// never apply two that conflict: the loser's Commit returns
// pipeline.ErrUpdateConflict and the authority checks its prerequisites
// again against the winner's records.
//
// dnsd writes each record as its own key, a record key below the name's
// path ending in a record ID: <prefix>/<reversed labels>/@<type>-<hash>.
// A record key counts at its name only (not at the name's parent, as a
// SkyDNS child key does), and the ID is the hash of the record's type and
// data, so the same record always has the same key.

// Timeouts of an update's etcd work beyond its context's.
const (
	updateTxnTimeout  = 10 * time.Second // the transaction
	updateWaitTimeout = 10 * time.Second // this process applying it
)

// Writer is an etcd source that dynamic updates write to: one with
// updates: true. A plain *Source is not a pipeline.Writer.
type Writer struct {
	*Source
}

var _ pipeline.Writer = (*Writer)(nil)

// NewWriter returns s open to updates.
func NewWriter(s *Source) *Writer { return &Writer{Source: s} }

// BeginUpdate implements pipeline.Writer: it notes the revision the
// source's data reflects. It fails before the first sync, while the
// prefix is read again and before the first connection.
func (w *Writer) BeginUpdate(_ context.Context, zone string) (pipeline.UpdateTxn, error) {
	b := w.b
	switch {
	case b == nil:
		return nil, errors.New("etcd: the source is not open")
	case !b.Synced():
		return nil, errNotSynced
	case b.Rereading() != "":
		return nil, fmt.Errorf("etcd: %s", b.Rereading())
	}
	cli := b.cli.Load()
	if cli == nil {
		return nil, errors.New("etcd: not connected")
	}
	return &txn{s: w.Source, cli: cli, zone: zone, rev: b.Applied(), names: map[string]*observed{}}, nil
}

// txn is one update: what it read, at which revision.
type txn struct {
	s     *Source
	cli   *clientv3.Client
	zone  string
	rev   int64 // R: the revision the index reflected at the start
	names map[string]*observed
	done  bool
}

// observed is what an update read at one name.
type observed struct {
	apex  bool
	rrs   []dns.RR  // what queries see there
	keys  []heldKey // the keys whose records make up rrs
	fixed []dns.RR  // at an apex: the records of apex.dns and ns.dns
	// hidden are keys whose records a SkyDNS group keeps out of rrs.
	hidden map[string]bool
	// model: keys (and fixed) give rrs as the index does, so the name
	// can be rewritten exactly.
	model bool
}

// heldKey is one key whose records count at an observed name.
type heldKey struct {
	key    string
	modRev int64
	name   string   // the name the key names
	rrs    []dns.RR // its records, as served
	group  string
	depth  int  // 0: the key names the observed name; 1: a child of it
	exact  bool // a record key (recordKey)
}

// Records implements pipeline.UpdateTxn: what queries see at name, read
// from the index (without wildcards) and remembered, so that Commit
// guards it.
func (t *txn) Records(name string) []dns.RR { return t.observe(name).rrs }

// observe reads name once per update.
func (t *txn) observe(name string) *observed {
	if o := t.names[name]; o != nil {
		return o
	}
	b := t.s.b
	b.wmu.Lock()
	defer b.wmu.Unlock()
	ix := t.s.v.ix.Load()
	o := &observed{apex: name == t.zone}
	n := ix.lookup(name)
	if n != nil {
		o.keys = heldKeys(ix, n, 0, nil)
	}
	if o.apex {
		o.fixed = t.s.apexExtra(ix, name)
		if n != nil || len(o.fixed) > 0 {
			var own []dns.RR
			if n != nil {
				own = n.ownRecords()
			}
			o.rrs = append(slices.Clip(own), o.fixed...)
		}
	} else if n != nil {
		o.rrs = n.records()
		if in := n.inner.Load(); in != nil {
			in.kids.each(func(label string, c *node) bool {
				if label != "*" {
					o.keys = heldKeys(ix, c, 1, o.keys)
				}
				return true
			})
		}
	}
	o.hidden = hiddenKeys(o.keys, o.apex)
	o.model = sameSet(answerOf(o.keys, o.apex, o.fixed), o.rrs)
	t.names[name] = o
	return o
}

// heldKeys appends n's keys at depth (below the name asked, record keys
// and keys without records do not count). Writer only (wmu held).
func heldKeys(ix *index, n *node, depth int, out []heldKey) []heldKey {
	for _, ks := range ix.keyStates(n) {
		exact := recordKey(ks.key)
		if depth > 0 && (exact || len(ks.rrs) == 0) {
			continue
		}
		out = append(out, heldKey{key: ks.key, modRev: ks.modRev, name: n.name, rrs: ks.rrs, group: ks.group, depth: depth, exact: exact})
	}
	return out
}

// answerOf is what queries see at a name holding keys: at an apex its own
// keys' records and fixed; elsewhere its own keys' and its children's,
// filtered by group, one TTL per RRset (as node.combine).
func answerOf(keys []heldKey, apex bool, fixed []dns.RR) []dns.RR {
	var out []dns.RR
	if apex {
		for _, k := range keys {
			if k.depth == 0 {
				out = append(out, k.rrs...)
			}
		}
		return append(out, fixed...)
	}
	var parts []part
	for _, k := range keys {
		if len(k.rrs) > 0 && (k.depth == 0 || !k.exact) {
			parts = append(parts, part{k.rrs, k.group, k.depth})
		}
	}
	group := chooseGroup(parts)
	for _, p := range parts {
		if keepGroup(p.group, group) {
			out = append(out, p.rrs...)
		}
	}
	return oneTTL(out)
}

// hiddenKeys are the keys whose group keeps their records out of the
// answer.
func hiddenKeys(keys []heldKey, apex bool) map[string]bool {
	if apex {
		return nil
	}
	var parts []part
	for _, k := range keys {
		if len(k.rrs) > 0 {
			parts = append(parts, part{k.rrs, k.group, k.depth})
		}
	}
	group := chooseGroup(parts)
	var out map[string]bool
	for _, k := range keys {
		if !keepGroup(k.group, group) {
			if out == nil {
				out = map[string]bool{}
			}
			out[k.key] = true
		}
	}
	return out
}

// Commit implements pipeline.UpdateTxn: one etcd transaction deleting the
// keys that hold records no longer wanted and putting a record key for
// each record added, if nothing the update read changed since R; then it
// waits until this process serves the transaction's revision.
func (t *txn) Commit(ctx context.Context, sets map[string][]dns.RR) error {
	if t.done {
		return errors.New("etcd: the update is over")
	}
	t.done = true
	dels, puts, err := t.plan(sets)
	if err != nil {
		return err
	}
	if len(dels) == 0 && len(puts) == 0 {
		return nil
	}
	ops := make([]clientv3.Op, 0, len(dels)+len(puts))
	for _, k := range dels {
		ops = append(ops, clientv3.OpDelete(k))
	}
	for _, p := range puts {
		ops = append(ops, clientv3.OpPut(p.key, string(p.val)))
	}
	cmps := t.guards()
	b := t.s.b
	tctx, cancel := context.WithTimeout(ctx, updateTxnTimeout)
	resp, err := t.cli.Txn(tctx).If(cmps...).Then(ops...).Commit()
	cancel()
	switch {
	case errors.Is(err, rpctypes.ErrTooManyOps):
		return pipeline.NotRepresentable(fmt.Sprintf("the update needs %d comparisons and %d writes in one etcd transaction, more than etcd allows (--max-txn-ops)", len(cmps), len(ops)))
	case err != nil:
		return fmt.Errorf("etcd %s: update transaction: %w", b.opts.Name, err)
	}
	wctx, cancel := context.WithTimeout(ctx, updateWaitTimeout)
	defer cancel()
	if !resp.Succeeded {
		b.log.Debug("etcd update conflict: the data read changed; checking again", "zone", t.zone, "read_at", t.rev, "revision", resp.Header.Revision)
		// What changed is applied before the update is checked again.
		_ = b.WaitApplied(wctx, resp.Header.Revision)
		return pipeline.ErrUpdateConflict
	}
	if err := b.WaitApplied(wctx, resp.Header.Revision); err != nil {
		return fmt.Errorf("etcd committed the update at revision %d, not yet served here: %w", resp.Header.Revision, err)
	}
	return nil
}

// Abort implements pipeline.UpdateTxn: nothing was written.
func (t *txn) Abort() { t.done = true }

// guards are the transaction's comparisons: for every name read, no key
// at or below it (at an apex: its own keys, apex.dns and ns.dns) created
// or changed after R, and every key read still at the revision read.
func (t *txn) guards() []clientv3.Cmp {
	ix := t.s.v.ix.Load() // only its prefix is used
	after := t.rev + 1
	read := map[string]int64{}
	for _, o := range t.names {
		for _, k := range o.keys {
			read[k.key] = k.modRev
		}
	}
	seen := map[string]bool{}
	var cmps []clientv3.Cmp
	exact := func(k string) {
		if seen[k] {
			return
		}
		seen[k] = true
		if rev, ok := read[k]; ok {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", rev))
			return
		}
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "<", after))
	}
	below := func(p string) {
		if seen["prefix "+p] {
			return
		}
		seen["prefix "+p] = true
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(p).WithPrefix(), "<", after))
	}
	for _, name := range slices.Sorted(mapKeys(t.names)) {
		o := t.names[name]
		key := ix.plainKeyOf(name)
		base := strings.TrimSuffix(key, "/")
		exact(key)
		if o.apex {
			exact(base + "/")
			below(base + "/@")
			below(base + "/dns/apex")
			below(base + "/dns/ns")
		} else {
			below(base + "/")
		}
	}
	for _, k := range slices.Sorted(mapKeys(read)) {
		exact(k)
	}
	return cmps
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// recordPut is a record key to write.
type recordPut struct {
	key string
	val []byte
	rr  dns.RR // the record as the index will read it
}

// plan works out the keys to delete and put so that each name of sets
// holds exactly sets[name]: a key holding a record no longer wanted is
// deleted (its other records, if still wanted, written again as record
// keys), a wanted record no key holds gets a record key. A name whose
// answer also held a deleted key's records (a SkyDNS child key counts at
// its parent too) keeps its answer the same way.
func (t *txn) plan(sets map[string][]dns.RR) (dels []string, puts []recordPut, err error) {
	want := make(map[string][]dns.RR, len(sets))
	queue := slices.Sorted(mapKeys(sets))
	for _, name := range queue {
		want[name] = sets[name]
	}
	del := map[string]bool{}
	strict := map[string]bool{} // TTLs must match too, not only data
	for {
		for changed := true; changed; {
			changed = false
			for i := 0; i < len(queue); i++ {
				name := queue[i]
				o := t.observe(name)
				if !o.model {
					return nil, nil, pipeline.NotRepresentable(fmt.Sprintf("the etcd source cannot rewrite the records at %s exactly", name))
				}
				for _, k := range o.keys {
					if del[k.key] || o.hidden[k.key] || fits(k.rrs, want[name], strict[name]) {
						continue
					}
					del[k.key], changed = true, true
					for _, a := range t.alsoAt(k) {
						if _, ok := want[a]; !ok {
							want[a] = t.observe(a).rrs
							queue = append(queue, a)
						}
					}
				}
			}
		}
		puts = puts[:0]
		again := false
		for _, name := range queue {
			o := t.observe(name)
			if o.apex && !fits(o.fixed, want[name], false) {
				return nil, nil, pipeline.NotRepresentable(fmt.Sprintf("the etcd source cannot change the records of apex.dns.%s and ns.dns.%s by an update", name, name))
			}
			var left []heldKey
			for _, k := range o.keys {
				if !del[k.key] {
					left = append(left, k)
				}
			}
			have := answerOf(left, o.apex, o.fixed)
			for _, rr := range want[name] {
				if slices.ContainsFunc(have, func(x dns.RR) bool { return sameData(x, rr) }) {
					continue
				}
				p, err := t.encode(name, rr)
				if err != nil {
					return nil, nil, err
				}
				puts = append(puts, p)
				left = append(left, heldKey{key: p.key, name: name, rrs: []dns.RR{p.rr}, exact: true})
			}
			if sameSet(answerOf(left, o.apex, o.fixed), want[name]) {
				continue
			}
			if strict[name] {
				return nil, nil, pipeline.NotRepresentable(fmt.Sprintf("the etcd source cannot make %s hold exactly the records asked (its keys' SkyDNS groups decide what is served)", name))
			}
			strict[name], again = true, true
		}
		if !again {
			break
		}
	}
	putKeys := map[string]bool{}
	for _, p := range puts {
		putKeys[p.key] = true
	}
	for k := range del {
		if !putKeys[k] { // rewritten in place
			dels = append(dels, k)
		}
	}
	slices.Sort(dels)
	return dels, puts, nil
}

// alsoAt are the names other than the one observed whose answers hold
// k's records: its own name, and its name's parent for a key other than
// a record key (SkyDNS: a child's records are its parent's), but for a
// wildcard and a zone apex (which answers its own keys only).
func (t *txn) alsoAt(k heldKey) []string {
	out := []string{k.name}
	if k.exact || k.name == t.zone || k.name == "." || strings.HasPrefix(k.name, "*.") {
		return out
	}
	if p := parentName(k.name); p != t.zone && pipeline.InZone(p, t.zone) {
		out = append(out, p)
	}
	return out
}

// sameData reports a and b the same record but for owner and TTL (a
// child key's records are owned by the child, served at its parent).
func sameData(a, b dns.RR) bool {
	if a.Header().Rrtype != b.Header().Rrtype {
		return false
	}
	if !strings.EqualFold(a.Header().Name, b.Header().Name) {
		b = dns.Copy(b)
		b.Header().Name = a.Header().Name
	}
	return dns.IsDuplicate(a, b)
}

// fits reports every record of rrs in want (with its TTL when strict).
func fits(rrs, want []dns.RR, strict bool) bool {
	for _, rr := range rrs {
		if !slices.ContainsFunc(want, func(w dns.RR) bool {
			return sameData(rr, w) && (!strict || rr.Header().Ttl == w.Header().Ttl)
		}) {
			return false
		}
	}
	return true
}

// sameSet reports a and b holding the same records, TTLs included, in
// any order.
func sameSet(a, b []dns.RR) bool {
	if len(a) != len(b) {
		return false
	}
	return fits(a, b, true) && fits(b, a, true)
}

// outValue is a SkyDNS value as dnsd writes it.
type outValue struct {
	Host     string `json:"host,omitempty"`     // "": none
	Port     uint16 `json:"port,omitempty"`     // 0: none (no SRV)
	Priority uint16 `json:"priority,omitempty"` // 0: none
	Weight   uint16 `json:"weight,omitempty"`   // 0: none
	Text     string `json:"text,omitempty"`     // "": none (no TXT)
	Mail     bool   `json:"mail,omitempty"`     // false: not a mail server
	TTL      uint32 `json:"ttl"`                // 0: never written (refused before)
}

// encode returns the record key holding rr at name: a SkyDNS value that
// the index reads back as exactly rr, or an error matching
// pipeline.ErrNotRepresentable saying why there is none.
func (t *txn) encode(name string, rr dns.RR) (recordPut, error) {
	if rr.Header().Name != name { // a child key's record kept at its parent
		rr = dns.Copy(rr)
		rr.Header().Name = name
	}
	h := rr.Header()
	tname := dns.TypeToString[h.Rrtype]
	if tname == "" {
		tname = fmt.Sprintf("TYPE%d", h.Rrtype)
	}
	v := outValue{TTL: h.Ttl}
	zero := "" // the field SkyDNS reads 0 in as its default
	switch x := rr.(type) {
	case *dns.A:
		v.Host = x.A.String()
	case *dns.AAAA:
		v.Host = x.AAAA.String()
	case *dns.CNAME:
		v.Host = x.Target
	case *dns.PTR:
		v.Host = x.Ptr
	case *dns.TXT:
		var b strings.Builder
		for _, s := range x.Txt {
			b.WriteString(unescapeTXT(s))
		}
		v.Text = b.String()
	case *dns.SRV:
		v.Host, v.Port, v.Priority, v.Weight = x.Target, x.Port, x.Priority, x.Weight
		switch {
		case x.Priority == 0:
			zero = "priority"
		case x.Weight == 0:
			zero = "weight"
		case x.Port == 0:
			zero = "port"
		}
	case *dns.MX:
		v.Host, v.Mail, v.Priority = x.Mx, true, x.Preference
		if x.Preference == 0 {
			zero = "preference"
		}
	default:
		return recordPut{}, pipeline.NotRepresentable(fmt.Sprintf("the etcd source cannot hold %s records", tname))
	}
	switch {
	case h.Ttl == 0:
		return recordPut{}, pipeline.NotRepresentable("the etcd source cannot hold records with TTL 0 (a SkyDNS value without ttl takes the source's)")
	case h.Ttl > math.MaxInt32:
		return recordPut{}, pipeline.NotRepresentable(fmt.Sprintf("the etcd source cannot hold TTL %d (at most %d)", h.Ttl, math.MaxInt32))
	case zero != "":
		return recordPut{}, pipeline.NotRepresentable(fmt.Sprintf("the etcd source cannot hold %s records with %s 0 (SkyDNS reads 0 as its default)", tname, zero))
	}
	val, err := json.Marshal(v)
	if err != nil {
		return recordPut{}, err
	}
	p, err := parseValue(name, val, 0)
	if err != nil || len(p.rrs) != 1 || !dns.IsDuplicate(p.rrs[0], rr) || p.rrs[0].Header().Ttl != h.Ttl {
		return recordPut{}, pipeline.NotRepresentable(fmt.Sprintf("the etcd source cannot hold the %s record %s at %s as a SkyDNS value", tname, rdata(rr), name))
	}
	got := p.rrs[0]
	sum := sha256.Sum256([]byte(tname + " " + rdata(got)))
	key := strings.TrimSuffix(t.s.v.ix.Load().plainKeyOf(name), "/") + "/@" + strings.ToLower(tname) + "-" + hex.EncodeToString(sum[:6])
	return recordPut{key: key, val: val, rr: got}, nil
}

// rdata is rr's data in presentation format.
func rdata(rr dns.RR) string {
	return strings.TrimPrefix(rr.String(), rr.Header().String())
}

// unescapeTXT undoes miekg/dns's escapes in a TXT character-string
// (\" \\ \DDD, and \c for any other c).
func unescapeTXT(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		if i+3 < len(s) && isDigit(s[i+1]) && isDigit(s[i+2]) && isDigit(s[i+3]) {
			n := int(s[i+1]-'0')*100 + int(s[i+2]-'0')*10 + int(s[i+3]-'0')
			if n <= 255 {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i+1])
		i++
	}
	return b.String()
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
