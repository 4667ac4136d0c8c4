/* tstor/mapped.h: storages backed by files and by shared memory, and sharing
 * them with other processes.
 *
 * Torch7's torch.TYPEStorage(filename [, shared [, size [, sharedMem]]]) and
 * PyTorch's UntypedStorage.from_file, share_memory_, is_shared and filename,
 * for cpu storages. The cpu backend does the mapping; a device type without
 * the mapping ops (backend.h) gets TSTOR_ENOTSUP.
 *
 * What every storage here shares:
 *   - It cannot be resized (TSTOR_ENOTSUP): its bytes are a mapping.
 *   - Its bytes do not count in the cpu allocator's statistics: they are page
 *     cache or shared memory, not heap.
 *   - A shared one (tstor_storage_is_shared) keeps one file descriptor open
 *     until its last release, so that it can be exported; a process that
 *     holds very many of them needs a matching RLIMIT_NOFILE (PyTorch's
 *     file_descriptor strategy has the same cost).
 *
 * Truncation and SIGBUS. A mapping covers bytes of a file. If any process
 * makes the file shorter than the mapping (ftruncate, or a writer that
 * rewrites it with O_TRUNC) while the storage lives, touching the bytes past
 * the new end raises SIGBUS in every process that maps them: the kernel's
 * rule for mappings, which no library can turn into an error code. So do not
 * truncate a file while a storage maps it; replace it with rename() instead,
 * which leaves the mapped bytes alone. tstor itself never shrinks what it maps,
 * reserves the space it adds (posix_fallocate: a full disk or /dev/shm is
 * TSTOR_ENOSPC at creation, never a SIGBUS at a later write), and the shared
 * memory of tstor_storage_share_memory has no name anybody could open to
 * truncate it: only the processes it is exported to hold it.
 */
#ifndef TSTOR_MAPPED_H
#define TSTOR_MAPPED_H

#include <tstor/tstor.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- files */

enum {
  /* Map shared: writes reach the file and every other process that maps it.
   * The file is created (mode 0600) when missing and grown to the size asked,
   * with the space reserved. Without it the mapping is private: writes stay in
   * this storage (copy-on-write) and the file must already hold the size. */
  TSTOR_FILE_SHARED = 1 << 0,
  /* The name is a POSIX shared-memory object ("/name", shm_open), not a path
   * (Torch7's sharedMem). Such an object outlives every storage until
   * somebody calls shm_unlink(name); one that another user owns, or that is
   * open to other users (mode beyond 0600), is refused with TSTOR_EACCES. */
  TSTOR_FILE_SHM = 1 << 1
};

/* A cpu storage of `size` elements of `elem_size` bytes each (1 for bytes;
 * tstor_dtype_size() for a dtype), mapped from the file `filename`, as
 * Torch7's TYPEStorage(filename, shared, size, sharedMem). size 0 maps the
 * whole file, which must then be non-empty and hold a whole number of
 * elements (TSTOR_ESIZE). Flags are TSTOR_FILE_*.
 *
 * *out is a new reference with TSTOR_FLAG_MAPPED (and TSTOR_FLAG_SHARED for a
 * shared mapping); tstor_storage_filename gives `filename` back (copied: the
 * caller keeps its string). The file descriptor is closed before returning
 * for a private mapping, kept for a shared one. On failure *out is NULL
 * and nothing is left open, mapped, created or grown. Errors: TSTOR_ENOENT
 * (missing file, or missing file and no size to create it with), TSTOR_EINVAL
 * (a directory, FIFO, device; bad flags), TSTOR_EACCES, TSTOR_ESIZE (empty
 * without a size; a private mapping larger than the file), TSTOR_EOVERFLOW
 * (size * elem_size overflows or exceeds what can be mapped), TSTOR_EMFILE,
 * TSTOR_ENOSPC (no room to grow it), TSTOR_ENOMEM. */
TSTOR_EXTERN int tstor_storage_from_file(tstor_context *ctx, const char *filename, unsigned flags,
                                         size_t size, size_t elem_size, tstor_storage **out);

/* The file or shared-memory name the storage maps (a view answers for its
 * base); NULL when it maps none, which includes tstor_storage_share_memory
 * without a name. Owned by the storage, valid until its last release, even
 * after share_memory or export_name has moved the bytes and the answer has
 * changed (the earlier string is kept until then). */
TSTOR_EXTERN const char *tstor_storage_filename(const tstor_storage *s);

/* --------------------------------------------------------- shared memory */

