// Package workspace keeps a rollout's final workspace in its output folder
// and puts it back into a fresh sandbox session: generate --keep-workspace
// archives the files of the session's working folder (tar, zstd) before the
// session closes, and `hermes-pipe regrade` restores them to run a grader
// again without the model.
//
// An archive lives in the output folder's workspaces/ folder under a name
// made of hashes (the record key's and the archive's), written atomically
// (temp file, fsync, rename, fsync the folder) before the record that names
// it is committed; the record's extra.workspace member (Info) is what says an
// archive is kept, so an archive no live record names (a kill -9 between the
// rename and the commit, a row redone by --resume) is an orphan that Sweep
// removes. Archives are untrusted on restore (an output folder may come from
// someone else): names are checked, the size and SHA-256 held to the record,
// the decompressed size bounded, and every member checked (no absolute or
// `..` path, nothing written through a link, no device) before a clean copy
// is unpacked in the session.
//
// It imports sandbox and pipeline/atomicfile only; it must not import cmd.
package workspace
