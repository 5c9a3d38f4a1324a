package kubernetes

import (
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// SchemaVersion is the Kubernetes DNS specification version served at
// dns-version.<zone>.
const SchemaVersion = "1.1.0"

// tolerateUnreadyAnnotation is the specification's older way to say
// publishNotReadyAddresses.
const tolerateUnreadyAnnotation = "service.alpha.kubernetes.io/tolerate-unready-endpoints"

// Pod modes.
const (
	PodsDisabled = "disabled"
	PodsInsecure = "insecure"
	PodsVerified = "verified"
)

// settings are what records depend on, besides the objects.
type settings struct {
	zones      []string // forward zones, lower-case FQDNs; records are built under each
	reverse    []string // reverse zones (in-addr.arpa / ip6.arpa); PTRs are built inside them only
	ttl        uint32
	podNames   bool // endpoint_pod_names
	external   bool // expose: external
	pods       string
	namespaces map[string]bool // nil: all
}

func (s *settings) exposed(ns string) bool {
	return s.namespaces == nil || s.namespaces[ns]
}

// defaultClusterZone names PTR targets when a zone key has reverse zones
// only (as CoreDNS does).
const defaultClusterZone = "cluster.local."

// serviceZones are the zones service records are built under; PTR
// targets are in the first. With reverse zones only, records are built
// under cluster.local. for their PTR targets, and only PTRs are kept.
func (s *settings) serviceZones() (zones []string, ptrOnly bool) {
	if len(s.zones) > 0 {
		return s.zones, false
	}
	return []string{defaultClusterZone}, true
}

// builder accumulates one owner's records, grouped by name.
type builder struct {
	s       *settings
	ptrOnly bool // keep PTR records only
	order   []string
	by      map[string][]dns.RR
	ips     map[netip.Addr]net.IP // one backing array per address
	srvs    map[srvKey]string     // _port._proto.<name> strings, built once
}

type srvKey struct{ port, proto, base string }

// srvName is "_<port>._<proto>.<base>", one string per owner.
func (b *builder) srvName(port string, proto *corev1.Protocol, base string) string {
	k := srvKey{port, "", base}
	if proto != nil {
		k.proto = string(*proto)
	}
	if n, ok := b.srvs[k]; ok {
		return n
	}
	if b.srvs == nil {
		b.srvs = make(map[srvKey]string)
	}
	n := "_" + strings.ToLower(port) + "." + protoLabel(proto) + "." + base
	b.srvs[k] = n
	return n
}

func newBuilder(s *settings) *builder {
	return &builder{s: s, by: make(map[string][]dns.RR)}
}

// size makes room for n names.
func (b *builder) size(n int) {
	if len(b.by) == 0 && n > 8 {
		b.by = make(map[string][]dns.RR, n)
		b.order = make([]string, 0, n)
	}
}

// touch makes name exist (possibly without records).
func (b *builder) touch(name string) {
	if b.ptrOnly {
		return
	}
	if _, ok := b.by[name]; !ok {
		b.by[name] = nil
		b.order = append(b.order, name)
	}
}

func (b *builder) add(name string, rr dns.RR) {
	if b.ptrOnly && rr.Header().Rrtype != dns.TypePTR {
		return
	}
	rrs, ok := b.by[name]
	if !ok {
		b.order = append(b.order, name)
	}
	for _, x := range rrs {
		if dns.IsDuplicate(x, rr) {
			return
		}
	}
	b.by[name] = append(rrs, rr)
}

func (b *builder) hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: b.s.ttl}
}

// ip returns a net.IP for a, shared by every record of this owner.
func (b *builder) ip(a netip.Addr) net.IP {
	if ip, ok := b.ips[a]; ok {
		return ip
	}
	if b.ips == nil {
		b.ips = make(map[netip.Addr]net.IP)
	}
	var ip net.IP
	if a.Is4() {
		v := a.As4()
		ip = net.IP(v[:])
	} else {
		v := a.As16()
		ip = net.IP(v[:])
	}
	b.ips[a] = ip
	return ip
}

