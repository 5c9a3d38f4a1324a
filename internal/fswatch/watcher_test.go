package fswatch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dnsd/dnsd/internal/fsutil"
)

// delivery is one call of the test's Func: what it was handed and what
// it found.
type delivery struct {
	at      time.Time
	files   []string
	read    map[string]string // content read, by file
	failed  map[string]error
	held    map[string]bool
	applied map[string]time.Duration // emptied files applied, after waiting
}

// reader is a Func as a file source writes one: it reads each file handed
// over (through fsutil, which refuses a FIFO), keeps the last good
// content, fails a file it cannot read, and holds a file that turned
// empty.
type reader struct {
	mu   sync.Mutex
	last map[string]string // the content applied
	got  chan delivery
	// fail, when set, makes the read of a file fail (tests of the
	// retry, with nothing changing on disk).
	fail func(file string) bool
}

func newReader(files ...string) *reader {
	r := &reader{last: make(map[string]string), got: make(chan delivery, 1000)}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil {
			r.last[f] = string(b)
		}
	}
	return r
}

func (r *reader) read(_ context.Context, c *Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := delivery{at: time.Now(), files: slices.Clone(c.Files), read: map[string]string{}, failed: map[string]error{},
		held: map[string]bool{}, applied: map[string]time.Duration{}}
	for _, f := range c.Files {
		b, _, err := fsutil.ReadFile(f, 0)
		if err == nil && r.fail != nil && r.fail(f) {
			err = errors.New("failing on purpose")
		}
		if err != nil {
			d.failed[f] = err
			c.Failed(f)
			continue
		}
		d.read[f] = string(b)
		if len(b) == 0 && r.last[f] != "" {
			if hold, waited := c.HoldEmpty(f); hold {
				d.held[f] = true
				continue
			} else {
				d.applied[f] = waited
			}
		}
		r.last[f] = string(b)
	}
	r.got <- d
}

func (r *reader) content(file string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[file]
}

// next waits for the next delivery.
func (r *reader) next(t *testing.T, what string) delivery {
	t.Helper()
	select {
	case d := <-r.got:
		return d
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: nothing handed over in 5 s", what)
		return delivery{}
	}
}

// until waits for a delivery that satisfies ok, skipping others.
func (r *reader) until(t *testing.T, what string, ok func(delivery) bool) delivery {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case d := <-r.got:
			if ok(d) {
				return d
			}
		case <-deadline:
			t.Fatalf("%s: not handed over in 10 s", what)
		}
	}
}

