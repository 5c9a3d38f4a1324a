package config

import (
	"log/slog"
	"time"
)

// Defaults of the top-level settings this package reads (a kind's are
// in its settings struct). docs/configuration.md documents each of them.
const (
	DefaultListen            = "127.0.0.1:53"
	DefaultUDPBuffer         = 1232
	DefaultMaxTCPConnections = 1000
	DefaultMaxTCPPerClient   = 64
	DefaultMaxTCPPipeline    = 16
	DefaultUDPRcvBuf         = 4 << 20
	DefaultTCPIdleTimeout    = 10 * time.Second
	DefaultMaxTransfers      = 10
	DefaultMaxUpdateSize     = 65535
	DefaultMaxUpdateRRs      = 1000
)

// Upper bounds of TTL settings.
const (
	// MaxTTL bounds every other TTL setting: one week (RFC 8767 §4
	// suggests capping TTLs at 7 days).
	MaxTTL = 7 * 24 * time.Hour
)

func defaultLog() Log { return Log{Level: slog.LevelInfo, Format: "text"} }

func defaultLimits() Limits {
	return Limits{
		UDPBuffer:         DefaultUDPBuffer,
		MaxTCPConnections: DefaultMaxTCPConnections,
		MaxTCPPerClient:   DefaultMaxTCPPerClient,
		MaxTCPPipeline:    DefaultMaxTCPPipeline,
		UDPRcvBuf:         DefaultUDPRcvBuf,
		TCPIdleTimeout:    DefaultTCPIdleTimeout,
		MaxTransfers:      DefaultMaxTransfers,
		MaxUpdateSize:     DefaultMaxUpdateSize,
		MaxUpdateRRs:      DefaultMaxUpdateRRs,
	}
}