func (b *builder) addr(name string, a netip.Addr) {
	if a.Is4() {
		b.add(name, &dns.A{Hdr: b.hdr(name, dns.TypeA), A: b.ip(a)})
	} else {
		b.add(name, &dns.AAAA{Hdr: b.hdr(name, dns.TypeAAAA), AAAA: b.ip(a)})
	}
}

// portSRVs adds the SRV records of a service's named ports with target
// as the target: at _<port>._<proto>.<name> and at <name> itself.
// Unnamed ports have no SRV record (Kubernetes DNS specification).
func (b *builder) portSRVs(name string, ports []servicePort, target string) {
	for _, p := range ports {
		b.portSRV(name, p, target)
	}
}

// portSRV adds the SRV records of one of a service's ports (none when it
// has no name).
func (b *builder) portSRV(name string, p servicePort, target string) {
	if p.name == "" || p.port <= 0 || p.port > 65535 {
		return
	}
	proto := p.proto
	b.srv(b.srvName(p.name, &proto, name), uint16(p.port), target)
	b.srv(name, uint16(p.port), target)
}

// endpointSRVs adds the SRV records of a headless service's endpoint
// (target its name): one per named port of its EndpointSlice, with the
// slice's number (the port the endpoint listens on); and one per named
// port of the service that the slice does not list (a slice written
// without its ports), with the service's number.
func (b *builder) endpointSRVs(name string, svcPorts []servicePort, epPorts []discoveryv1.EndpointPort, target string) {
	for _, p := range epPorts {
		if p.Port == nil || *p.Port <= 0 || *p.Port > 65535 || p.Name == nil || *p.Name == "" {
			continue // unnamed ports have no SRV record
		}
		b.srv(b.srvName(*p.Name, p.Protocol, name), uint16(*p.Port), target)
		b.srv(name, uint16(*p.Port), target)
	}
	for _, sp := range svcPorts {
		if !slices.ContainsFunc(epPorts, func(p discoveryv1.EndpointPort) bool { return samePort(p, sp) }) {
			b.portSRV(name, sp, target)
		}
	}
}

// samePort reports whether the slice's port p is the service's named
// port sp: the same name and protocol (TCP when not set).
func samePort(p discoveryv1.EndpointPort, sp servicePort) bool {
	proto := corev1.ProtocolTCP
	if p.Protocol != nil && *p.Protocol != "" {
		proto = *p.Protocol
	}
	spProto := sp.proto
	if spProto == "" {
		spProto = corev1.ProtocolTCP
	}
	return p.Name != nil && strings.EqualFold(*p.Name, sp.name) && proto == spProto
}

func (b *builder) srv(name string, port uint16, target string) {
	b.add(name, &dns.SRV{Hdr: b.hdr(name, dns.TypeSRV), Priority: 0, Weight: 100, Port: port, Target: target})
}

// ptr adds a PTR for a when its reverse name is inside a reverse zone.
func (b *builder) ptr(a netip.Addr, target string) {
	if len(b.s.reverse) == 0 {
		return
	}
	name := reverseName(a)
	for _, z := range b.s.reverse {
		if dns.IsSubDomain(z, name) {
			b.add(name, &dns.PTR{Hdr: b.hdr(name, dns.TypePTR), Ptr: target})
			return
		}
	}
}

func (b *builder) result() []contribution {
	if len(b.order) == 0 {
		return nil
	}
	out := make([]contribution, len(b.order))
	for i, n := range b.order {
		rrs := b.by[n]
		if len(rrs) >= 4 && cap(rrs)-len(rrs) > len(rrs)/4 {
			rrs = slices.Clone(rrs) // do not keep append's spare capacity
		}
		out[i] = contribution{name: n, rrs: rrs[:len(rrs):len(rrs)]}
	}
	return out
}

