package kubernetes

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzUndash checks the dashed-address labels of pod and endpoint names:
// a label that parses is a valid address without zone, never IPv4-mapped;
// the address's own dashed label is a DNS label that parses back to it;
// its reverse name is what miekg/dns makes of it.
func FuzzUndash(f *testing.F) {
	for _, s := range []string{"10-244-4-10", "fd00-10-244--5", "--1", "1-2-3", "a-b-c-d", "2001-0db8-0000-0000-0000-0000-0000-0001", "--ffff-10-0-0-1", "--ffff-a00-1", "0-0-0-0-0-ffff-a00-1", "1-2-3-4-", "::1", "1.2.3.4", "fe80--1%eth0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, label string) {
		a, ok := undash(label)
		if !ok {
			return
		}
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
			t.Fatalf("undash(%q) = %v", label, a)
		}
		// The canonical label of the address parses back to it.
		d := dashed(a)
		if b, ok := undash(d); !ok || b != a {
			t.Fatalf("undash(dashed(%v)) = %v %v", a, b, ok)
		}
		if !isLabel(d) {
			t.Fatalf("dashed(%v) = %q is not a DNS label", a, d)
		}
		if ref, err := dns.ReverseAddr(a.String()); err != nil || reverseName(a) != ref {
			t.Fatalf("reverseName(%v) = %q, miekg/dns: %q %v", a, reverseName(a), ref, err)
		}
	})
}

// FuzzPodName checks the parsing of query names under pod.<zone>: a name
// that parses names its dashed label's address, one namespace label, and
// the zone.
func FuzzPodName(f *testing.F) {
	for _, s := range []string{"1-2-3-4.default.pod.cluster.local.", "x.pod.cluster.local.", ".pod.cluster.local.", "a.b.c.pod.cluster.local.", "1-2-3-4..pod.cluster.local.", "fd00--1.ns.pod.cluster.local.", "1-2-3-4.ns.pod.cluster.localx."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		a, ok := podName(name, "cluster.local.")
		if !ok {
			return
		}
		label, rest, _ := strings.Cut(name, ".")
		ns, zone, _ := strings.Cut(rest, ".pod.")
		if b, ok2 := undash(label); !ok2 || b != a || a == (netip.Addr{}) {
			t.Fatalf("podName(%q) = %v, label %q", name, a, label)
		}
		if ns == "" || strings.Contains(ns, ".") || zone != "cluster.local." {
			t.Fatalf("podName(%q) accepted namespace %q in zone %q", name, ns, zone)
		}
	})
}

