package cron

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"golang.org/x/sys/unix"
)

// TestStoreWriterWaitsForTheLock holds the store lock from another handle,
// starts a writer, and proves that the writer waits: inotify reports the
// writer opening the lock file again and again (each open is one attempt to
// take the lock), and after two attempts the writer has neither returned nor
// written jobs.json. Only then is the lock released, and the write must go
// through. A writer that skipped the lock would return, jobs.json written,
// without any open of the lock file; one that gave up at once would return
// ErrLocked after one attempt. Both fail here.
func TestStoreWriterWaitsForTheLock(t *testing.T) {
	home := t.TempDir()
	st := NewStore(home)
	st.LockTimeout = 10 * time.Minute // the test's own deadlines end it first
	if err := os.MkdirAll(st.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	other := flock.New(st.lockPath())
	if ok, err := other.TryLock(); !ok || err != nil {
		t.Fatalf("could not take the lock: %v", err)
	}
	released := false
	defer func() {
		if !released {
			_ = other.Unlock()
		}
	}()

	// Watch the lock file for opens after the holder has opened it, so every
	// event below is the writer's.
	opens := watchOpens(t, st.lockPath())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	starting := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(starting) // just before the write call
		_, err := AddJob(ctx, st, home, JobSpec{Schedule: "every 5m", Prompt: "a", Timezone: "UTC"}, utc("2026-05-01T10:00:00Z"))
		done <- err
	}()
	<-starting

	deadline := time.After(time.Minute)
	for attempts := 0; attempts < 2; {
		select {
		case <-opens:
			attempts++
		case err := <-done:
			t.Fatalf("the write returned (%v) after %d attempts at the lock while another handle held it", err, attempts)
		case <-deadline:
			t.Fatalf("the writer made %d attempts at the lock in a minute, want 2", attempts)
		}
	}
	// Two attempts seen and the writer still going: it is waiting. Nothing
	// may have been written meanwhile.
	select {
	case err := <-done:
		t.Fatalf("the write returned (%v) while another handle held the lock", err)
	default:
	}
	if _, err := os.Stat(st.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("jobs.json exists while another handle holds the lock: %v", err)
	}

	if err := other.Unlock(); err != nil {
		t.Fatal(err)
	}
	released = true
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("write after the lock was released: %v", err)
		}
	case <-time.After(time.Minute):
		cancel()
		t.Fatal("the writer did not finish within a minute of the lock's release")
	}
	tx, err := st.Load()
	if err != nil || tx.Len() != 1 {
		t.Fatalf("store after the waited write: %v", err)
	}
}

// watchOpens reports each open of path through the returned channel, from an
// inotify watch closed when the test ends.
func watchOpens(t *testing.T, path string) <-chan struct{} {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatalf("inotify: %v", err)
	}
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_OPEN); err != nil {
		unix.Close(fd)
		t.Fatalf("inotify watch %s: %v", path, err)
	}
	f := os.NewFile(uintptr(fd), "inotify") // non-blocking: reads go through the poller, Close ends them
	out := make(chan struct{}, 1024)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
		for {
			n, err := f.Read(buf)
			if err != nil {
				return
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				// struct inotify_event: wd, mask, cookie, len, then len bytes of name.
				mask := binary.NativeEndian.Uint32(buf[off+4:])
				nameLen := binary.NativeEndian.Uint32(buf[off+12:])
				if mask&unix.IN_OPEN != 0 {
					select {
					case out <- struct{}{}:
					default:
					}
				}
				off += unix.SizeofInotifyEvent + int(nameLen)
			}
		}
	}()
	t.Cleanup(func() {
		f.Close()
		<-stopped
	})
	return out
}
