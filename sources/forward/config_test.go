package forward

import (
	"strings"
	"testing"
)

func TestUpstreams(t *testing.T) {
	tests := []struct {
		in, proto, addr, name string
		err                   string
	}{
		{in: "1.1.1.1", proto: "udp", addr: "1.1.1.1:53"},
		{in: "10.0.0.2:5353", proto: "udp", addr: "10.0.0.2:5353"},
		{in: "[2001:db8::1]:5353", proto: "udp", addr: "[2001:db8::1]:5353"},
		{in: "[2001:db8::1]", proto: "udp", addr: "[2001:db8::1]:53"},
		{in: "2001:db8::1", proto: "udp", addr: "[2001:db8::1]:53"},
		{in: "udp://8.8.8.8", proto: "udp", addr: "8.8.8.8:53"},
		{in: "tcp://8.8.8.8", proto: "tcp", addr: "8.8.8.8:53"},
		{in: "tcp://8.8.8.8:5353", proto: "tcp", addr: "8.8.8.8:5353"},
		{in: "tls://9.9.9.9", proto: "tls", addr: "9.9.9.9:853"},
		{in: "tls://9.9.9.9:853@dns.quad9.net", proto: "tls", addr: "9.9.9.9:853", name: "dns.quad9.net"},
		{in: "tls://[2620:fe::fe]@DNS.Quad9.net.", proto: "tls", addr: "[2620:fe::fe]:853", name: "dns.quad9.net"},
		{in: "tls://9.9.9.9:8853@dns.quad9.net", proto: "tls", addr: "9.9.9.9:8853", name: "dns.quad9.net"},
		{in: "dns.google", err: "not an IP address"},
		{in: "dns.google:53", err: "not an IP address"},
		{in: "1.1.1.1:0", err: "port \"0\""},
		{in: "tcp://1.1.1.1@x", err: "only for tls://"},
		{in: "doh://1.1.1.1", err: "unknown scheme"},
		{in: "[2001:db8::1", err: "expected IP"},
	}
	for _, tt := range tests {
		u, err := parseUpstream(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseUpstream(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || u.Proto != tt.proto || u.Addr != tt.addr || u.ServerName != tt.name || u.Raw != tt.in {
			t.Errorf("parseUpstream(%q) = %+v, %v; want %s %s %s", tt.in, u, err, tt.proto, tt.addr, tt.name)
		}
	}
}
