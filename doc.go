// Command dnsd is a DNS server for VMs and bare metal that answers, per
// zone, from an ordered list of sources (kubernetes, etcd, hosts files,
// zone files, forward upstreams), configured by one dnsd.yaml file. See
// README.md.
package main
