package pipeline

import (
	"context"
	"errors"
	"slices"

	"github.com/miekg/dns"
)

// Writer is implemented by sources that dynamic updates (RFC 2136) write
// to: a zone's one writable source. The authority checks an update's
// prerequisites and policy, reads what the source holds at the names it
// touches, works out their new records and commits them through an
// UpdateTxn.
type Writer interface {
	Source
	// BeginUpdate starts an update of zone (a lower-case FQDN the source
	// serves). A local store holds the zone for the update until Commit or
	// Abort (one update per zone at a time); a shared store (etcd) lets
	// updates run side by side and finds a conflicting one at Commit.
	BeginUpdate(ctx context.Context, zone string) (UpdateTxn, error)
}

// UpdateTxn is one update in progress. It is used by one goroutine.
type UpdateTxn interface {
	// Records returns the records the source holds at name (a lower-case
	// FQDN in the zone), of every type; nil when it holds none. The slice
	// is read-only.
	Records(name string) []dns.RR
	// Commit replaces the source's records at each name of sets with
	// sets[name] (an empty slice removes the name), all or nothing. It
	// returns once the change is durable (fsync'd or committed) and seen
	// by this process's queries (the source's Serial has risen). An error
	// leaves the data unchanged: ErrUpdateConflict when another writer
	// changed it since BeginUpdate (begin again and check again),
	// ErrTooManyRecords when the store would exceed its bound,
	// ErrNotRepresentable when it cannot hold a record of sets.
	Commit(ctx context.Context, sets map[string][]dns.RR) error
	// Abort ends the update without a change; after Commit it does
	// nothing.
	Abort()
}

var (
	// ErrUpdateConflict: the data changed under an update since it began.
	ErrUpdateConflict = errors.New("the zone changed while the update was checked")
	// ErrTooManyRecords: the update would take the store over its bound.
	ErrTooManyRecords = errors.New("the update would exceed the store's record limit")
	// ErrNotRepresentable: the source's storage has no form for a record
	// of the update (its type, or a value of it); the update is refused.
	// Errors of NotRepresentable match it.
	ErrNotRepresentable = errors.New("the source cannot hold the update's records")
)

// NotRepresentable returns an error matching ErrNotRepresentable whose
// text is reason, the refusal's reason ("the etcd source cannot hold
// DHCID records").
func NotRepresentable(reason string) error { return notRepresentable(reason) }

type notRepresentable string

func (e notRepresentable) Error() string        { return string(e) }
func (e notRepresentable) Is(target error) bool { return target == ErrNotRepresentable }

// SameRecords reports whether a and b hold the same records, TTLs
// included, in any order: whether replacing a name's records a with b
// changes anything.
func SameRecords(a, b []dns.RR) bool {
	return len(a) == len(b) && within(a, b) && within(b, a)
}

// within reports whether every record of a is in b, with its TTL.
func within(a, b []dns.RR) bool {
	for _, x := range a {
		if !slices.ContainsFunc(b, func(y dns.RR) bool { return x.Header().Ttl == y.Header().Ttl && dns.IsDuplicate(x, y) }) {
			return false
		}
	}
	return true
}
