package forward

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func aMsg(name string, ttl uint32) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.Response = true
	m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Ttl: ttl}, A: net.ParseIP("192.0.2.1")}}
	return m
}

// held counts the entries really held, shard by shard.
func (c *Cache) held() int {
	t := c.tab.Load()
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.RLock()
		if len(sh.m) != len(sh.ring) {
			panic("map and ring disagree")
		}
		n += len(sh.ring)
		sh.mu.RUnlock()
	}
	return n
}

// Many shards: the size bound holds, and Len is exact.
func TestCacheShardedBound(t *testing.T) {
	c := NewCache(CacheConfig{Size: 5000, MaxTTL: time.Hour, NegativeTTL: time.Minute})
	if n := len(c.tab.Load().shards); n != 4 {
		t.Fatalf("size 5000: %d shards, want 4", n)
	}
	for i := 0; i < 20000; i++ {
		name := fmt.Sprintf("n%d.example.", i)
		c.Insert(keyA(name), aMsg(name, 300))
	}
	if c.Len() != c.held() || c.Len() > 5000 || c.Len() < 4900 {
		t.Fatalf("Len %d, held %d; want about 5000", c.Len(), c.held())
	}
}

// Resizing while inserts run loses no count: Len stays exact.
func TestCacheResizeUnderInserts(t *testing.T) {
	c := NewCache(CacheConfig{Size: 3000, MaxTTL: time.Hour, NegativeTTL: time.Minute})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("g%d-%d.example.", g, i%10000)
				c.Insert(keyA(name), aMsg(name, 300))
			}
		}(g)
	}
	for i := 0; i < 20; i++ {
		size := []int{3000, 100, 9000, 0, 2500}[i%5]
		c.Configure(CacheConfig{Size: size, MaxTTL: time.Hour, NegativeTTL: time.Minute})
		time.Sleep(2 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if c.Len() != c.held() || c.Len() > 2500 {
		t.Fatalf("after resizes: Len %d, held %d (size 2500)", c.Len(), c.held())
	}
}

// A lower max_ttl at a reload shortens the entries already held, and the
// TTLs they show.
func TestCacheConfigureCapsTTL(t *testing.T) {
	clock := newFakeClock()
	c := NewCache(CacheConfig{Size: 10, MaxTTL: time.Hour, NegativeTTL: time.Minute})
	c.now = func() int64 { return clock.now().UnixNano() }
	c.Insert(keyA("a.example."), aMsg("a.example.", 3000))
	clock.advance(10 * time.Second)
	c.Configure(CacheConfig{Size: 10, MaxTTL: time.Minute, NegativeTTL: time.Minute})
	m, ok := c.Get(keyA("a.example."))
	if !ok || m.Answer[0].Header().Ttl != 50 {
		t.Fatalf("after max_ttl 1m: %v", m)
	}
	clock.advance(50 * time.Second)
	if _, ok := c.Get(keyA("a.example.")); ok {
		t.Fatal("entry outlived the new max_ttl")
	}
}

func TestCacheFlush(t *testing.T) {
	c := NewCache(CacheConfig{Size: 100, MaxTTL: time.Hour, NegativeTTL: time.Minute})
	for _, name := range []string{"example.com.", "a.example.com.", "b.a.example.com.", "notexample.com.", "example.org."} {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Ttl: 300}, A: net.ParseIP("192.0.2.1")}}
		c.Insert(Key{Name: name, Type: dns.TypeA}, m)
	}
	if n := c.Flush("a.example.com."); n != 2 || c.Len() != 3 {
		t.Fatalf("flush a.example.com: removed %d, %d left; want 2, 3", n, c.Len())
	}
	if _, ok := c.Get(Key{Name: "notexample.com.", Type: dns.TypeA}); !ok {
		t.Fatal("a name that only ends like the flushed one was dropped")
	}
	if n := c.Flush(""); n != 3 || c.Len() != 0 {
		t.Fatalf("flush all: removed %d, %d left", n, c.Len())
	}
}

// The cache's clock runs between its first read and Close, stays within a
// tick of the wall clock, and reads the wall clock after Close.
func TestCacheClock(t *testing.T) {
	c := NewCache(CacheConfig{})
	first := c.now()
	if d := time.Since(time.Unix(0, first)); d < 0 || d > time.Second {
		t.Fatalf("first read %v from the wall clock", d)
	}
	deadline := time.Now().Add(2 * time.Second)
	for c.now() == first {
		if time.Now().After(deadline) {
			t.Fatal("the clock did not move in 2 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Close()
	c.Close() // twice is fine
	a := c.now()
	time.Sleep(5 * time.Millisecond)
	if b := c.now(); b <= a {
		t.Fatalf("after Close the clock stood still: %d then %d", a, b)
	}
	// Closed before the first read: no goroutine, the wall clock.
	d := NewCache(CacheConfig{})
	d.Close()
	if v := d.now(); time.Since(time.Unix(0, v)) > time.Second {
		t.Fatal("closed clock is not the wall clock")
	}
}
