package daemon

import (
	"testing"

	"github.com/dnsd/dnsd/metrics"
	"github.com/dnsd/dnsd/server"
)

// The server names why it dropped a query or refused a connection; the
// metrics package pre-creates a series for each name. The two lists are
// one contract: a reason the server reports must be a series /metrics
// already shows.
func TestReasonNamesAgree(t *testing.T) {
	pairs := []struct{ server, metrics string }{
		{server.DropACL, metrics.DropACL},
		{server.DropRate, metrics.DropRate},
		{server.DropMalformed, metrics.DropMalformed},
		{server.RejectTotal, metrics.RejectTotal},
		{server.RejectClient, metrics.RejectClient},
	}
	for _, p := range pairs {
		if p.server != p.metrics {
			t.Errorf("server reports %q where metrics has the series %q", p.server, p.metrics)
		}
	}
}
