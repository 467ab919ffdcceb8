package objstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
)

// Object names under a store's prefix, besides the shard files (data/…,
// failed/…) that keep their folder-relative names.
const (
	SegmentDir = "ledger/"
	MarkerName = "ledger/commit.json"
)

// IsURL reports whether out names object storage rather than a local folder.
func IsURL(out string) bool {
	for _, s := range []string{"s3://", "file://", "gs://", "azblob://"} {
		if strings.HasPrefix(out, s) {
			return true
		}
	}
	return false
}

// Store is one prefix of a bucket. Its methods are safe for concurrent use;
// pushes are serialised.
type Store struct {
	url    string
	prefix string       // "" or ending in "/"; every key is prefixed with it
	bucket *blob.Bucket // shared with Sub stores, closed by Close of the opened one

	pushMu sync.Mutex
}

// Open opens the store at rawURL: s3://BUCKET/PREFIX?endpoint=…&region=… (the
// gocloud.dev s3blob URL parameters; credentials from the usual AWS
// environment), gs://BUCKET/PREFIX (Google application default
// credentials), azblob://CONTAINER/PREFIX (AZURE_STORAGE_ACCOUNT and the
// usual Azure credentials) or file:///PATH (a folder, created if missing).
// Only s3:// and file:// are exercised by this repository's tests; gs:// and
// azblob:// go through the same gocloud.dev API. It makes no request beyond
// what the provider's opener needs to find credentials.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", rawURL, err)
	}
	mux := new(blob.URLMux)
	mux.RegisterBucket(fileblob.Scheme, new(fileblob.URLOpener))
	mux.RegisterBucket(gcsblob.Scheme, new(gcsblob.URLOpener))
	mux.RegisterBucket(azureblob.Scheme, new(azureblob.URLOpener))
	prefix := ""
	switch u.Scheme {
	case s3blob.Scheme, gcsblob.Scheme, azureblob.Scheme:
		prefix = strings.Trim(u.Path, "/")
		u.Path = ""
	case fileblob.Scheme:
		q := u.Query()
		q.Set("create_dir", "true")
		q.Set("metadata", "skip")
		u.RawQuery = q.Encode()
	default:
		return nil, fmt.Errorf("open store %s: scheme %q is not supported (use s3://, gs://, azblob:// or file://)", rawURL, u.Scheme)
	}
	var b *blob.Bucket
	if u.Scheme == s3blob.Scheme {
		b, err = openS3(ctx, u)
	} else {
		b, err = mux.OpenBucketURL(ctx, u)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", rawURL, err)
	}
	s := &Store{url: rawURL, bucket: b}
	if prefix != "" {
		s.prefix = prefix + "/"
	}
	return s, nil
}

// Close releases the bucket (of Sub stores too).
func (s *Store) Close() error { return s.bucket.Close() }

// key is the object key of name.
func (s *Store) key(name string) string { return s.prefix + name }

// URL is the URL the store was opened with.
func (s *Store) URL() string { return s.url }

// ObjectURL is the URL of the object (or sub-prefix) name under the store:
// name joins the path, before any query string, so that
// s3://b/run?region=r and "ledger/commit.json" give
// s3://b/run/ledger/commit.json?region=r. Messages name objects with it.
func (s *Store) ObjectURL(name string) string {
	u := strings.TrimRight(s.url, "/")
	if q := strings.IndexByte(u, '?'); q >= 0 {
		return strings.TrimRight(u[:q], "/") + "/" + name + u[q:]
	}
	return u + "/" + name
}

// Sub returns the store of a sub-prefix (a shard's folder). It shares the
// bucket: close only the parent.
func (s *Store) Sub(name string) *Store {
	return &Store{url: s.ObjectURL(name), prefix: s.prefix + name + "/", bucket: s.bucket}
}

// Children lists the immediate sub-prefixes of the store ("shard-0-of-8", …),
// sorted. It costs one listing request per 1000 names.
func (s *Store) Children(ctx context.Context) ([]string, error) {
	it := s.bucket.List(&blob.ListOptions{Prefix: s.prefix, Delimiter: "/"})
	var names []string
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", s.url, err)
		}
		if obj.IsDir {
			names = append(names, strings.TrimSuffix(strings.TrimPrefix(obj.Key, s.prefix), "/"))
		}
	}
	sort.Strings(names)
	return names, nil
}

