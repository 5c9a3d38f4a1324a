package server

import (
	"bytes"
	"crypto/tls"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"

	"golang.org/x/net/http2"
)

// The cutter cuts an HTTP/2 byte stream after each frame that ends a
// stream, and nowhere else, however the stream is split into writes.
func TestFrameCutter(t *testing.T) {
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	var want []int // offsets in b after which a cut is due
	mark := func() { want = append(want, b.Len()) }
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	block := []byte{0x88} // :status 200
	check(fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 16}))
	check(fr.WriteSettingsAck())
	check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true}))
	check(fr.WriteData(1, true, bytes.Repeat([]byte{1}, 45)))
	mark()
	check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block, EndHeaders: true}))
	check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: block, EndHeaders: true}))
	check(fr.WriteData(3, false, bytes.Repeat([]byte{3}, 20000)))
	check(fr.WriteWindowUpdate(0, 1000))
	check(fr.WriteData(3, true, []byte{3}))
	mark()
	check(fr.WriteData(5, true, nil)) // an empty DATA frame ends its stream too
	mark()
	// A header block that ends a stream in its last CONTINUATION.
	check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 7, BlockFragment: block, EndStream: true}))
	check(fr.WriteContinuation(7, false, block))
	check(fr.WriteContinuation(7, true, block))
	mark()
	// A header block in CONTINUATION frames that does not end its stream.
	check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 15, BlockFragment: block}))
	check(fr.WriteContinuation(15, true, block))
	check(fr.WriteData(15, true, []byte{15}))
	mark()
	// Headers alone that end a stream; a padded DATA frame.
	check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 9, BlockFragment: block, EndHeaders: true, EndStream: true}))
	mark()
	check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 11, BlockFragment: block, EndHeaders: true}))
	check(fr.WriteDataPadded(11, true, []byte{11, 11}, make([]byte, 7)))
	mark()
	check(fr.WritePing(true, [8]byte{}))
	check(fr.WriteRSTStream(13, http2.ErrCodeRefusedStream))
	check(fr.WriteGoAway(13, http2.ErrCodeNo, nil))
	stream := b.Bytes()

	// Writes of every fixed size, then of random sizes.
	for size := 1; size <= len(stream)+1; size += max(1, size/7) {
		var writeEnds []int
		for at := size; at < len(stream); at += size {
			writeEnds = append(writeEnds, at)
		}
		got := cutStream(t, stream, func(int) int { return size })
		checkCuts(t, "size", size, got, want, writeEnds)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		var sizes []int
		for n := 0; n < len(stream); {
			s := 1 + rnd.IntN(5000)
			if rnd.IntN(3) == 0 {
				s = 1 + rnd.IntN(12)
			}
			sizes = append(sizes, s)
			n += s
		}
		var writeEnds []int
		at := 0
		for _, s := range sizes[:len(sizes)-1] {
			at += s
			writeEnds = append(writeEnds, at)
		}
		got := cutStream(t, stream, func(j int) int { return sizes[j] })
		checkCuts(t, "random", i, got, want, writeEnds)
	}
}

// cutStream writes stream in writes of size(j) bytes (the j-th) and
// returns the offsets of the cutter's cuts inside the writes.
func cutStream(t *testing.T, stream []byte, size func(j int) int) []int {
	t.Helper()
	var f frameCutter
	var cuts []int
	var out []byte
	at := 0
	for j := 0; at < len(stream); j++ {
		p := stream[at:min(at+size(j), len(stream))]
		for len(p) > 0 {
			k := f.cut(p)
			if k <= 0 || k > len(p) {
				t.Fatalf("cut %d of %d bytes", k, len(p))
			}
			out = append(out, p[:k]...)
			p = p[k:]
			at += k
			if len(p) > 0 {
				cuts = append(cuts, at)
			}
		}
	}
	if !bytes.Equal(out, stream) {
		t.Fatal("the pieces are not the stream")
	}
	return cuts
}

// checkCuts: the cuts are the due ones, but for those where a write ends
// anyway.
func checkCuts(t *testing.T, what string, n int, got, want, writeEnds []int) {
	t.Helper()
	var due []int
	for _, w := range want {
		if !slices.Contains(writeEnds, w) {
			due = append(due, w)
		}
	}
	if !slices.Equal(got, due) {
		t.Fatalf("%s %d: cuts at %v, want %v", what, n, got, due)
	}
}

// The cost of a record per answer: one write of 16 ready answers (what
// the HTTP/2 server flushes at once) to a TLS connection over loopback:
// as it is (in one or two records), cut after each answer with the
// records gathered into one socket write (what dnsd does), and cut with
// a socket write per record. ns/answer is per answer.
func BenchmarkDoHAnswerWrites(b *testing.B) {
	var flush bytes.Buffer
	fr := http2.NewFramer(&flush, nil)
	block := bytes.Repeat([]byte{0x88}, 24) // a response's HPACK block
	const answers = 16
	for i := range answers {
		id := uint32(2*i + 1)
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true})
		_ = fr.WriteData(id, true, make([]byte, 62))
	}
	var bufs sync.Pool
	for _, bc := range []struct {
		name string
		conn func(raw net.Conn, conf *tls.Config) (*tls.Conn, net.Conn)
	}{
		{"one-write", func(raw net.Conn, conf *tls.Config) (*tls.Conn, net.Conn) {
			c := tls.Server(raw, conf)
			return c, c
		}},
		{"record-per-answer", func(raw net.Conn, conf *tls.Config) (*tls.Conn, net.Conn) {
			d := &dohConn{Conn: raw, release: func() {}, bufs: &bufs}
			c := tls.Server(d, conf)
			return c, &responseRecords{Conn: c, raw: d}
		}},
		{"record-per-answer-unbatched", func(raw net.Conn, conf *tls.Config) (*tls.Conn, net.Conn) {
			c := tls.Server(raw, conf)
			return c, &responseRecords{Conn: c}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			srvConf, cliConf := selfSigned(b)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			read := make(chan error, 1)
			go func() {
				raw, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					read <- err
					return
				}
				defer raw.Close()
				if err := tls.Client(raw, cliConf).Handshake(); err != nil {
					read <- err
					return
				}
				// The records as they come, not decrypted: the
				// benchmark is the server's.
				_, err = io.Copy(io.Discard, raw)
				read <- err
			}()
			raw, err := ln.Accept()
			if err != nil {
				b.Fatal(err)
			}
			c, w := bc.conn(raw, srvConf)
			if err := c.Handshake(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := w.Write(flush.Bytes()); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*answers), "ns/answer")
			_ = c.Close()
			if err := <-read; err != nil {
				b.Fatal(err)
			}
		})
	}
}
