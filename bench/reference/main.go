package main

import (
	"crypto/tls"
	"flag"
	"log"
	"net"

	"github.com/miekg/dns"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5399", "UDP address to serve")
	tcpAddr := flag.String("tcp", "", "TCP address to serve too (none by default)")
	tlsAddr := flag.String("tls", "", "DNS-over-TLS address to serve too (none by default; needs -cert and -key)")
	cert := flag.String("cert", "", "PEM certificate for -tls")
	key := flag.String("key", "", "PEM key for -tls")
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
	errc := make(chan error, 3)
	serve := func(s *dns.Server) { errc <- s.ListenAndServe() }
	go serve(&dns.Server{Addr: *addr, Net: "udp", Handler: h})
	if *tcpAddr != "" {
		// As CoreDNS: no limit on the queries of one connection (miekg/dns
		// closes it after 128 by default, which makes pipelining clients
		// reconnect all the time).
		go serve(&dns.Server{Addr: *tcpAddr, Net: "tcp", Handler: h, MaxTCPQueries: -1})
	}
	if *tlsAddr != "" {
		c, err := tls.LoadX509KeyPair(*cert, *key)
		if err != nil {
			log.Fatal(err)
		}
		go serve(&dns.Server{Addr: *tlsAddr, Net: "tcp-tls", Handler: h, MaxTCPQueries: -1, TLSConfig: &tls.Config{Certificates: []tls.Certificate{c}}})
	}
	log.Fatal(<-errc)
}