// Marker is ledger/commit.json: the ledger is the concatenation of Segments.
type Marker struct {
	Segments []Segment `json:"segments"`
	Bytes    int64     `json:"bytes"`  // total ledger bytes
	SHA256   string    `json:"sha256"` // of the whole ledger
}

// Segment is one immutable piece of the ledger. Committed and Rows say when
// it was pushed and how many records its lines commit, so the progress of a
// run in a store can be told from the marker alone (status); markers written
// before they existed leave them zero.
type Segment struct {
	Name      string    `json:"name"`
	Bytes     int64     `json:"bytes"`
	SHA256    string    `json:"sha256"`
	Committed time.Time `json:"committed,omitzero"`
	Rows      int       `json:"rows,omitempty"`
}

// ReadMarker returns the commit marker, or an empty one when the store holds
// no run yet.
func (s *Store) ReadMarker(ctx context.Context) (*Marker, error) {
	b, err := s.bucket.ReadAll(ctx, s.key(MarkerName))
	if gcerrors.Code(err) == gcerrors.NotFound {
		return &Marker{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.ObjectURL(MarkerName), err)
	}
	var m Marker
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("read %s: %w", s.ObjectURL(MarkerName), err)
	}
	return &m, nil
}

// PushStats says what one Push uploaded.
type PushStats struct {
	Files    int   // shard files uploaded
	Segments int   // ledger segments uploaded (0 or 1)
	Bytes    int64 // bytes uploaded, small files included
}

// Push uploads what the output folder dir has committed and the store lacks:
// the shard files named by ledger lines past the marker, those lines as one
// new segment, the new marker, then run.json, rejects.jsonl and
// statistics.json. It may run while a run appends to dir (it reads only
// complete ledger lines, whose files are already committed). It refuses a dir
// whose ledger does not continue the store's (another run, or --overwrite
// without clearing the store). It blocks for the uploads.
func (s *Store) Push(ctx context.Context, dir string) (PushStats, error) {
	s.pushMu.Lock()
	defer s.pushMu.Unlock()
	var st PushStats
	// Read the marker every time (one small GET): a writer whose spool fell
	// behind the store (another process pushed this prefix) must be refused,
	// not allowed to replace the marker.
	m, err := s.ReadMarker(ctx)
	if err != nil {
		return st, err
	}
	ledger, err := os.ReadFile(filepath.Join(dir, pipeline.LedgerFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("push %s: %w", dir, err)
	}
	ledger = ledger[:bytes.LastIndexByte(ledger, '\n')+1] // complete lines only
	if int64(len(ledger)) < m.Bytes || sha(ledger[:m.Bytes]) != m.SHA256 && m.Bytes > 0 {
		return st, fmt.Errorf("push %s to %s: the store holds another run's ledger (%d bytes) than the local folder (%d bytes): resume from the store (an empty spool), or clear the store for a fresh run", dir, s.url, m.Bytes, len(ledger))
	}
	fresh := ledger[m.Bytes:]
	if len(fresh) > 0 {
		rows := 0 // records the new lines commit
		tail, err := outdir.Scan(string(fresh), func(_ int, line *outdir.Line) error {
			if line.Shard == "" {
				return nil
			}
			rows += len(line.Rows)
			n, err := s.putFile(ctx, filepath.Join(dir, filepath.FromSlash(line.Shard)), line.Shard, line.SHA256)
			if err != nil {
				return err
			}
			st.Files++
			st.Bytes += n
			return nil
		})
		if err == nil && tail.Torn {
			err = fmt.Errorf("ledger line %d past the store's is unparsable (run verify)", tail.TornLine)
		}
		if err != nil {
			return st, fmt.Errorf("push %s: %w", dir, err)
		}
		seg := Segment{Name: fmt.Sprintf("%s%06d.jsonl", SegmentDir, len(m.Segments)+1), Bytes: int64(len(fresh)), SHA256: sha(fresh),
			Committed: time.Now().UTC(), Rows: rows}
		if err := s.bucket.WriteAll(ctx, s.key(seg.Name), fresh, &blob.WriterOptions{ContentType: "application/x-ndjson"}); err != nil {
			return st, fmt.Errorf("push %s: write %s: %w", dir, seg.Name, err)
		}
		next := &Marker{Segments: append(append([]Segment(nil), m.Segments...), seg), Bytes: int64(len(ledger)), SHA256: sha(ledger)}
		b, _ := json.MarshalIndent(next, "", "  ")
		if err := s.bucket.WriteAll(ctx, s.key(MarkerName), b, &blob.WriterOptions{ContentType: "application/json"}); err != nil {
			return st, fmt.Errorf("push %s: write %s: %w", dir, MarkerName, err)
		}
		st.Segments = 1
		st.Bytes += int64(len(fresh) + len(b))
	}
	for _, name := range []string{pipeline.ManifestFile, pipeline.RejectsFile, pipeline.StatisticsFile, outdir.SpendFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return st, fmt.Errorf("push %s: %w", dir, err)
		}
		if err := s.bucket.WriteAll(ctx, s.key(name), b, nil); err != nil {
			return st, fmt.Errorf("push %s: write %s: %w", dir, name, err)
		}
		st.Bytes += int64(len(b))
	}
	return st, nil
}

