package dynamic

import (
	"time"

	"github.com/dnsd/dnsd/config"
)

// DefaultMaxRecords is dynamic.max_records when not written.
const DefaultMaxRecords = 1_000_000

// Config is a dynamic source's settings (its block in dnsd.yaml).
type Config struct {
	// MaxRecords bounds the records of the zone key's store: an update
	// that would take it over is refused (ErrTooManyRecords); default
	// DefaultMaxRecords, at least 1.
	MaxRecords int `dnsd:"max_records" default:"1000000" min:"1" doc:"Most records the zone's store holds; an update that would exceed it is refused (deletions always pass)."`
	// TTL is the source's TTL: the SOA minimum of the negative answers it
	// causes, and the zone's SOA TTL when it is the zone's first local
	// source. Records keep the TTL their update gave. Default 1m.
	TTL time.Duration `dnsd:"ttl" default:"1m" dur:"ttl" doc:"TTL of the negative answers this source causes (SOA minimum), and of the zone's SOA when it comes first; records keep the TTL their update gave (whole seconds)."`
}

// describe describes the dynamic block: max_records, ttl.
func describe() *config.Settings {
	return config.NewSettings(config.Description[Config]{
		Schema: config.Schema{
			Description: "Records written by dynamic updates (RFC 2136), kept in a store under state_dir; `dynamic: {}` takes the defaults.",
			Type:        "object",
		},
	})
}