// staticRecords are the records that exist without any object:
// dns-version.<zone> TXT, and svc.<zone> / pod.<zone> as NODATA.
func staticRecords(s *settings) []contribution {
	if s.external {
		return nil
	}
	b := newBuilder(s)
	for _, z := range s.zones {
		name := "dns-version." + z
		b.add(name, &dns.TXT{Hdr: b.hdr(name, dns.TypeTXT), Txt: []string{SchemaVersion}})
		b.touch("svc." + z)
		if s.pods != PodsDisabled {
			b.touch("pod." + z)
		}
	}
	return b.result()
}

// namespaceRecords: <ns>.svc.<zone> (and <ns>.pod.<zone> with pods on)
// exist as NODATA for an existing namespace; with expose: external,
// <ns>.<zone>.
func namespaceRecords(s *settings, ns *corev1.Namespace) []contribution {
	if ns == nil || !s.exposed(ns.Name) {
		return nil
	}
	name := strings.ToLower(ns.Name)
	b := newBuilder(s)
	for _, z := range s.zones {
		if s.external {
			b.touch(name + "." + z)
			continue
		}
		b.touch(name + ".svc." + z)
		if s.pods != PodsDisabled {
			b.touch(name + ".pod." + z)
		}
	}
	return b.result()
}

// podRecords: a-b-c-d.<ns>.pod.<zone> for each IP of a live pod
// (pods: verified).
func podRecords(s *settings, p *corev1.Pod) []contribution {
	if p == nil || s.pods != PodsVerified || s.external || !s.exposed(p.Namespace) {
		return nil
	}
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return nil
	}
	b := newBuilder(s)
	ns := strings.ToLower(p.Namespace)
	each := func(ip string) {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			return
		}
		a = a.Unmap().WithZone("")
		for _, z := range s.zones {
			b.addr(dashed(a)+"."+ns+".pod."+z, a)
		}
	}
	if len(p.Status.PodIPs) > 0 {
		for _, pip := range p.Status.PodIPs {
			each(pip.IP)
		}
	} else if p.Status.PodIP != "" {
		each(p.Status.PodIP)
	}
	return b.result()
}

// endpoint is one address of a service's endpoint slices.
type endpoint struct {
	label string // the endpoint's DNS label under the service name
	addr  netip.Addr
	ports []discoveryv1.EndpointPort // of its slice
}

