package fsutil

import (
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
)

// RewatchEvery is how often a file source checks that its directories
// are still watched (see Rewatch).
const RewatchEvery = 2 * time.Second

// Rewatch adds to w each of dirs that w no longer watches and that exists
// again, and reports whether it added any. The kernel drops a directory's
// watch when the directory is removed (or its file system unmounted), and
// no event says when it comes back: without this, a directory deleted and
// made again, or unmounted and mounted again, would never be watched, and
// its files never read, again. A caller re-reads the files of a directory
// added back.
func Rewatch(w *fsnotify.Watcher, dirs []string) (added []string) {
	watching := w.WatchList()
	for _, d := range dirs {
		if slices.Contains(watching, d) {
			continue
		}
		if err := w.Add(d); err == nil {
			added = append(added, d)
		}
	}
	return added
}