// none checks that nothing is handed over for d.
func (r *reader) none(t *testing.T, what string, d time.Duration) {
	t.Helper()
	select {
	case got := <-r.got:
		t.Fatalf("%s: handed over %v (read %q, failed %v)", what, got.files, got.read, got.failed)
	case <-time.After(d):
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replace writes path the way editors and `mv` do: a new file renamed
// over it.
func replace(t *testing.T, path, content string) {
	t.Helper()
	write(t, path+".tmp", content)
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func watch(t *testing.T, r *reader, opts Options, files ...string) *Watcher {
	t.Helper()
	w, err := New(files, r.read, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return w
}

// watchOne writes dir/hosts with "one\n" in a new directory and watches
// it with a reader.
func watchOne(t *testing.T, opts Options) (path string, r *reader) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "hosts")
	write(t, path, "one\n")
	r = newReader(path)
	watch(t, r, opts, path)
	return path, r
}

func TestRenameOver(t *testing.T) {
	path, r := watchOne(t, Options{})
	replace(t, path, "two\n")
	d := r.next(t, "a file renamed over")
	if !slices.Equal(d.files, []string{path}) || d.read[path] != "two\n" {
		t.Fatalf("handed over %v, read %q; want %s with two", d.files, d.read, path)
	}
	r.none(t, "after the rename", 3*Debounce) // one burst, one delivery
}

// A file truncated and written in pieces, with pauses shorter than the
// debounce but longer than it in all, is handed over once, complete: the
// quiet wait starts again at every event.
func TestInPlaceRewriteDebounced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	full := strings.Repeat("10.0.0.1 web.example.internal\n", 100)
	write(t, path, full)
	r := newReader(path)
	const debounce = 300 * time.Millisecond
	watch(t, r, Options{Debounce: debounce}, path)
	const pieces = 5
	for tries := 0; ; tries++ {
		if tries == 5 {
			t.Skip("the writer was held up in every round: the machine is too busy to tell")
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		var pause time.Duration
		last := time.Now()
		for piece := range pieces {
			if piece > 0 {
				time.Sleep(debounce / 3)
			}
			if _, err := f.WriteString(full[piece*len(full)/pieces : (piece+1)*len(full)/pieces]); err != nil {
				t.Fatal(err)
			}
			pause, last = max(pause, time.Since(last)), time.Now()
		}
		f.Close()
		done := time.Now()
		d := r.next(t, "the rewrite")
		if pause >= 2*debounce/3+debounce/6 {
			t.Logf("round %d: the writer paused %v, not counted", tries, pause)
			time.Sleep(3 * debounce)
			for len(r.got) > 0 {
				<-r.got
			}
			continue
		}
		if d.read[path] != full {
			t.Fatalf("handed over mid-write (pauses at most %v): read %d of %d bytes", pause, len(d.read[path]), len(full))
		}
		if quiet := d.at.Sub(done); quiet < debounce/2 {
			t.Errorf("handed over %v after the last write, before a quiet debounce (%v)", quiet, debounce)
		}
		r.none(t, "after the rewrite", 2*debounce)
		return
	}
}

// A file truncated and refilled within the grace is never applied empty;
// one that stays empty is applied once it has waited the grace.
func TestEmptyGrace(t *testing.T) {
	const grace = 500 * time.Millisecond
	path, r := watchOne(t, Options{EmptyGrace: grace})

	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if d := r.next(t, "the truncation"); !d.held[path] {
		t.Fatalf("the emptied file was not held: %+v", d)
	}
	time.Sleep(grace / 4)
	write(t, path, "two\n")
	if d := r.next(t, "the refill"); d.read[path] != "two\n" || len(d.applied) > 0 {
		t.Fatalf("after the refill: %+v", d)
	}
	r.none(t, "after the refill, past the grace", grace+grace/2) // no longer held: no recheck

	emptied := time.Now()
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if d := r.next(t, "the second truncation"); !d.held[path] {
		t.Fatalf("the emptied file was not held: %+v", d)
	}
	d := r.next(t, "the recheck after the grace")
	waited, ok := d.applied[path]
	if !ok || waited < grace {
		t.Fatalf("after the grace: %+v, want the empty file applied after waiting %v", d, grace)
	}
	if took := d.at.Sub(emptied); took < grace {
		t.Errorf("applied %v after the truncation, before the %v grace", took, grace)
	}
	if r.content(path) != "" {
		t.Errorf("content %q, want the empty file", r.content(path))
	}
}

// A removed file fails to read and keeps being read again with backoff;
// made again, it is read.
func TestRemoveAndRecreate(t *testing.T) {
	path, r := watchOne(t, Options{})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if d := r.next(t, "the removal"); d.failed[path] == nil {
		t.Fatalf("the removed file: %+v, want a failed read", d)
	}
	// Read again with no event: RetryFirst later.
	if d := r.next(t, "the first retry"); d.failed[path] == nil {
		t.Fatalf("the retry: %+v", d)
	}
	write(t, path, "two\n")
	r.until(t, "the file made again", func(d delivery) bool { return d.read[path] == "two\n" })
	if r.content(path) != "two\n" {
		t.Fatalf("content %q", r.content(path))
	}
}

// A file that cannot be read is handed over again, with no event, after
// RetryFirst, then twice as long each time, until it is read; then no
// more.
func TestRetryBacksOff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	write(t, path, "one\n")
	r := newReader(path)
	var mu sync.Mutex
	failing := true
	r.fail = func(string) bool { mu.Lock(); defer mu.Unlock(); return failing }
	watch(t, r, Options{}, path)
	write(t, path, "two\n")
	prev := r.next(t, "the change").at
	var gaps []time.Duration
	for range 3 {
		d := r.next(t, "a retry")
		if d.failed[path] == nil {
			t.Fatalf("a retry: %+v", d)
		}
		gaps = append(gaps, d.at.Sub(prev))
		prev = d.at
	}
	for i, want := range []time.Duration{RetryFirst, 2 * RetryFirst, 4 * RetryFirst} {
		if gaps[i] < want {
			t.Fatalf("retries after %v, want at least %v, doubling", gaps, want)
		}
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	r.until(t, "the read that works", func(d delivery) bool { return d.read[path] == "two\n" })
	r.none(t, "once read", 10*RetryFirst)
}

// A FIFO put in the file's place is never opened (the reader's read
// refuses it, the watcher only stats it), and a regular file put back is
// read; Close returns meanwhile.
func TestFIFOInThePlace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hosts")
	write(t, path, "one\n")
	r := newReader(path)
	w := watch(t, r, Options{}, path)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	r.until(t, "the FIFO", func(d delivery) bool { return errors.Is(d.failed[path], fsutil.ErrNotRegular) })
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	write(t, path, "two\n")
	r.until(t, "the file put back", func(d delivery) bool { return d.read[path] == "two\n" })

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	r.until(t, "the FIFO again", func(d delivery) bool { return d.failed[path] != nil })
	closed := make(chan error, 1)
	go func() { closed <- w.Close() }()
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("Close blocked with a FIFO in the file's place")
	}
}