// readyEndpoints lists the ready addresses of slices (every address
// when the service publishes not-ready addresses), without duplicates,
// in a stable order.
func readyEndpoints(s *settings, svc *serviceObj, eps []*sliceObj) []endpoint {
	all := svc.publishNotReady
	var out []endpoint
	type seenKey struct {
		label string
		addr  netip.Addr
	}
	seen := make(map[seenKey]int)
	for _, sl := range eps {
		if sl.family != discoveryv1.AddressTypeIPv4 && sl.family != discoveryv1.AddressTypeIPv6 {
			continue
		}
		for i := range sl.endpoints {
			ep := &sl.endpoints[i]
			if !all && ep.notReady {
				continue
			}
			for _, a := range ep.addresses {
				addr, err := netip.ParseAddr(a)
				if err != nil {
					continue
				}
				addr = addr.Unmap().WithZone("")
				label := endpointLabel(s, ep, addr)
				k := seenKey{label, addr}
				if j, dup := seen[k]; dup {
					// The same endpoint in two slices (a slice being
					// replaced): merge the ports.
					out[j].ports = mergePorts(out[j].ports, sl.ports)
					continue
				}
				seen[k] = len(out)
				out = append(out, endpoint{label: label, addr: addr, ports: sl.ports})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b endpoint) int {
		if c := strings.Compare(a.label, b.label); c != 0 {
			return c
		}
		return a.addr.Compare(b.addr)
	})
	return out
}

func mergePorts(a, b []discoveryv1.EndpointPort) []discoveryv1.EndpointPort {
	out := a
	for _, p := range b {
		found := false
		for _, q := range a {
			if portEqual(p, q) {
				found = true
				break
			}
		}
		if !found {
			if len(out) == len(a) {
				out = slices.Clone(a)
			}
			out = append(out, p)
		}
	}
	return out
}

func portEqual(a, b discoveryv1.EndpointPort) bool {
	return ptrEq(a.Name, b.Name) && ptrEq(a.Port, b.Port) && ptrEq(a.Protocol, b.Protocol)
}

func ptrEq[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// endpointLabel names an endpoint address under its service: its
// hostname, else (endpoint_pod_names) its pod's name when that is a DNS
// label, else its dashed IP.
func endpointLabel(s *settings, ep *sliceEndpoint, a netip.Addr) string {
	if isLabel(ep.hostname) {
		return strings.ToLower(ep.hostname)
	}
	if s.podNames && isLabel(ep.pod) {
		return strings.ToLower(ep.pod)
	}
	return dashed(a)
}

// isLabel reports whether s is a usable DNS label: 1-63 letters, digits
// and '-' (what Kubernetes allows in hostnames and pod names that fit).
func isLabel(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// dashed is an address written as a DNS label: 10-244-4-10, and IPv6
// with ':' replaced: fd00-10-244--5.
func dashed(a netip.Addr) string {
	s := a.String()
	if a.Is4() {
		return strings.ReplaceAll(s, ".", "-")
	}
	return strings.ReplaceAll(s, ":", "-")
}

// undash parses a dashed address label (the inverse of dashed; IPv6 also
// in its full form).
func undash(label string) (netip.Addr, bool) {
	if label == "" || len(label) > 63 {
		return netip.Addr{}, false
	}
	var buf [64]byte
	n := 0
	dashes := 0
	for i := 0; i < len(label); i++ {
		c := label[i]
		if c == '-' {
			dashes++
		}
		buf[n] = c
		n++
	}
	if dashes == 3 {
		for i := 0; i < n; i++ {
			if buf[i] == '-' {
				buf[i] = '.'
			}
		}
		if a, err := netip.ParseAddr(string(buf[:n])); err == nil && a.Is4() {
			return a, true
		}
	}
	for i := 0; i < n; i++ {
		if buf[i] == '-' || buf[i] == '.' {
			buf[i] = ':'
		}
	}
	a, err := netip.ParseAddr(string(buf[:n]))
	if err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a, true
}

// serviceRecords builds every record of one service from the service and
// its endpoint slices (docs/sources/kubernetes.md).
func serviceRecords(s *settings, svc *serviceObj, slices []*sliceObj) []contribution {
	if svc == nil || !s.exposed(svc.namespace) {
		return nil
	}
	b := newBuilder(s)
	zones, ptrOnly := s.serviceZones()
	b.ptrOnly = ptrOnly
	if s.external {
		externalRecords(b, svc, zones)
		return b.result()
	}
	svcName := strings.ToLower(svc.name) + "." + strings.ToLower(svc.namespace) + ".svc."
	if svc.typ == corev1.ServiceTypeExternalName {
		target := strings.ToLower(dns.Fqdn(strings.TrimSpace(svc.externalName)))
		if _, ok := dns.IsDomainName(target); !ok || target == "." {
			return nil
		}
		for _, z := range zones {
			name := svcName + z
			b.add(name, &dns.CNAME{Hdr: b.hdr(name, dns.TypeCNAME), Target: target})
		}
		return b.result()
	}
	eps := readyEndpoints(s, svc, slices)
	headless := svc.headless
	if headless && len(eps) == 0 {
		return nil // NXDOMAIN, the specification's rule
	}
	var clusterIPs []netip.Addr
	if !headless {
		clusterIPs = serviceClusterIPs(svc)
	}
	// Names: per zone the service's, its SRV names and its endpoints';
	// then the PTRs. Sized once, the builder's map is not rehashed as it
	// fills (a tenth of the first sync's work was those rehashes).
	b.size(len(zones)*(len(eps)+1+len(svc.ports)) + len(eps) + len(clusterIPs))
	hosts := make([]string, len(eps))
	for zi, z := range zones {
		name := svcName + z
		b.touch(name)
		for i, ep := range eps {
			// One string per endpoint name, shared by its records, the SRV
			// targets and the PTR target.
			hosts[i] = ep.label + "." + name
		}
		if headless {
			for i, ep := range eps {
				b.addr(name, ep.addr)
				b.endpointSRVs(name, svc.ports, ep.ports, hosts[i])
			}
		} else {
			for _, ip := range clusterIPs {
				b.addr(name, ip)
				if zi == 0 {
					b.ptr(ip, name)
				}
			}
			b.portSRVs(name, svc.ports, name)
		}
		for i, ep := range eps {
			b.addr(hosts[i], ep.addr)
			if zi == 0 {
				b.ptr(ep.addr, hosts[i])
			}
		}
	}
	return b.result()
}

// externalRecords: expose: external. <svc>.<ns>.<zone> has the load
// balancer ingress IPs and spec.externalIPs (a CNAME to the first ingress
// hostname when there is no IP), SRV for its ports, and PTR for the IPs.
// ClusterIPs are never served.
func externalRecords(b *builder, svc *serviceObj, zones []string) {
	var ips []netip.Addr
	var host string
	addIP := func(v string) {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return
		}
		a = a.Unmap().WithZone("")
		if !slices.Contains(ips, a) {
			ips = append(ips, a)
		}
	}
	for _, in := range svc.ingress {
		if in.IP != "" {
			addIP(in.IP)
		} else if in.Hostname != "" && host == "" {
			h := strings.ToLower(dns.Fqdn(in.Hostname))
			if _, ok := dns.IsDomainName(h); ok {
				host = h
			}
		}
	}
	for _, ip := range svc.externalIPs {
		addIP(ip)
	}
	if len(ips) == 0 && host == "" {
		return
	}
	base := strings.ToLower(svc.name) + "." + strings.ToLower(svc.namespace) + "."
	for zi, z := range zones {
		name := base + z
		if len(ips) == 0 {
			b.add(name, &dns.CNAME{Hdr: b.hdr(name, dns.TypeCNAME), Target: host})
			continue
		}
		for _, ip := range ips {
			b.addr(name, ip)
			if zi == 0 {
				b.ptr(ip, name)
			}
		}
		b.portSRVs(name, svc.ports, name)
	}
}

// serviceClusterIPs returns the service's cluster IPs (both families of
// a dual-stack service).
func serviceClusterIPs(svc *serviceObj) []netip.Addr {
	var out []netip.Addr
	for _, v := range svc.clusterIPs {
		a, err := netip.ParseAddr(v)
		if err != nil {
			continue
		}
		a = a.Unmap().WithZone("")
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

func protoLabel(p *corev1.Protocol) string {
	if p == nil || *p == "" {
		return "_tcp"
	}
	return "_" + strings.ToLower(string(*p))
}

// reverseName is a's PTR owner: d.c.b.a.in-addr.arpa. or the 32 nibbles
// of ip6.arpa.
func reverseName(a netip.Addr) string {
	if a.Is4() {
		v := a.As4()
		var buf [32]byte
		out := buf[:0]
		for i := 3; i >= 0; i-- {
			out = strconv.AppendUint(out, uint64(v[i]), 10)
			out = append(out, '.')
		}
		return string(out) + "in-addr.arpa."
	}
	const hex = "0123456789abcdef"
	v := a.As16()
	var buf [64 + len("ip6.arpa.")]byte
	n := 0
	for i := 15; i >= 0; i-- {
		buf[n], buf[n+1], buf[n+2], buf[n+3] = hex[v[i]&0xf], '.', hex[v[i]>>4], '.'
		n += 4
	}
	n += copy(buf[n:], "ip6.arpa.")
	return string(buf[:n])
}
