package file

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
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

// BenchmarkPresigned resolves answers of a pre-signed zone file (NSEC and
// NSEC3) through the pipeline, without and with the DO bit: what serving
// it signed costs per answer.
func BenchmarkPresigned(b *testing.B) {
	for _, zone := range []string{"signed.example.", "nsec3.example."} {
		bk, err := Open(&Config{Path: "../../pipeline/testdata/" + zone + "signed", Origin: zone, Zones: []string{zone}}, false, slog.New(slog.DiscardHandler), nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer bk.Close()
		p, err := pipeline.New([]pipeline.ZoneSpec{{Names: []string{zone}, Sources: []pipeline.SourceEntry{{Source: NewSource(bk), Fallthrough: true}}}}, pipeline.Options{})
		if err != nil {
			b.Fatal(err)
		}
		for _, name := range []string{"www", "nope", "x.apps"} {
			for _, do := range []bool{false, true} {
				b.Run(fmt.Sprintf("%s%s/DO=%v", name, strings.TrimSuffix(zone, ".example."), do), func(b *testing.B) {
					m := new(dns.Msg)
					m.SetQuestion(name+"."+zone, dns.TypeA)
					req := &pipeline.Request{Msg: m, Name: name + "." + zone, Type: dns.TypeA, DO: do, Buf: new(pipeline.AnswerBuf)}
					b.ReportAllocs()
					for b.Loop() {
						p.Resolve(context.Background(), req)
					}
				})
			}
		}
	}
}