/* Moves the bytes of cpu storage s into new POSIX shared memory, in place: s
 * keeps its size and contents, its data pointer changes, and it becomes
 * shared (TSTOR_FLAG_SHARED) and no longer resizable, pinned or borrowed.
 * Its old bytes are freed the way its last release would have freed them (a
 * borrowed buffer stays the caller's, untouched). A no-op returning 0 when s
 * is already shared, and for a view of a shared base.
 *
 * As PyTorch does: the object is created with O_CREAT|O_EXCL and mode 0600
 * under an unguessable name (a taken name is never used, we draw another),
 * its space is reserved with posix_fallocate (a full /dev/shm is TSTOR_ENOSPC
 * now, never a SIGBUS later), and its name is unlinked as soon as it is open,
 * so that nothing is left in /dev/shm whatever happens to the process; it is
 * shared by exporting its descriptor (below).
 *
 * Thread-safe: several threads may call it on the same storage at once; one
 * moves the bytes and the others wait for it and return 0. A view of s made
 * at the same time (tstor_storage_view) is ordered with the move: it is made
 * first, and this call fails with TSTOR_EBUSY, or after, and shares the new
 * bytes; never the freed ones. Other threads must not be using the bytes
 * themselves meanwhile (they move). Errors:
 * TSTOR_EBUSY when views of s exist (they point at the old bytes), TSTOR_ENOTSUP
 * for a view of an unshared base or a device without the mapping ops, and the
 * system's refusals (TSTOR_EMFILE, TSTOR_ENOSPC, TSTOR_ENOMEM, TSTOR_EEXIST
 * when fresh names keep turning out taken); then s is unchanged. */
TSTOR_EXTERN int tstor_storage_share_memory(tstor_storage *s);

/* 1 when other processes can see s's bytes (shared memory, a shared file
 * mapping, an import), else 0. For NULL, 0. */
TSTOR_EXTERN int tstor_storage_is_shared(const tstor_storage *s);

/* ------------------------------------------ sharing: by file descriptor */

/* PyTorch's file_descriptor strategy: the bytes travel as a descriptor, and
 * nothing has a name, so nothing can leak.
 *
 * tstor_storage_send writes one message on the connected Unix socket `sock`:
 * s's size and a duplicate of its descriptor (SCM_RIGHTS). s must be shared
 * and not a view (TSTOR_EINVAL; share_memory it first). s stays the caller's.
 * A closed peer is TSTOR_EIO (and no SIGPIPE).
 *
 * tstor_storage_recv reads one such message from `sock` and maps it: *out is a
 * new reference, shared, seeing the same bytes as the sender's storage.
 * Errors: TSTOR_EIO (peer closed, or a message that is not one of ours: any
 * descriptor in it is closed), TSTOR_EMFILE (this process is out of
 * descriptors, so the kernel dropped the one sent). Blocking sockets block. */
TSTOR_EXTERN int tstor_storage_send(tstor_storage *s, int sock);
TSTOR_EXTERN int tstor_storage_recv(tstor_context *ctx, int sock, tstor_storage **out);

/* The same, by hand: *fd receives a new close-on-exec descriptor for the
 * shared object under s (not a view), which the caller closes; TSTOR_EINVAL
 * when s is not shared. tstor_storage_import_fd maps `nbytes` of descriptor
 * `fd` (0: its whole size) shared; the caller keeps `fd` and closes it when
 * it likes. *out is a new reference; the import never grows the object
 * (TSTOR_ESIZE when nbytes exceeds it). */
TSTOR_EXTERN int tstor_storage_export_fd(tstor_storage *s, int *fd);
TSTOR_EXTERN int tstor_storage_import_fd(tstor_context *ctx, int fd, size_t nbytes,
                                         tstor_storage **out);

/* ---------------------------------------------------- sharing: by name */

/* PyTorch's file_system strategy: the bytes travel as a name in /dev/shm, for
 * processes that cannot pass descriptors (not related, no socket between them).
 *
 * The cleanup rule. The name lives exactly as long as the exporting storage:
 * any number of processes may import it meanwhile, and each import keeps its
 * bytes after the name is gone. The exporter's last release unlinks the name
 * (a fork child's copy of the storage does not). If the exporting process dies
 * without releasing it (SIGKILL, a crash), the name stays behind and
 * tstor_shm_sweep removes it: every tstor_storage_export_name sweeps first,
 * and a supervisor may sweep whenever it likes. Names carry the exporter's
 * process id, so only the leftovers of dead processes of the same user are
 * swept (inside one pid namespace: processes sharing /dev/shm across pid
 * namespaces must not use this strategy).
 *
 * tstor_storage_export_name writes s's name into name[size] (at most
 * TSTOR_SHM_NAME_MAX bytes with its NUL; TSTOR_ERANGE before anything happens
 * when it does not fit). An unshared s is first moved into named shared memory
 * as tstor_storage_share_memory does (same rules, errors and thread-safety,
 * save that the name stays). A storage shared by descriptor has no name to
 * give: TSTOR_EINVAL. A storage mapped from a TSTOR_FILE_SHM name, or
 * imported by name, gives that name.
 *
 * tstor_storage_import_name maps `nbytes` (0: all) of the shared-memory object
 * `name`, shared; *out is a new reference whose tstor_storage_filename is
 * name. TSTOR_ENOENT when the name is gone; TSTOR_EACCES when another user
 * owns it or it is open to other users.
 *
 * tstor_shm_sweep unlinks the names left by dead exporters; *removed (may be
 * NULL) counts them. */
#define TSTOR_SHM_NAME_MAX 64
TSTOR_EXTERN int tstor_storage_export_name(tstor_storage *s, char *name, size_t size);
TSTOR_EXTERN int tstor_storage_import_name(tstor_context *ctx, const char *name, size_t nbytes,
                                           tstor_storage **out);
TSTOR_EXTERN int tstor_shm_sweep(tstor_context *ctx, int *removed);

#ifdef __cplusplus
}
#endif

#endif /* TSTOR_MAPPED_H */
