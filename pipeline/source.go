package pipeline

import (
	"context"
	"errors"
	"math"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Status says what a source knows about a name.
type Status uint8

const (
	// NotMine: the source does not know the name (or excludes it). The
	// pipeline falls through to the next source when the source's
	// fallthrough is on, else answers NXDOMAIN.
	NotMine Status = iota
	// Found: the name exists in the source. Result.RRs holds every record
	// the source has at that name, of every type; it is empty for an empty
	// non-terminal (a name that exists only because names below it do).
	Found
	// Answered: the source produced a complete response (forward). The
	// pipeline returns Result.Msg as it is.
	Answered
	// Failed: the source cannot answer (backend unreachable with nothing in
	// memory, not synced yet). The pipeline answers SERVFAIL and never
	// falls through.
	Failed
)

// Question is what the pipeline asks a source. Name is the query name in
// lower case, fully qualified (trailing dot).
type Question struct {
	Name string // always set
	Type uint16 // the query type; always set
	DO   bool   // DNSSEC OK bit from the client's EDNS0; false without EDNS0
	CD   bool   // checking disabled bit; default false
	Zone string // the matched zone (lower case, fully qualified); always set
}

// Result is a source's answer to a Question.
type Result struct {
	Status Status // default NotMine (the zero Result: the source does not know the name)
	// RRs (Found) are the records held at the name, all types. The slice
	// and the records are shared and read-only: the pipeline never mutates
	// them. Owner names are lower case; the pipeline rewrites owners when
	// it must (case of the query, wildcards) on a copy. None (nil) for
	// the other statuses and for an empty non-terminal.
	RRs []dns.RR
	// Msg (Answered) is a complete response, e.g. from an upstream; nil
	// for the other statuses.
	Msg *dns.Msg
	// Err (Failed) says why, for logs; nil for the other statuses.
	Err error
}

// Source is one entry of a zone's source list. Implementations must be
// safe for concurrent use; Lookup must not block on writers (readers see
// an immutable snapshot) except for sources that talk to the network per
// query (forward), which honour ctx.
type Source interface {
	Lookup(ctx context.Context, q *Question) Result
	// Kind is the source kind for metrics and logs: "hosts", "etcd", ...
	Kind() string
	// TTL is the source's default TTL in seconds, used as the SOA minimum
	// of negative answers it causes.
	TTL() uint32
	// Serial increases whenever the source's data changes and never goes
	// backwards (SOA serial). It must rise once the new data can be seen
	// (never before): kept answers (Stamp) and transfers rely on it.
	Serial() uint32
}

// Remote is implemented by sources that talk to the network per query
// (forward). The pipeline never asks them for additional-section records,
// wildcards, signatures or transfers; what they answer may be kept
// (Keeper). A source that does not implement Remote is local: it answers
// from data it holds.
type Remote interface {
	// Remote reports whether the source asks the network per query.
	Remote() bool
}

// Wildcarder is implemented by local sources that can hold wildcard
// records (RFC 4592): records whose owner's first label is "*", such as
// "*.apps.example.internal.". A source stores and looks them up like any
// other name (a Lookup of "*.apps.example.internal." returns them; its
// parent "apps.example.internal." exists, as an empty non-terminal if
// nothing else is there) and never matches them against other names
// itself: the pipeline does, over all the zone's local sources (Resolve).
//
// Wildcards reports whether the source's current data holds any wildcard
// name. The pipeline calls it for names the source does not know, so it
// must be cheap (an atomic load) and never block. A source that does not
// implement Wildcarder has no wildcards.
type Wildcarder interface {
	Wildcards() bool
}

// Syncer is implemented by sources whose backend loads asynchronously
// (kubernetes, etcd). Synced reports whether the first full sync is done;
// WaitSynced blocks until it is or ctx ends.
type Syncer interface {
	Synced() bool
	WaitSynced(ctx context.Context) error
}

// Troubled is implemented by sources whose backend connects to a server
// (etcd, kubernetes): Endpoint names the server (never credentials),
// Problem says why it cannot be used right now ("connection refused",
// "x509: ...", "401 Unauthorized"), "" when it can. /ready reports them.
type Troubled interface {
	Endpoint() string
	Problem() string
}

// Request is one query as the server hands it to the pipeline. The server
// has already checked it: exactly one question, opcode QUERY, class IN,
// EDNS version 0, not AXFR/IXFR.
type Request struct {
	Msg  *dns.Msg // the parsed query (read-only); required
	Name string   // question name, lower case, fully qualified; required
	Type uint16   // question type; required
	DO   bool     // DNSSEC OK bit of the query's EDNS0; false without EDNS0
	CD   bool     // checking disabled bit of the query; default false
	// Client and Listen choose the view: the client's address (unmapped)
	// and the listen entry the query came in on, as "proto addr" with the
	// address as written in the config (e.g. "udp 10.1.0.53:53"). The
	// zero Client and "" Listen match only views that do not restrict them.
	Client netip.Addr
	Listen string // "" matches the views without a listen list
	// Buf, when set, is the memory Resolve builds the response in (see
	// AnswerBuf); nil lets Resolve allocate it.
	Buf *AnswerBuf
	// Stamp asks for Response.Stamp (it costs reading the zone's serial).
	// Default false: Response.Stamp is zero.
	Stamp bool
}

// Response is the pipeline's answer. Msg has Rcode, AA, the answer,
// authority and additional sections set; the server sets the ID, the
// question as the client sent it, EDNS0 OPT and truncation.
type Response struct {
	Msg    *dns.Msg // never nil
	Zone   string   // matched zone, "" when none matched (REFUSED)
	Source string   // kind of the source that answered, "" when the pipeline itself did
	View   string   // the view the client matched (even when its zones did not have the name); "" for none
	// Stamp, when the request asked for it and the answer may be kept,
	// names the data it was made from (see Stamp); else the zero Stamp.
	Stamp Stamp
}

// Stamp names the data an answer was made from, so that a caller may keep
// the answer (the server keeps packed answers) and reuse it while
// Pipeline.Fresh says nothing it depends on has changed. An answer is
// stamped only when it comes from one zone's sources for the question
// itself: no view, no CNAME followed into another name, no additional
// records looked up, not ANY; a forwarded answer only from a source that
// is a Keeper. The stamp is the zone of one pipeline generation and the
// largest of its sources' serials read before the sources were asked
// (every source raises its Serial after its data changed, so a later
// change always breaks the stamp; a zone file's own SOA serial may stay
// the same across an edit, so it is not what a stamp holds), plus, for a
// forwarded answer, the forward source's token for the cache entry it
// answered from. The zero Stamp is never fresh.
type Stamp struct {
	z      *zone
	serial uint32
	// A forward source's answer (Keeper): the source, its token and the
	// answer's age then.
	keep  Keeper
	token any
	age   uint32
}

// Ages reports whether the TTLs of an answer stamped st count down while
// it is fresh (a forwarded answer from a cache entry): a caller reusing it
// lowers them by what Fresh says.
func (st Stamp) Ages() bool { return st.keep != nil }

// Since reports whether st and later stamp the same answer at two
// moments — the same zone state and, for a forwarded answer, the same
// cache entry — and by how many seconds its TTLs dropped between them:
// an answer stamped st, its TTLs lowered by aged, is the one later stamps.
func (st Stamp) Since(later Stamp) (aged uint32, ok bool) {
	if st.z != later.z || st.serial != later.serial || st.keep != later.keep || st.token != later.token || later.age < st.age {
		return 0, false
	}
	return later.age - st.age, true
}

// Fresh reports whether an answer stamped st would still be made the same
// by p, but for its TTLs: st is of p's generation, its zone's serial has
// not moved and, for a forwarded answer, the forward source would answer
// from the same cache entry. aged is how many seconds every TTL of the
// answer has dropped since it was made (0 unless st.Ages()); a TTL never
// drops below 0.
func (p *Pipeline) Fresh(st Stamp) (aged uint32, ok bool) {
	if st.z == nil || st.z.gen != p || st.z.sourcesSerial() != st.serial {
		return 0, false
	}
	if st.keep == nil {
		return 0, true
	}
	age, ok := st.keep.Same(st.token)
	return age - min(age, st.age), ok
}

// Keeper is implemented by a forward source whose answers can be kept
// (Stamp). Pin returns a token for the cache entry the question is
// answered from now, if that answer is m (nil otherwise), and the
// entry's age in seconds. Same reports whether the pinned entry would
// still answer now, from the cache, neither asking upstream nor starting
// a refresh, with m's records, each TTL lowered by the seconds the entry
// aged since it was pinned (never below 0); and the entry's age. It counts
// that answer as its own (a cache hit) when so. Same must be cheap: it
// runs for every reuse.
type Keeper interface {
	Pin(name string, qtype uint16, do, cd bool, m *dns.Msg) (token any, age uint32)
	Same(token any) (age uint32, ok bool)
}

// Freshness is implemented by resolvers that stamp answers (Pipeline and
// the daemon's generation that holds the current one).
type Freshness interface {
	Fresh(Stamp) (aged uint32, ok bool)
}

// Resolver is what the server calls for every query; *Pipeline implements
// it, and so does the daemon's generation that holds the current pipeline.
type Resolver interface {
	Resolve(ctx context.Context, req *Request) Response
}

// TTLSeconds converts a configured TTL to the whole seconds of a DNS TTL,
// clamped to 0..2^31-1 (RFC 2181 §8). Every source uses it for its TTL().
func TTLSeconds(d time.Duration) uint32 {
	return uint32(max(0, min(d/time.Second, math.MaxInt32)))
}

// SerialClock hands out SOA serials for data changes: the Unix time, but
// always greater than every serial it handed out before, so the zone's
// serial (the largest of its sources') increases with every change of any
// of them, even several in one second. One clock serves the whole process:
// the source registry owns it and passes it to every backend and source.
// A nil *SerialClock still works: it returns the Unix time.
type SerialClock struct {
	last atomic.Uint32
}

// Next returns a new serial.
func (c *SerialClock) Next() uint32 {
	now := uint32(time.Now().Unix())
	if c == nil {
		return now
	}
	for {
		prev := c.last.Load()
		next := max(now, prev+1)
		if c.last.CompareAndSwap(prev, next) {
			return next
		}
	}
}

// Reverse reports whether name (lower case, fully qualified) is in a
// reverse zone: in-addr.arpa or ip6.arpa, or is one of them.
func Reverse(name string) bool {
	return InZone(name, "in-addr.arpa.") || InZone(name, "ip6.arpa.")
}

// InZone reports whether name is zone or a name below it. Both are lower
// case and fully qualified; "." contains every name. It is the one
// name-in-zone check every part of dnsd uses.
func InZone(name, zone string) bool {
	switch {
	case zone == ".":
		return true
	case len(name) == len(zone):
		return name == zone
	case len(name) > len(zone):
		return name[len(name)-len(zone)-1] == '.' && name[len(name)-len(zone):] == zone
	}
	return false
}

// ErrUnreachable is wrapped by a source's Failed result when no server it
// depends on answered (every forward upstream failed): the response
// carries Extended DNS Error 22, No Reachable Authority.
var ErrUnreachable = errors.New("no upstream answered")

// UpstreamEDEs is wrapped by a Failed result's error when the servers a
// source asked said why they failed: their Extended DNS Errors (a
// resolver's "DNSSEC Bogus" on SERVFAIL), which the response carries
// after the source's own.
type UpstreamEDEs []*dns.EDNS0_EDE

func (e UpstreamEDEs) Error() string {
	parts := make([]string, len(e))
	for i, x := range e {
		parts[i] = x.String()
	}
	return "upstream said: " + strings.Join(parts, "; ")
}

// EDE returns an OPT record holding one Extended DNS Error (RFC 8914). A
// response's OPT is never sent as it is: the server copies the EDE
// options of any OPT in a response's additional section into its own OPT,
// and only for clients that sent EDNS0.
func EDE(code uint16, text string) *dns.OPT {
	return &dns.OPT{
		Hdr:    dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT},
		Option: []dns.EDNS0{&dns.EDNS0_EDE{InfoCode: code, ExtraText: text}},
	}
}
