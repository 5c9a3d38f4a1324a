package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// A short run of the scenario (the full one is bench/faults.sh): steady
// load while dnsd is reloaded, its hosts file rotated, etcd killed and the
// upstream black-holed; not one query may fail or get a wrong answer.
func TestFaultsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	bin := filepath.Join(t.TempDir(), "dnsd")
	if out, err := exec.Command("go", "build", "-o", bin, "../..").CombinedOutput(); err != nil {
		t.Fatalf("building dnsd: %v\n%s", err, out)
	}
	res, err := Run(context.Background(), Options{Dnsd: bin, Duration: 15 * time.Second, QPS: 500, Reloads: 15, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Report())
	if res.Answered == 0 || res.Failed() > 0 || res.Wrong > 0 {
		t.Errorf("answered=%d failed=%d wrong=%d, want 0 failed and 0 wrong", res.Answered, res.Failed(), res.Wrong)
	}
	if res.Reloads == 0 || res.Rotations == 0 || res.EtcdKills == 0 || res.Blackhole == 0 {
		t.Errorf("not every fault happened: %+v", res)
	}
}
