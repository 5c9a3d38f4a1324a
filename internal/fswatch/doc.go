// Package fswatch watches a set of files for a file source and hands it
// the ones that changed once their writers are done: its one job is to
// say when to read a file again, never to read one.
//
// A Watcher watches the files' directories (fsnotify), and the directory
// a symlink names when that is elsewhere, so that an editor's save, a
// `mv` over the file, an in-place rewrite and a Kubernetes ConfigMap's
// "..data" symlink swap are all seen. It waits until the directories have
// been quiet for a debounce, then calls its Func with the files that
// changed. Besides events it reads again:
//   - every file, when the kernel's event queue overflowed;
//   - a directory's files, when the directory was removed (or unmounted)
//     and exists again: the kernel drops its watch, and no event says when
//     it is back, so the directories are looked at every RewatchEvery;
//   - a file the Func could not read (Change.Failed), with backoff from
//     RetryFirst up to RetryMax, until it is read: the cause (file
//     descriptors, a parent's permission) may go away without an event;
//   - a file the Func holds empty (Change.HoldEmpty), once it has stayed
//     so for the grace: an in-place rewrite truncates first, and an empty
//     file served turns every name it had into NXDOMAIN.
//
// A Watcher only stats the files (to see a symlink swapped, or a file
// replaced, in an event that names another file): it never opens one, so
// a FIFO or a device put in a file's place cannot block it; the Func reads
// through package fsutil, which refuses them.
package fswatch
