package config

import (
	"log/slog"
	"time"
)

// Defaults, in one place. docs/configuration.md documents each of them.
const (
	DefaultListen            = "127.0.0.1:53"
	DefaultUDPBuffer         = 1232
	DefaultMaxTCPConnections = 1000
	DefaultMaxTCPPerClient   = 64
	DefaultUDPRcvBuf         = 4 << 20
	DefaultTCPIdleTimeout    = 10 * time.Second

	DefaultCacheSize   = 100000
	DefaultMaxTTL      = time.Hour
	DefaultNegativeTTL = 5 * time.Minute
	DefaultServeStale  = time.Hour

	DefaultKubernetesTTL = 5 * time.Second
	DefaultSyncTimeout   = 5 * time.Second
	DefaultEtcdEndpoint  = "http://127.0.0.1:2379"
	DefaultEtcdPrefix    = "/skydns"
	DefaultEtcdTTL       = 5 * time.Minute
	DefaultHostsTTL      = time.Hour

	DefaultForwardTimeout       = 2 * time.Second
	DefaultForwardHealthCheck   = 500 * time.Millisecond
	DefaultForwardMaxFails      = 2
	DefaultForwardMaxConcurrent = 1000
)

// Upper bounds of TTL settings.
const (
	// MaxKubernetesTTL is the largest kubernetes ttl (as CoreDNS's).
	MaxKubernetesTTL = time.Hour
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
		UDPRcvBuf:         DefaultUDPRcvBuf,
		TCPIdleTimeout:    DefaultTCPIdleTimeout,
	}
}

func defaultCache() Cache {
	return Cache{
		Size:        DefaultCacheSize,
		MaxTTL:      DefaultMaxTTL,
		NegativeTTL: DefaultNegativeTTL,
		ServeStale:  DefaultServeStale,
		Prefetch:    true,
	}
}

func defaultKubernetes() Kubernetes {
	return Kubernetes{
		Pods:        "disabled",
		Expose:      "cluster_ip",
		TTL:         DefaultKubernetesTTL,
		SyncTimeout: DefaultSyncTimeout,
	}
}

func defaultEtcd() Etcd {
	return Etcd{
		Endpoints:   []string{DefaultEtcdEndpoint},
		Prefix:      DefaultEtcdPrefix,
		TTL:         DefaultEtcdTTL,
		SyncTimeout: DefaultSyncTimeout,
	}
}

func defaultHosts() Hosts { return Hosts{TTL: DefaultHostsTTL, Reverse: true} }

func defaultForward() Forward {
	return Forward{
		Policy:        "random",
		Timeout:       DefaultForwardTimeout,
		HealthCheck:   DefaultForwardHealthCheck,
		MaxFails:      DefaultForwardMaxFails,
		MaxConcurrent: DefaultForwardMaxConcurrent,
	}
}

// defaultFallthrough is the fallthrough of a source kind when not written
// (false for kubernetes, true for the others: docs/configuration.md).
func defaultFallthrough(kind string) bool { return kind != KindKubernetes }
