package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// runEtcd is "peers etcd": a single-member etcd on 127.0.0.1, loaded with
// the records of a file of "key<TAB>value" lines; it touches the ready file
// once they are all in, and runs until SIGTERM.
func runEtcd(args []string) error {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	port := fs.Int("port", 2379, "client port")
	peerPort := fs.Int("peer-port", 2380, "peer port")
	dir := fs.String("dir", "", "data directory")
	load := fs.String("load", "", "records to put")
	ready := fs.String("ready", "", "file to create when loaded")
	if err := fs.Parse(args); err != nil {
		return err
	}
	client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", *port)}
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", *peerPort)}
	cfg := embed.NewConfig()
	cfg.Name = "dnsd-bench"
	cfg.Dir = *dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.LogLevel = "error"
	cfg.EnableGRPCGateway = false
	srv, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	select {
	case <-srv.Server.ReadyNotify():
	case <-time.After(time.Minute):
		return fmt.Errorf("not ready after a minute")
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer c.Close()
	n, err := putFile(c, *load)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "peers etcd: %d records\n", n)
	if err := os.WriteFile(*ready, nil, 0o644); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	return nil
}

// putFile puts the records of path, 100 to a transaction.
func putFile(c *clientv3.Client, path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var ops []clientv3.Op
	n := 0
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := c.Txn(ctx).Then(ops...).Commit()
		ops = ops[:0]
		return err
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			continue
		}
		ops = append(ops, clientv3.OpPut(k, v))
		n++
		if len(ops) == 100 {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return n, err
	}
	return n, flush()
}
