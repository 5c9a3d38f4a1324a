package file

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkLoad parses a zone file of 10,000 A records, the part of
// dnsd's start-up that a file source adds before the first answer.
func BenchmarkLoad(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("$ORIGIN example.internal.\n$TTL 3600\n")
	sb.WriteString("@ IN SOA ns.example.internal. hostmaster.example.internal. 1 7200 3600 1209600 3600\n@ IN NS ns\nns IN A 10.0.0.1\n")
	for i := range 10000 {
		fmt.Fprintf(&sb, "host%d.example.internal. 3600 IN A 10.1.%d.%d\n", i, i/256, i%256)
	}
	path := filepath.Join(b.TempDir(), "example.internal.zone")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	c := &Config{Path: path, Origin: "example.internal.", Zones: []string{"example.internal."}}
	b.ReportAllocs()
	for b.Loop() {
		z, err := load(c, nil)
		if err != nil {
			b.Fatal(err)
		}
		if z.records != 10003 {
			b.Fatalf("%d records, want 10003", z.records)
		}
	}
}
