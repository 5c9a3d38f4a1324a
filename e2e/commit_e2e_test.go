package e2e

import (
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// A reload that adds a listen address and changes a record commits both
// at once: the first answer on the new address is already the new record,
// never the old one. Each round adds the address (with a new record) and
// removes it again, while queries keep arriving on it.
func TestReloadNewListenerAnswersNewRecord(t *testing.T) {
	dir := t.TempDir()
	a1, a2 := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := func(ip string, listen ...string) string {
		l := ""
		for i, a := range listen {
			if i > 0 {
				l += ", "
			}
			l += `"udp://` + a + `"`
		}
		return fmt.Sprintf("listen: [%s]\nzones:\n  example.internal:\n    - hosts: {entries: [\"%s a\"]}\n", l, ip)
	}
	conf := filepath.Join(dir, "dnsd.yaml")
	writeFile(t, conf, cfg("10.0.0.0", a1))
	p := startDnsd(t, dir)
	p.waitLog("dnsd started", 1)
	waitAnswer(t, a1, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.0")

	to, err := net.ResolveUDPAddr("udp", a2)
	if err != nil {
		t.Fatal(err)
	}
	m := new(dns.Msg)
	m.SetQuestion("a.example.internal.", dns.TypeA)
	q, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 8
	reloads := 0
	for round := 1; round <= rounds; round++ {
		want := fmt.Sprintf("10.0.0.%d", round)
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		// One goroutine sends to the new address (unconnected: nothing
		// fails while nobody listens there), one reads every answer.
		var (
			wg      sync.WaitGroup
			stop    = make(chan struct{})
			mu      sync.Mutex
			answers []string
		)
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = c.WriteTo(q, to)
				time.Sleep(50 * time.Microsecond)
			}
		})
		wg.Go(func() {
			buf := make([]byte, 512)
			for {
				_ = c.SetReadDeadline(time.Now().Add(time.Second))
				n, _, err := c.ReadFrom(buf)
				if err != nil {
					select {
					case <-stop:
						return
					default:
						continue
					}
				}
				var r dns.Msg
				got := "unparsable"
				if r.Unpack(buf[:n]) == nil {
					got = "no A record"
					if len(r.Answer) == 1 {
						if a, ok := r.Answer[0].(*dns.A); ok {
							got = a.A.String()
						}
					}
				}
				mu.Lock()
				answers = append(answers, got)
				mu.Unlock()
			}
		})
		writeFile(t, conf, cfg(want, a1, a2))
		p.signal(syscall.SIGHUP)
		reloads++
		p.waitLog("reloaded", reloads)
		waitAnswer(t, a2, "a.example.internal", dns.TypeA, "NOERROR:"+want)
		time.Sleep(20 * time.Millisecond)
		close(stop)
		wg.Wait()
		_ = c.Close()
		if len(answers) == 0 {
			t.Fatalf("round %d: no answer on %s", round, a2)
		}
		for i, got := range answers {
			if got != want {
				t.Fatalf("round %d: answer %d of %d on the new address %s is %s, want the new record %s", round, i+1, len(answers), a2, got, want)
			}
		}
		// a2 goes away again for the next round.
		writeFile(t, conf, cfg(want, a1))
		p.signal(syscall.SIGHUP)
		reloads++
		p.waitLog("reloaded", reloads)
	}
}