// putFile streams a committed shard file to the object key, checking its
// SHA-256 against the ledger's on the way; on a mismatch or error the object
// is not written (the writer's context is cancelled before Close).
func (s *Store) putFile(ctx context.Context, local, key, want string) (int64, error) {
	f, err := os.Open(local)
	if err != nil {
		return 0, fmt.Errorf("upload %s: %w", key, err)
	}
	defer f.Close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.bucket.NewWriter(wctx, s.key(key), nil)
	if err != nil {
		return 0, fmt.Errorf("upload %s: %w", key, err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), f)
	if err == nil && want != "" && hex.EncodeToString(h.Sum(nil)) != want {
		err = fmt.Errorf("SHA-256 differs from the ledger's: the local folder is damaged (run verify)")
	}
	if err != nil {
		cancel()
		_ = w.Close()
		return 0, fmt.Errorf("upload %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return 0, fmt.Errorf("upload %s: %w", key, err)
	}
	return n, nil
}

// PullOptions configure Pull.
type PullOptions struct {
	// LedgerOnly fetches run.json and the ledger but no shard file (enough
	// for status; not for cat or verify).
	LedgerOnly bool
}

// Pull rebuilds the output folder dir from the store as of its commit
// marker: the ledger from the listed segments, every shard file the ledger
// names (each checked against its SHA-256), run.json, rejects.jsonl,
// statistics.json and the spend journal (as of the last push: a run
// restored on another machine counts what was spent up to it against
// --max-cost). dir must be missing or empty, or hold exactly a previous
// pull (then shard files already present with the right size are kept). A
// store with no run leaves dir empty. It blocks for the downloads.
func (s *Store) Pull(ctx context.Context, dir string, opts PullOptions) error {
	m, err := s.ReadMarker(ctx)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("pull %s: %w", s.url, err)
	}
	var ledger bytes.Buffer
	for _, seg := range m.Segments {
		b, err := s.bucket.ReadAll(ctx, s.key(seg.Name))
		if err != nil {
			return fmt.Errorf("pull %s: %w", s.ObjectURL(seg.Name), err)
		}
		if int64(len(b)) != seg.Bytes || sha(b) != seg.SHA256 {
			return fmt.Errorf("pull %s: does not match the commit marker", s.ObjectURL(seg.Name))
		}
		ledger.Write(b)
	}
	if sha(ledger.Bytes()) != m.SHA256 && m.Bytes > 0 {
		return fmt.Errorf("pull %s: the ledger segments do not add up to the commit marker", s.url)
	}
	if !opts.LedgerOnly {
		// The marker covers complete lines only, so nothing here is torn.
		_, err := outdir.Scan(ledger.String(), func(_ int, line *outdir.Line) error {
			if line.Shard == "" {
				return nil
			}
			local := filepath.Join(dir, filepath.FromSlash(path.Clean(line.Shard)))
			if !strings.HasPrefix(local, filepath.Clean(dir)+string(filepath.Separator)) {
				return fmt.Errorf("ledger names %q outside the folder", line.Shard)
			}
			if fi, err := os.Stat(local); err == nil && fi.Size() == line.Bytes && fileSHA(local) == line.SHA256 {
				return nil // already in the cache
			}
			return s.getFile(ctx, line.Shard, local, line.SHA256)
		})
		if err != nil {
			return fmt.Errorf("pull %s: %w", s.url, err)
		}
	}
	for _, name := range []string{pipeline.ManifestFile, pipeline.RejectsFile, pipeline.StatisticsFile, outdir.SpendFile} {
		b, err := s.bucket.ReadAll(ctx, s.key(name))
		if gcerrors.Code(err) == gcerrors.NotFound {
			continue
		}
		if err != nil {
			return fmt.Errorf("pull %s: %w", s.ObjectURL(name), err)
		}
		if err := atomicfile.Write(dir, name, b); err != nil {
			return fmt.Errorf("pull %s: %w", s.url, err)
		}
	}
	if m.Bytes > 0 || len(m.Segments) > 0 {
		if err := atomicfile.Write(dir, pipeline.LedgerFile, ledger.Bytes()); err != nil {
			return fmt.Errorf("pull %s: %w", s.url, err)
		}
	}
	return nil
}

