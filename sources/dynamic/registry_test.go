package dynamic_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources"
	"github.com/dnsd/dnsd/sources/dynamic"
)

// build compiles yaml (state_dir set to dir) with reg.
func build(t *testing.T, reg *sources.Registry, dir, yaml string) (*pipeline.Pipeline, *sources.Set, pipeline.Writer) {
	t.Helper()
	path := filepath.Join(dir, "dnsd.yaml")
	if err := os.WriteFile(path, []byte("state_dir: "+filepath.Join(dir, "state")+"\n"+yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, sources.ConfigKinds())
	if err != nil {
		t.Fatal(err)
	}
	p, set, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Sources() {
		if w, ok := s.(pipeline.Writer); ok {
			return p, set, w
		}
	}
	t.Fatal("no writable source in the pipeline")
	return nil, nil, nil
}

func resolveA(t *testing.T, p *pipeline.Pipeline, name string) []dns.RR {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	resp := p.Resolve(context.Background(), &pipeline.Request{Msg: m, Name: name, Type: dns.TypeA})
	return resp.Msg.Answer
}

// TestReloadSharesStore: a reload (another build of the config, another
// max_records) keeps the zone's store open: one backend, the records
// written through the old pipeline served by the new one; a new registry
// (a restart) reads them from the file.
func TestReloadSharesStore(t *testing.T) {
	dir := t.TempDir()
	reg := sources.NewRegistry(sources.Options{})
	zones := "zones:\n  corp.internal:\n    - dynamic: {%s}\n    - hosts: {entries: [\"10.0.0.9 static\"]}\n"
	p1, set1, w1 := build(t, reg, dir, sprintf(zones, ""))
	tx, err := w1.BeginUpdate(context.Background(), "corp.internal.")
	if err != nil {
		t.Fatal(err)
	}
	rr, _ := dns.NewRR("dyn.corp.internal. 60 IN A 10.0.0.7")
	if err := tx.Commit(context.Background(), map[string][]dns.RR{"dyn.corp.internal.": {rr}}); err != nil {
		t.Fatal(err)
	}
	if got := resolveA(t, p1, "dyn.corp.internal."); len(got) != 1 {
		t.Fatalf("after commit: %v", got)
	}
	if got := resolveA(t, p1, "static.corp.internal."); len(got) != 1 {
		t.Fatalf("static data behind the dynamic source: %v", got)
	}
	p2, set2, _ := build(t, reg, dir, sprintf(zones, "max_records: 10"))
	set1.Release()
	if n := reg.Len(); n != 1 {
		t.Errorf("%d backends after the reload, want the one store", n)
	}
	if got := resolveA(t, p2, "dyn.corp.internal."); len(got) != 1 {
		t.Fatalf("after the reload: %v", got)
	}
	set2.Release()
	reg.Close()

	reg = sources.NewRegistry(sources.Options{})
	defer reg.Close()
	p3, set3, _ := build(t, reg, dir, sprintf(zones, ""))
	defer set3.Release()
	if got := resolveA(t, p3, "dyn.corp.internal."); len(got) != 1 {
		t.Fatalf("after a restart: %v", got)
	}
	if _, err := os.Stat(dynamic.StorePath(filepath.Join(dir, "state"), []string{"corp.internal."})); err != nil {
		t.Error(err)
	}
}

// TestDryRunLeavesStoreAlone: dnsd check (a dry run) builds while a
// server holds the store, without waiting for its lock or creating it.
func TestDryRunLeavesStoreAlone(t *testing.T) {
	dir := t.TempDir()
	zones := "zones:\n  corp.internal:\n    - dynamic: {}\n"
	reg := sources.NewRegistry(sources.Options{})
	defer reg.Close()
	_, set, _ := build(t, reg, dir, zones)
	defer set.Release()
	dry := sources.NewRegistry(sources.Options{DryRun: true})
	defer dry.Close()
	_, dset, _ := build(t, dry, dir, zones)
	dset.Release()

	other := t.TempDir()
	dry2 := sources.NewRegistry(sources.Options{DryRun: true})
	defer dry2.Close()
	_, dset2, _ := build(t, dry2, other, zones)
	dset2.Release()
	if _, err := os.Stat(filepath.Join(other, "state")); !os.IsNotExist(err) {
		t.Errorf("a dry run made the state directory: %v", err)
	}
}

func sprintf(format, arg string) string { return fmt.Sprintf(format, arg) }