// FuzzServiceRecords builds a namespace, a service (ClusterIP, headless,
// ExternalName or LoadBalancer with expose: external), an endpoint slice
// and a pod from fuzzed names, addresses and ports, and checks the
// records dnsd derives from them. Any input: no panic, every record is
// owned by the name it is filed under. Input the Kubernetes API server
// accepts (it validates names, ports and addresses; dnsd relies on that):
//   - every name is a lower-case FQDN in the zone or a reverse zone, and
//     every record survives the wire and the presentation format;
//   - targets (CNAME, SRV, PTR) are valid names; each PTR sits at its
//     address's reverse name (as miekg/dns writes it);
//   - every address served is one of the input's;
//   - the records docs/sources/kubernetes.md promises are there: the service's
//     A/AAAA for each cluster IP (or the ready endpoint's, headless), the
//     CNAME of an ExternalName, the endpoint's own name, the pod's
//     dashed name.
func FuzzServiceRecords(f *testing.F) {
	// svc, ns, kind, ip1, ip2, portName, port, proto, hostname, podName, external, ready, podNames
	f.Add("web", "default", uint8(0), "10.96.0.10", "fd00::10", "http", int32(80), "TCP", "", "web-0", "", true, false)
	f.Add("db", "prod", uint8(1), "10.244.1.5", "10.244.1.6", "pg", int32(5432), "TCP", "db-0", "db-0", "", true, false)
	f.Add("db", "prod", uint8(1), "fd00::5", "", "", int32(5432), "UDP", "", "web-5d78b4dcbd-6rgv4", "", true, true)
	f.Add("db", "prod", uint8(1), "10.244.1.5", "", "dns", int32(53), "SCTP", "", "", "", false, false)
	f.Add("ext", "default", uint8(2), "", "", "", int32(0), "", "", "", "www.example.com", true, false)
	f.Add("ext", "default", uint8(2), "", "", "", int32(0), "", "", "", "Www.Example.COM.", true, false)
	f.Add("lb", "default", uint8(3), "198.51.100.1", "192.0.2.7", "http", int32(80), "TCP", "", "", "lb.example.com", true, false)
	f.Add("lb", "default", uint8(3), "", "", "http", int32(80), "TCP", "", "", "abc.elb.example.com", true, false)
	f.Add("A.B", "x y", uint8(0), "::ffff:10.0.0.1", "fe80::1%eth0", "_x", int32(70000), "tcp", "H", "p", "a..b", true, true)
	f.Add(strings.Repeat("s", 63), strings.Repeat("n", 63), uint8(1), "10.0.0.1", "", strings.Repeat("p", 15), int32(65535), "TCP", strings.Repeat("h", 63), strings.Repeat("q", 253), "", true, true)

	reverse := []string{"in-addr.arpa.", "ip6.arpa."}
	f.Fuzz(func(t *testing.T, svcName, ns string, kind uint8, ip1, ip2, portName string, portNum int32, proto, hostname, pod, external string, ready, podNames bool) {
		s := &settings{
			zones:    []string{"cluster.local."},
			reverse:  reverse,
			ttl:      5,
			podNames: podNames,
			external: kind%4 == 3,
			pods:     PodsVerified,
		}
		var ips []string
		for _, ip := range []string{ip1, ip2} {
			if ip != "" {
				ips = append(ips, ip)
			}
		}
		protocol := corev1.Protocol(proto)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svcName},
			Spec: corev1.ServiceSpec{
				Type:  corev1.ServiceTypeClusterIP,
				Ports: []corev1.ServicePort{{Name: portName, Protocol: protocol, Port: portNum}},
			},
		}
		switch kind % 4 {
		case 0:
			svc.Spec.ClusterIPs = ips
			if len(ips) > 0 {
				svc.Spec.ClusterIP = ips[0]
			}
		case 1:
			svc.Spec.ClusterIP = corev1.ClusterIPNone
		case 2:
			svc.Spec.Type = corev1.ServiceTypeExternalName
			svc.Spec.ExternalName = external
		case 3:
			svc.Spec.Type = corev1.ServiceTypeLoadBalancer
			svc.Spec.ClusterIP = "10.96.0.1" // never served with expose: external
			svc.Spec.ExternalIPs = ips
			if external != "" {
				svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: external}}
			}
		}
		family := discoveryv1.AddressTypeIPv4
		if strings.Contains(ip1, ":") {
			family = discoveryv1.AddressTypeIPv6
		}
		sl := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svcName + "-abc", Labels: map[string]string{discoveryv1.LabelServiceName: svcName}},
			AddressType: family,
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Protocol: &protocol, Port: &portNum}},
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{ip1},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod},
			}},
		}
		if hostname != "" {
			sl.Endpoints[0].Hostname = &hostname
		}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip1},
		}
		for _, ip := range ips {
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
		}

		var all []contribution
		all = append(all, serviceRecords(s, newServiceObj(svc), []*sliceObj{newSliceObj(sl)})...)
		all = append(all, podRecords(s, p)...)
		all = append(all, namespaceRecords(s, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})...)
		all = append(all, staticRecords(s)...)
		byName := map[string][]dns.RR{}
		for _, c := range all {
			if c.name != strings.ToLower(c.name) {
				t.Fatalf("name %q is not in lower case", c.name)
			}
			for _, rr := range c.rrs {
				if rr.Header().Name != c.name {
					t.Fatalf("record %v filed under %q", rr, c.name)
				}
				if tg := target(rr); tg != strings.ToLower(tg) {
					t.Fatalf("record %v: target not in lower case", rr)
				}
			}
			byName[c.name] = append(byName[c.name], c.rrs...)
		}

		valid := len(validation.IsDNS1035Label(svcName)) == 0 && len(validation.IsDNS1123Label(ns)) == 0 &&
			(portName == "" || len(validation.IsValidPortName(portName)) == 0) &&
			(proto == "TCP" || proto == "UDP" || proto == "SCTP") &&
			(hostname == "" || len(validation.IsDNS1123Label(hostname)) == 0) &&
			len(validation.IsDNS1123Subdomain(pod)) == 0
		served := map[netip.Addr]bool{}
		for _, ip := range ips {
			a, err := netip.ParseAddr(ip)
			valid = valid && err == nil && a.Zone() == ""
			served[a.Unmap()] = true
		}
		if kind%4 == 2 || kind%4 == 3 && external != "" {
			valid = valid && len(validation.IsDNS1123Subdomain(strings.TrimSuffix(external, "."))) == 0
		}
		if !valid {
			return
		}

		buf := make([]byte, 65535)
		for name, rrs := range byName {
			checkName(t, name)
			if !dns.IsSubDomain("cluster.local.", name) && !dns.IsSubDomain("in-addr.arpa.", name) && !dns.IsSubDomain("ip6.arpa.", name) {
				t.Fatalf("name %q outside the zones", name)
			}
			for _, rr := range rrs {
				off, err := dns.PackRR(rr, buf, 0, nil, false)
				if err != nil {
					t.Fatalf("record %v does not pack: %v", rr, err)
				}
				if back, _, err := dns.UnpackRR(buf[:off], 0); err != nil || !dns.IsDuplicate(rr, back) {
					t.Fatalf("record %v comes back from the wire as %v, %v", rr, back, err)
				}
				if again, err := dns.NewRR(rr.String()); err != nil || !dns.IsDuplicate(rr, again) {
					t.Fatalf("record %v reads back as %v, %v", rr, again, err)
				}
				switch rr := rr.(type) {
				case *dns.A:
					if a, _ := netip.AddrFromSlice(rr.A); !served[a] {
						t.Fatalf("%v serves an address that is not the input's %v", rr, ips)
					}
				case *dns.AAAA:
					if a, _ := netip.AddrFromSlice(rr.AAAA); !served[a] {
						t.Fatalf("%v serves an address that is not the input's %v", rr, ips)
					}
				case *dns.CNAME:
					checkName(t, rr.Target)
				case *dns.SRV:
					checkName(t, rr.Target)
				case *dns.PTR:
					checkName(t, rr.Ptr)
					if !hasReverse(served, name) {
						t.Fatalf("PTR at %q, which is no input address's reverse name", name)
					}
				}
			}
		}

		// What docs/sources/kubernetes.md promises.
		svcFQDN := strings.ToLower(svcName + "." + ns + ".svc.cluster.local.")
		a1, _ := netip.ParseAddr(ip1)
		a1 = a1.Unmap()
		switch kind % 4 {
		case 0:
			for a := range served {
				if !hasAddr(byName[svcFQDN], a) {
					t.Fatalf("%s lacks its cluster IP %v: %v", svcFQDN, a, byName[svcFQDN])
				}
			}
		case 1:
			if ip1 != "" && ready && (family == discoveryv1.AddressTypeIPv6) == a1.Is6() {
				if !hasAddr(byName[svcFQDN], a1) {
					t.Fatalf("headless %s lacks its ready endpoint %v: %v", svcFQDN, a1, byName[svcFQDN])
				}
				label := dashed(a1)
				if hostname != "" {
					label = strings.ToLower(hostname)
				} else if podNames && isLabel(pod) {
					label = strings.ToLower(pod)
				}
				if !hasAddr(byName[label+"."+svcFQDN], a1) {
					t.Fatalf("endpoint %s.%s lacks %v: %v", label, svcFQDN, a1, byName)
				}
			}
		case 2:
			want := strings.ToLower(dns.Fqdn(external))
			if rrs := byName[svcFQDN]; len(rrs) != 1 || rrs[0].(*dns.CNAME).Target != want {
				t.Fatalf("ExternalName %s: %v, want a CNAME to %s", svcFQDN, rrs, want)
			}
		case 3:
			extName := strings.ToLower(svcName + "." + ns + ".cluster.local.")
			for a := range served {
				if !hasAddr(byName[extName], a) {
					t.Fatalf("%s lacks its external IP %v: %v", extName, a, byName[extName])
				}
			}
			if hasAddr(byName[extName], netip.MustParseAddr("10.96.0.1")) {
				t.Fatalf("%s serves its cluster IP with expose: external", extName)
			}
		}
		if kind%4 != 3 {
			for a := range served {
				name := dashed(a) + "." + strings.ToLower(ns) + ".pod.cluster.local."
				if !hasAddr(byName[name], a) {
					t.Fatalf("pod name %s lacks %v: %v", name, a, byName[name])
				}
			}
		}
	})
}

