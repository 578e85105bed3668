// Package files is core.FileStore on a directory: parley's own copies of
// the files it sends and receives, in data_dir/blobs. A file an agent posts
// is copied when the tool call is made, from the one descriptor the mcp
// package opened and checked; a file a person sends is copied as the
// adapter downloads it. Every later use reads the copy: each platform's
// upload, a restart's replay of the journal, the agent reading a person's
// file. So what was checked is what is delivered, however the original
// path changes afterwards, and a restart delivers the same bytes.
//
// # Copies
//
// A copy is named by the SHA-256 of its content, in hex, followed by the
// extension of the file's name when it is a short plain one ("….png"), so
// that an agent reading a person's file by its path still sees its type.
// Put writes the content to a temporary file in the directory while
// hashing it, syncs it, gives it mode 0400 and the current time, renames
// it to its name and syncs the directory: the copy is durable before Put
// returns, so before the message that refers to it is appended (durable
// before acknowledged). The same content put twice is one copy, renamed
// over with the newer time. The directory is made with mode 0700.
//
// Open finds the copy by its name in this store's directory and checks its
// size and digest before handing it out; a copy changed on disk is
// refused, never sent. An attachment with no digest (stored by a parley
// before copies were kept, its path the agent's) is refused: such a path is
// never read again.
//
// # Bounds
//
// What one message may attach is the caller's to bound (max of Put: 50 MiB
// a file for agents, the platform's own limit for downloads). The store
// bounds the total of its copies, temporary files being written included,
// by Options.MaxTotal (DefaultMaxTotal, 2 GiB; files_max_mb in
// parley's configuration): a Put that would pass it stops, keeps nothing
// and returns core.ErrFileStoreFull with the setting's name.
//
// # Removal
//
// Collect, which the daemon runs with its hourly pruning, removes a copy
// when nothing holds it any more:
//
//   - no event of the delivery journal refers to it: an undelivered file
//     is kept whatever its age, as the journal's entries are;
//   - no message newer than the retention refers to it (the daemon's
//     retention, 30 days by default): an agent may read a person's file,
//     and a redelivered post finds its copy, for that long. Older messages
//     keep their attachment's name, size and digest, and the path then
//     leads nowhere;
//   - this process does not hold it: Put holds a copy until Release (the
//     message is appended), and a copy put or released while Collect runs
//     is left for the next run, so that a message appended after Collect
//     read the store never loses its copy;
//   - it was last put more than Fresh (10 minutes) ago, for a process
//     sharing the directory whose holds this one cannot see.
//
// A copy whose message was never appended (parley killed between the copy
// and the append, or the append refused) is held by nothing, and is removed
// by the first Collect once it is Fresh-old; so are temporary files a
// killed Put left. Files in the directory that are neither are left alone.
//
// # Several instances
//
// Instances sharing a PostgreSQL store each have their own data directory,
// and any of them may claim a journaled event (core/delivery's claims), or
// serve a platform the instance that took the copy does not run (its
// hand-off). Open therefore looks in this store's directory first and then
// at the attachment's Path, where the instance that took the copy wrote
// it, and accepts either only if its content has the digest: instances on
// one machine (or sharing a mount) deliver each other's files, exactly the
// bytes that were checked, as they read each other's paths before copies
// were kept. On separate machines the copy is not there: the operation is
// refused for good with an error naming the file and the machine's lack
// of it, and the person told it could not be delivered, as before. Keeping
// the bytes in the shared database instead would make every instance
// independent of the others' disks at the price of up to 500 MiB a message
// in PostgreSQL; that is not done. Collect reads references from the
// shared store, so no instance removes a copy another's journal entry or
// message still refers to.
package files