// The Kubernetes ConfigMap volume: dir/hosts -> ..data/hosts, ..data ->
// ..v1; an update writes ..v2, renames a new ..data link over the old
// one and removes ..v1. No event names "hosts".
func TestDirectorySymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	mk := func(v, content string) {
		if err := os.Mkdir(filepath.Join(dir, v), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, v, "hosts"), content)
	}
	mk("..v1", "one\n")
	if err := os.Symlink("..v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "hosts")
	if err := os.Symlink(filepath.Join("..data", "hosts"), path); err != nil {
		t.Fatal(err)
	}
	r := newReader(path)
	watch(t, r, Options{}, path)
	for i, v := range []string{"..v2", "..v3"} {
		content := fmt.Sprintf("swap %d\n", i)
		mk(v, content)
		if err := os.Symlink(v, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		old := "..v1"
		if i == 1 {
			old = "..v2"
		}
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
		r.until(t, "the swap to "+v, func(d delivery) bool { return d.read[path] == content })
	}
	r.none(t, "after the swaps", 3*Debounce)
}

// A file that is a symlink into another directory is watched there too:
// a change of the file it names is handed over, and after the link is
// pointed into a third directory, changes there.
func TestSymlinkElsewhere(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"conf", "data", "data2"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	real := filepath.Join(root, "data", "hosts")
	write(t, real, "one\n")
	link := filepath.Join(root, "conf", "hosts")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	r := newReader(link)
	watch(t, r, Options{}, link)
	replace(t, real, "two\n")
	r.until(t, "the change of the file named", func(d delivery) bool { return d.read[link] == "two\n" })
	other := filepath.Join(root, "data2", "hosts")
	write(t, other, "three\n")
	if err := os.Symlink(other, link+".new"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(link+".new", link); err != nil {
		t.Fatal(err)
	}
	r.until(t, "the link pointed elsewhere", func(d delivery) bool { return d.read[link] == "three\n" })
	replace(t, other, "four\n")
	r.until(t, "a change where it points now", func(d delivery) bool { return d.read[link] == "four\n" })
}

// Other files of the directory changing hand nothing over (the files are
// statted, not read).
func TestUnrelatedFiles(t *testing.T) {
	path, r := watchOne(t, Options{})
	dir := filepath.Dir(path)
	for i := range 5 {
		write(t, filepath.Join(dir, fmt.Sprint("other", i)), "x")
	}
	r.none(t, "other files written", 4*Debounce)
}

// With Together, a change of one file hands all of them over; Watch
// changes the files watched.
func TestTogetherAndWatch(t *testing.T) {
	dir, dir2 := t.TempDir(), t.TempDir()
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir2, "c")
	for _, p := range []string{a, b, c} {
		write(t, p, "x\n")
	}
	r := newReader(a, b)
	var mu sync.Mutex
	var files []string // to watch from the next delivery
	read := func(ctx context.Context, ch *Change) {
		mu.Lock()
		if files != nil {
			ch.Watch(files)
		}
		mu.Unlock()
		r.read(ctx, ch)
	}
	w, err := New([]string{a, b}, read, Options{Together: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	write(t, b, "b1\n")
	if d := r.next(t, "a change of b"); !slices.Equal(d.files, []string{a, b}) {
		t.Fatalf("handed over %v, want both files", d.files)
	}
	mu.Lock()
	files = []string{a, c}
	mu.Unlock()
	write(t, a, "a1\n")
	r.next(t, "a change of a")
	// c, newly watched, is handed over once more (a write before its
	// directory was watched would have had no event); a write to it,
	// whenever it comes, is handed over.
	write(t, c, "c1\n")
	for {
		d := r.next(t, "a change of c")
		if !slices.Equal(d.files, []string{a, c}) {
			t.Fatalf("handed over %v (read %q), want a and c", d.files, d.read)
		}
		if d.read[c] == "c1\n" {
			break
		}
	}
}

// Events lost to an overflow of the kernel's queue: every file is handed
// over, even one whose change no stat could tell.
func TestOverflowReadsEveryFile(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	write(t, a, "a0\n")
	write(t, b, "b0\n")
	r := newReader(a, b)
	block := make(chan struct{})
	var once sync.Once
	read := func(ctx context.Context, c *Change) {
		once.Do(func() { <-block }) // the first delivery waits: the kernel queues meanwhile
		r.read(ctx, c)
	}
	w, err := New([]string{a, b}, read, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	write(t, a, "a1\n")
	time.Sleep(3 * Debounce) // the Func is called, and waits
	// Fill the queue (max_queued_events, 16384 by default) with distinct
	// names; then change b so that neither its event (lost) nor a stat
	// (same size, same time) says so.
	queued := 16384
	if s, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events"); err == nil {
		fmt.Sscan(string(s), &queued)
	}
	if queued > 100000 {
		t.Skipf("max_queued_events is %d: too many events to make", queued)
	}
	// fsnotify holds a few thousand more in its read buffer.
	for i := range queued + 8000 {
		f, err := os.Create(filepath.Join(dir, fmt.Sprint("f", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	info, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	write(t, b, "b1\n")
	if err := os.Chtimes(b, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	close(block)
	r.until(t, "b after the overflow", func(d delivery) bool { return d.read[b] == "b1\n" })
}

// Close stops the goroutine and ends the context of a Func running.
func TestCloseEndsTheFunc(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	write(t, path, "one\n")
	called := make(chan struct{})
	w, err := New([]string{path}, func(ctx context.Context, c *Change) {
		close(called)
		<-ctx.Done()
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, path, "two\n")
	<-called
	closed := make(chan error, 1)
	go func() { closed <- w.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not end the Func's context")
	}
	select {
	case <-w.done:
	default:
		t.Fatal("the watch goroutine runs after Close")
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// A directory removed and made again is watched again, and its files
// handed over.
func TestDirectoryRemovedAndBack(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "hosts")
	write(t, path, "one\n")
	r := newReader(path)
	watch(t, r, Options{}, path)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	r.until(t, "the removal", func(d delivery) bool { return d.failed[path] != nil })
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, path, "two\n")
	r.until(t, "the directory made again", func(d delivery) bool { return d.read[path] == "two\n" })
	replace(t, path, "three\n")
	r.until(t, "an edit after", func(d delivery) bool { return d.read[path] == "three\n" })
}
