package quote

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuoteBounded(t *testing.T) {
	long := strings.Repeat("a", 1<<20)
	if got := Q([]byte(long)); got != `"`+strings.Repeat("a", Max)+`"`+Ellipsis {
		t.Fatalf("Q of 1 MiB: %d bytes %.100q", len(got), got)
	}
	if got := QS("short"); got != `"short"` {
		t.Fatalf("QS(short) = %s", got)
	}
	if got := String(strings.Repeat("b", Max+1)); got != strings.Repeat("b", Max)+Ellipsis {
		t.Fatalf("String of Max+1: %q", got)
	}
	if got := Excerpt([]byte("x")); got != "x" {
		t.Fatalf("Excerpt(x) = %q", got)
	}
	// Zero bytes quote as \x00: four characters each, still bounded.
	if got := Q(make([]byte, 1<<20)); len(got) > 4*Max+8 {
		t.Fatalf("Q of zeros: %d bytes", len(got))
	}
	// A UTF-8 character is not split.
	s := strings.Repeat("a", Max-1) + "é" + "zzz"
	if got := String(s); !utf8.ValidString(got) || got != strings.Repeat("a", Max-1)+Ellipsis {
		t.Fatalf("String split a character: %q", got)
	}
}

func TestSecret(t *testing.T) {
	for _, s := range []string{
		"-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n",
		"key \"xfr\" {\n\talgorithm hmac-sha256;\n\tsecret \"c2VjcmV0\";\n};\n",
		"key xfr {\n",
		"  secret \"c2VjcmV0\";\n",
		"Private-key-format: v1.3\nAlgorithm: 13 (ECDSAP256SHA256)\n",
		"users:\n- name: a\n  user:\n    client-key-data: LS0t\n",
	} {
		if !Secret([]byte(s)) {
			t.Errorf("Secret(%q) = false", s)
		}
	}
	for _, s := range []string{
		"10.0.0.1 key.example.internal\n",
		"secret IN A 10.0.0.1\n",
		"key IN TXT \"{\"\n",
		"key 300 IN A 10.0.0.2\n",
		"$ORIGIN example.\n@ IN SOA ns admin 1 2 3 4 5\n",
	} {
		if Secret([]byte(s)) {
			t.Errorf("Secret(%q) = true", s)
		}
	}
}
