package server

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// Shape bits of FuzzParseQuery: each one bends the packet away from the
// fast parser's shape in one way.
const (
	shapeOPT      = 1 << iota // an OPT record in the additional section
	shapeOPTOwner             // the OPT record's owner is not the root
	shapeRdlen                // the OPT record's RDLENGTH is one too many
	shapeNotOPT               // the additional record's type is A, not OPT
	shapeTwoQ                 // QDCOUNT 2, the question repeated
	shapePointer              // the name ends in a compression pointer to itself
	shapeRawName              // name is the wire form, as given
	shapeCounts               // AN and NS counts of 1
)

// FuzzParseQuery builds queries close to the fast parser's shape (one
// question of plain labels, at most one OPT without options) from
// structured input, with shape bits that bend each part of it, and checks
// the fast parser against miekg/dns Unpack: the same accept/reject
// decision and the same header, question and EDNS fields (checkParse),
// on a fresh scratch and on one whose cached name is the previous
// input's. A query in the fast shape must take the fast path.
// FuzzServeRaw feeds arbitrary bytes; random bytes rarely reach the fast
// path, which is what this target is for.
func FuzzParseQuery(f *testing.F) {
	f.Add(uint16(1), uint16(0x0100), "www.example.test", uint16(dns.TypeA), uint16(dns.ClassINET), uint8(0), uint16(0), uint32(0), []byte(nil), []byte(nil))
	f.Add(uint16(2), uint16(0x0100), "WWW.Example.TEST.", uint16(dns.TypeAAAA), uint16(dns.ClassINET), uint8(shapeOPT), uint16(1232), uint32(0x8000), []byte(nil), []byte(nil))
	f.Add(uint16(3), uint16(0x0000), "", uint16(dns.TypeNS), uint16(dns.ClassINET), uint8(shapeOPT), uint16(4096), uint32(0x00018000), []byte(nil), []byte(nil))
	f.Add(uint16(4), uint16(0x0100), "_sip._udp.*.example.test", uint16(dns.TypeSRV), uint16(dns.ClassCHAOS), uint8(shapeOPT), uint16(512), uint32(0xff000000), []byte(nil), []byte{0})
	f.Add(uint16(5), uint16(0x0100), "a.b", uint16(dns.TypeA), uint16(dns.ClassINET), uint8(shapeOPT|shapeOPTOwner), uint16(1232), uint32(0), []byte(nil), []byte(nil))
	f.Add(uint16(6), uint16(0x0100), "a.b", uint16(dns.TypeA), uint16(dns.ClassINET), uint8(shapeOPT|shapeRdlen), uint16(1232), uint32(0), []byte{0, 10, 0, 2, 1, 2}, []byte(nil))
	f.Add(uint16(7), uint16(0x0100), "a.b", uint16(dns.TypeA), uint16(dns.ClassINET), uint8(shapeOPT), uint16(1232), uint32(0), []byte{0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8}, []byte(nil))
	f.Add(uint16(8), uint16(0x0100), "a.b", uint16(dns.TypeA), uint16(dns.ClassINET), uint8(shapeOPT|shapeNotOPT), uint16(1), uint32(60), []byte{10, 0, 0, 1}, []byte(nil))
	f.Add(uint16(9), uint16(0x0100), "a.b", uint16(dns.TypeA), uint16(dns.ClassINET), uint8(shapeTwoQ), uint16(0), uint32(0), []byte(nil), []byte(nil))
	f.Add(uint16(10), uint16(0x0100), "a.b", uint16(dns.TypeA), uint16(dns.ClassINET), uint8(shapePointer), uint16(0), uint32(0), []byte(nil), []byte(nil))
	f.Add(uint16(11), uint16(0x0100), "\x03a\\b\x01c\x00", uint16(dns.TypeA), uint16(dns.ClassINET), uint8(shapeRawName), uint16(0), uint32(0), []byte(nil), []byte(nil))
	f.Add(uint16(12), uint16(0x0100), "\x03a.b\x00", uint16(dns.TypeA), uint16(dns.ClassINET), uint8(shapeRawName|shapeOPT), uint16(0), uint32(0), []byte(nil), []byte(nil))
	f.Add(uint16(13), uint16(0x8100), "a.b", uint16(dns.TypeA), uint16(dns.ClassINET), uint8(shapeCounts), uint16(0), uint32(0), []byte(nil), []byte(nil))
	f.Add(uint16(14), uint16(0x0100), strings.Repeat("a", 63)+"."+strings.Repeat("b", 63)+"."+strings.Repeat("c", 63)+"."+strings.Repeat("d", 60), uint16(dns.TypeA), uint16(dns.ClassINET), uint8(0), uint16(0), uint32(0), []byte(nil), []byte(nil))
	f.Add(uint16(15), uint16(0x0100), strings.Repeat("a", 63)+"."+strings.Repeat("b", 63)+"."+strings.Repeat("c", 63)+"."+strings.Repeat("d", 61), uint16(dns.TypeA), uint16(dns.ClassINET), uint8(0), uint16(0), uint32(0), []byte(nil), []byte(nil))
	f.Add(uint16(16), uint16(0x0100), strings.Repeat("a", 63)+"."+strings.Repeat("b", 63)+"."+strings.Repeat("c", 63)+"."+strings.Repeat("d", 62), uint16(dns.TypeA), uint16(dns.ClassINET), uint8(0), uint16(0), uint32(0), []byte(nil), []byte(nil))
	f.Add(uint16(16), uint16(0x0100), strings.Repeat("x", 64)+".test", uint16(dns.TypeA), uint16(dns.ClassINET), uint8(0), uint16(0), uint32(0), []byte(nil), []byte(nil))
	f.Add(uint16(17), uint16(0x7900), "a..b", uint16(0), uint16(0), uint8(0), uint16(0), uint32(0), []byte(nil), []byte(nil))

	var warm scratch // keeps the previous input's name: the cache path
	f.Fuzz(func(t *testing.T, id, flags uint16, name string, qtype, qclass uint16, shape uint8, optClass uint16, optTTL uint32, rdata, tail []byte) {
		wire, plain := nameWire(name, shape&shapeRawName != 0)
		if shape&shapePointer != 0 {
			wire = append(wire[:len(wire)-1], 0xC0, 12) // points at the name itself: a loop
			plain = false
		}
		question := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(wire, qtype), qclass)

		qd, an, ns, ar := uint16(1), uint16(0), uint16(0), uint16(0)
		body := append([]byte(nil), question...)
		if shape&shapeTwoQ != 0 {
			qd = 2
			body = append(body, question...)
		}
		if shape&shapeCounts != 0 {
			an, ns = 1, 1
		}
		if shape&shapeOPT != 0 {
			ar = 1
			owner := []byte{0}
			if shape&shapeOPTOwner != 0 {
				owner = []byte{1, 'x', 0}
			}
			rtype := uint16(dns.TypeOPT)
			if shape&shapeNotOPT != 0 {
				rtype = dns.TypeA
			}
			rdlen := len(rdata)
			if shape&shapeRdlen != 0 {
				rdlen++
			}
			body = append(body, owner...)
			body = binary.BigEndian.AppendUint16(body, rtype)
			body = binary.BigEndian.AppendUint16(body, optClass)
			body = binary.BigEndian.AppendUint32(body, optTTL)
			body = binary.BigEndian.AppendUint16(body, uint16(rdlen))
			body = append(body, rdata...)
		}
		body = append(body, tail...)
		in := rawMsg(id, flags, qd, an, ns, ar, body)

		var cold scratch
		checkParse(t, &cold, in)
		checkParse(t, &warm, in)

		// The common shape must not fall back to Unpack.
		fastShape := plain && shape&^shapeOPT == 0 && len(rdata) == 0
		if _, _, fast := cold.q.fast(in); fastShape && !fast {
			t.Fatalf("a plain query (name %q, %d wire octets) missed the fast path: % x", name, len(wire), in)
		}
	})
}

// nameWire returns name in wire form: as given when raw, else its
// dot-separated labels, each with its length octet (a label longer than
// 255 bytes is cut; one of 64..255 keeps its true length, which is not a
// valid label length), and the root label. plain reports whether the
// result has the fast parser's shape: labels of 1..63 plain bytes, at
// most 254 octets in all.
func nameWire(name string, raw bool) (wire []byte, plain bool) {
	if raw {
		wire = []byte(name)
		if len(wire) == 0 || wire[len(wire)-1] != 0 {
			wire = append(wire, 0)
		}
		return wire, false
	}
	plain = true
	name = strings.TrimSuffix(name, ".")
	if name != "" {
		for label := range strings.SplitSeq(name, ".") {
			if len(label) > 255 {
				label = label[:255]
			}
			if len(label) == 0 || len(label) > 63 {
				plain = false
			}
			for i := 0; i < len(label); i++ {
				plain = plain && plainLabelByte(label[i])
			}
			wire = append(wire, byte(len(label)))
			wire = append(wire, label...)
		}
	}
	wire = append(wire, 0)
	// miekg/dns takes up to 255 octets; the fast parser stops at 254.
	return wire, plain && len(wire) <= 254
}