// checkName requires n to be a lower-case FQDN that miekg/dns can put on
// the wire.
func checkName(t *testing.T, n string) {
	t.Helper()
	if _, ok := dns.IsDomainName(n); !ok || !dns.IsFqdn(n) || n == "." || strings.ToLower(n) != n ||
		strings.Contains(n, "..") || strings.ContainsAny(n, " \t\\\"();@$") {
		t.Fatalf("name %q is not a lower-case FQDN", n)
	}
	buf := make([]byte, 256)
	if _, err := dns.PackDomainName(n, buf, 0, nil, false); err != nil {
		t.Fatalf("name %q does not pack: %v", n, err)
	}
}

// target is the name a CNAME, SRV or PTR record points to, else "".
func target(rr dns.RR) string {
	switch rr := rr.(type) {
	case *dns.CNAME:
		return rr.Target
	case *dns.SRV:
		return rr.Target
	case *dns.PTR:
		return rr.Ptr
	}
	return ""
}

func hasAddr(rrs []dns.RR, a netip.Addr) bool {
	return slices.ContainsFunc(rrs, func(rr dns.RR) bool {
		switch rr := rr.(type) {
		case *dns.A:
			b, _ := netip.AddrFromSlice(rr.A)
			return b == a
		case *dns.AAAA:
			b, _ := netip.AddrFromSlice(rr.AAAA)
			return b == a
		}
		return false
	})
}

func hasReverse(addrs map[netip.Addr]bool, name string) bool {
	for a := range addrs {
		if r, _ := dns.ReverseAddr(a.String()); r == name {
			return true
		}
	}
	return false
}
