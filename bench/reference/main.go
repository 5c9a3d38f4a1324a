// Command reference is the benchmark's yardstick: a trivial miekg/dns server
// that answers every query with one fixed A record and does no lookup.
// dnsd's benchmark compares its cost per answer with this one's.
package main

import (
	"flag"
	"log"
	"net"

	"github.com/miekg/dns"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5399", "UDP address to serve")
	flag.Parse()
	a := net.ParseIP("10.0.0.10").To4()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		if len(r.Question) == 1 {
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: a}}
		}
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{Addr: *addr, Net: "udp", Handler: h}
	log.Fatal(srv.ListenAndServe())
}