// getFile downloads key to local through a temp file, checking the SHA-256.
func (s *Store) getFile(ctx context.Context, key, local, want string) error {
	r, err := s.bucket.NewReader(ctx, s.key(key), nil)
	if err != nil {
		return fmt.Errorf("download %s: %w", key, err)
	}
	defer r.Close()
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		return fmt.Errorf("download %s: %w", key, err)
	}
	return writeFile(local, func(w io.Writer) error {
		h := sha256.New()
		if _, err := io.Copy(io.MultiWriter(w, h), r); err != nil {
			return fmt.Errorf("download %s: %w", key, err)
		}
		if want != "" && hex.EncodeToString(h.Sum(nil)) != want {
			return fmt.Errorf("download %s: SHA-256 differs from the ledger's", key)
		}
		return nil
	})
}

// writeFile writes path atomically from a stream (a shard can be large; the
// small files go through pipeline.WriteAtomic): a temp file in the same
// folder, fsync, rename.
func writeFile(path string, fill func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-pull-*")
	if err != nil {
		return err
	}
	err = fill(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// Clear deletes every object under the store's prefix (for --overwrite).
func (s *Store) Clear(ctx context.Context) error {
	it := s.bucket.List(&blob.ListOptions{Prefix: s.prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("clear %s: %w", s.url, err)
		}
		if err := s.bucket.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("clear %s: %w", s.url, err)
		}
	}
	return nil
}

// WriteFile uploads one small file (merged.json, slurm-array.json) under the store.
func (s *Store) WriteFile(ctx context.Context, name string, b []byte) error {
	if err := s.bucket.WriteAll(ctx, s.key(name), b, nil); err != nil {
		return fmt.Errorf("write %s: %w", s.ObjectURL(name), err)
	}
	return nil
}

// ReadFile downloads one small file (slurm-array.json) from under the
// store; found is false when there is none.
func (s *Store) ReadFile(ctx context.Context, name string) (b []byte, found bool, err error) {
	b, err = s.bucket.ReadAll(ctx, s.key(name))
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", s.ObjectURL(name), err)
	}
	return b, true, nil
}

func sha(b []byte) string {
	var h hash.Hash = sha256.New()
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// fileSHA returns the hex SHA-256 of a local file, "" when it cannot be read.
func fileSHA(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Fetch downloads the one object named by objectURL (s3://BUCKET/KEY,
// gs://…, azblob://…, file:///PATH) to the local file local, atomically. The
// CLI uses it for input files (--prompts, --in, --tasks) given as URLs. It
// blocks for the whole download.
func Fetch(ctx context.Context, objectURL, local string) error {
	u, err := url.Parse(objectURL)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", objectURL, err)
	}
	dir, name := path.Split(strings.TrimRight(u.Path, "/"))
	if name == "" {
		return fmt.Errorf("fetch %s: the URL names no object", objectURL)
	}
	u.Path = dir
	s, err := Open(ctx, u.String())
	if err != nil {
		return fmt.Errorf("fetch %s: %w", objectURL, err)
	}
	defer s.Close()
	if err := s.getFile(ctx, name, local, ""); err != nil {
		return fmt.Errorf("fetch %s: %w", objectURL, err)
	}
	return nil
}
