// Command extdns-once runs one reconciliation of external-dns's rfc2136
// provider against a Kubernetes cluster, as `external-dns --once` does:
// it takes external-dns's own command line (parsed by external-dns's
// config package), lists the cluster's LoadBalancer Services that carry
// the external-dns.alpha.kubernetes.io/hostname annotation, and lets
// external-dns's TXT registry, plan and rfc2136 provider list the zone by
// AXFR and create, update or delete records by TSIG-signed UPDATE.
//
// external-dns's own binary cannot be built here (its sources package
// needs modules the module proxy does not serve), so the Service source
// is this file's: A records from the load balancer's IPs, a CNAME from
// its host name, the TTL annotation. Everything that talks DNS is
// external-dns's. The end-to-end tests run it against dnsd; it is not
// part of dnsd.
//
//	extdns-once -kubeconfig FILE --provider=rfc2136 --rfc2136-host=127.0.0.1 ...
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"sigs.k8s.io/external-dns/endpoint"
	"sigs.k8s.io/external-dns/pkg/apis/externaldns"
	"sigs.k8s.io/external-dns/plan"
	"sigs.k8s.io/external-dns/provider/rfc2136"
	"sigs.k8s.io/external-dns/registry/txt"
)

const (
	hostnameKey = "external-dns.alpha.kubernetes.io/hostname"
	ttlKey      = "external-dns.alpha.kubernetes.io/ttl"
)

func main() {
	fs := flag.NewFlagSet("extdns-once", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "the cluster's kubeconfig (required)")
	// The first arguments are ours, the rest external-dns's.
	args := os.Args[1:]
	split := len(args)
	for i, a := range args {
		if strings.HasPrefix(a, "--") {
			split = i
			break
		}
	}
	_ = fs.Parse(args[:split])
	cfg := externaldns.NewConfig()
	if err := cfg.ParseFlags(args[split:]); err != nil {
		fatal(err)
	}
	if err := run(context.Background(), *kubeconfig, cfg); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "extdns-once:", err)
	os.Exit(1)
}

func run(ctx context.Context, kubeconfig string, cfg *externaldns.Config) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if cfg.Provider != "rfc2136" {
		return fmt.Errorf("provider %q: only rfc2136 is built in", cfg.Provider)
	}
	policy := plan.Policies[cfg.Policy]
	if policy == nil {
		return fmt.Errorf("--policy %q: sync, upsert-only or create-only", cfg.Policy)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	filter := endpoint.NewDomainFilterWithExclusions(cfg.DomainFilter, cfg.DomainExclude)
	p, err := rfc2136.New(ctx, cfg, filter)
	if err != nil {
		return fmt.Errorf("rfc2136 provider: %w", err)
	}
	reg, err := txt.New(cfg, p)
	if err != nil {
		return fmt.Errorf("txt registry: %w", err)
	}
	current, err := reg.Records(ctx)
	if err != nil {
		return fmt.Errorf("listing the zone: %w", err)
	}
	desired, err := services(ctx, kc)
	if err != nil {
		return err
	}
	desired, err = reg.AdjustEndpoints(desired)
	if err != nil {
		return err
	}
	pl := (&plan.Plan{
		Policies:       []plan.Policy{policy},
		Current:        current,
		Desired:        desired,
		DomainFilter:   endpoint.MatchAllDomainFilters{filter, reg.GetDomainFilter()},
		ManagedRecords: cfg.ManagedDNSRecordTypes,
		ExcludeRecords: cfg.ExcludeDNSRecordTypes,
		OwnerID:        reg.OwnerID(),
	}).Calculate()
	if !pl.Changes.HasChanges() {
		fmt.Println("extdns-once: all records are up to date")
		return nil
	}
	fmt.Printf("extdns-once: create %d, update %d, delete %d\n", len(pl.Changes.Create), len(pl.Changes.UpdateNew), len(pl.Changes.Delete))
	return reg.ApplyChanges(ctx, pl.Changes)
}

// services are the endpoints of the annotated LoadBalancer Services.
func services(ctx context.Context, kc kubernetes.Interface) ([]*endpoint.Endpoint, error) {
	list, err := kc.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing services: %w", err)
	}
	var out []*endpoint.Endpoint
	for _, svc := range list.Items {
		names := svc.Annotations[hostnameKey]
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || names == "" {
			continue
		}
		var ttl endpoint.TTL
		if s := svc.Annotations[ttlKey]; s != "" {
			if n, err := strconv.Atoi(s); err == nil {
				ttl = endpoint.TTL(n)
			}
		}
		var ips, hosts []string
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				ips = append(ips, in.IP)
			} else if in.Hostname != "" {
				hosts = append(hosts, in.Hostname)
			}
		}
		for _, name := range strings.Split(names, ",") {
			name = strings.TrimSpace(name)
			switch {
			case len(ips) > 0:
				out = append(out, endpoint.NewEndpointWithTTL(name, endpoint.RecordTypeA, ttl, ips...))
			case len(hosts) > 0:
				out = append(out, endpoint.NewEndpointWithTTL(name, endpoint.RecordTypeCNAME, ttl, hosts[0]))
			}
		}
	}
	return out, nil
}
