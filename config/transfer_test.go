package config_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/sources"
)

func TestTransferFixture(t *testing.T) {
	cfg, err := config.Load("testdata/good/transfer.yaml", sources.ConfigKinds())
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Transfers) != 2 {
		t.Fatalf("transfers = %d, want 2", len(cfg.Transfers))
	}
	tr := cfg.Transfers[0]
	if !slices.Equal(tr.Zones, []string{"example.internal.", "10.in-addr.arpa."}) {
		t.Errorf("zones = %q", tr.Zones)
	}
	if !slices.Equal(tr.Allow, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}) {
		t.Errorf("allow = %v", tr.Allow)
	}
	if !slices.Equal(tr.Notify, []string{"10.0.0.2:53", "10.0.0.3:5353", "[fd00::2]:53"}) {
		t.Errorf("notify = %q", tr.Notify)
	}
	k := tr.TSIG
	if k == nil || k.Name != "xfr-key." || k.Algorithm != "hmac-sha256." || k.Secret != "c2VjcmV0LXNlY3JldC1zZWNyZXQtMzItYnl0ZXMhIQ==" {
		t.Fatalf("tsig = %+v", k)
	}
	if cfg.Transfers[1].TSIG != nil || !slices.Equal(cfg.Transfers[1].Zones, []string{"lab.internal."}) {
		t.Errorf("second item = %+v", cfg.Transfers[1])
	}
	// The secret never shows in what is printed or logged.
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "tsig", k, "transfer", tr)
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%v %+v", tr, cfg.Transfers), buf.String()} {
		if strings.Contains(s, k.Secret) || strings.Contains(s, "secret-secret") {
			t.Errorf("secret printed: %s", s)
		}
	}
}
