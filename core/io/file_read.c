/* Reading a checkpoint file into memory: the default way to load, as
 * torch.load does, so that what was loaded never changes or faults when the
 * file is rewritten or truncated afterwards (a mapping would).
 *
 * What makes it fast: the records are read with pread straight into the
 * storages (no staging copy), on several threads at once (copying out of the
 * page cache is bound by one core's memory bandwidth), in pieces of a few MiB
 * so that threads share one large record too. */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tstor__io_file_open(const char *path, int *fd, uint64_t *size) {
  *fd = -1;
  /* O_NONBLOCK: opening a FIFO must not wait for a writer before it is refused */
  int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f < 0) return TSTOR__ERR(tstor_errno_code(errno), "%s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(f, &st) != 0) {
    int e = errno;
    close(f);
    return TSTOR__ERR(TSTOR_EIO, "%s: %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(f);
    return TSTOR__ERR(TSTOR_EINVAL, "%s: not a regular file", path);
  }
  int fl = fcntl(f, F_GETFL);
  if (fl >= 0) fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
  *fd = f;
  *size = (uint64_t)st.st_size;
  return 0;
}

/* pread until len bytes are in: 0, or the errno (-1 for an early end). */
static int pread_all(int fd, void *dst, size_t len, uint64_t off) {
  for (size_t done = 0; done < len;) {
    ssize_t n = pread(fd, (char *)dst + done, len - done, (off_t)(off + done));
    if (n > 0) done += (size_t)n;
    else if (n < 0 && errno == EINTR) continue;
    else return n < 0 ? errno : -1;
  }
  return 0;
}

static int read_failure(int err, const char *what) {
  return TSTOR__ERR(TSTOR_EIO, "reading '%s': %s", what,
                    err < 0 ? "the file ends early (was it changed while it was read?)" : strerror(err));
}

int tstor__io_pread_full(int fd, void *dst, size_t len, uint64_t off, const char *what) {
  int err = pread_all(fd, dst, len, off);
  return err ? read_failure(err, what) : 0;
}

/* ------------------------------------------------------------ batches */

int tstor__io_read_batch_add(tstor__io_read_batch *b, void *dst, uint64_t off, size_t len,
                             const char *what) {
  for (size_t done = 0; done < len; done += TSTOR__READ_PIECE) {
    tstor__io_read_piece *grown = tstor__io_grow(b->pieces, &b->cap, b->n, sizeof *b->pieces, 16,
                                                 "out of memory for a read list");
    if (!grown) return TSTOR_ENOMEM;
    b->pieces = grown;
    size_t n = len - done < TSTOR__READ_PIECE ? len - done : TSTOR__READ_PIECE;
    b->pieces[b->n++] = (tstor__io_read_piece){(char *)dst + done, off + done, n, what};
    b->bytes += n;
  }
  return 0;
}

void tstor__io_read_batch_free(tstor__io_read_batch *b) {
  tstor__io_free(b->pieces);
  memset(b, 0, sizeof *b);
}

typedef struct batch_run {
  const tstor__io_read_batch *b;
  int fd;
  pthread_mutex_t lock;
  size_t next;      /* the next piece to take */
  int err;          /* the first failure's errno (-1: early end), or 0 */
  size_t failed_at; /* its piece */
} batch_run;

static void *run_pieces(void *arg) {
  batch_run *r = arg;
  for (;;) {
    pthread_mutex_lock(&r->lock);
    size_t i = r->err ? r->b->n : r->next++;
    pthread_mutex_unlock(&r->lock);
    if (i >= r->b->n) return NULL;
    const tstor__io_read_piece *p = &r->b->pieces[i];
    int err = pread_all(r->fd, p->dst, p->len, p->off);
    if (err) {
      pthread_mutex_lock(&r->lock);
      if (!r->err) {
        r->err = err;
        r->failed_at = i;
      }
      pthread_mutex_unlock(&r->lock);
    }
  }
}

/* Threads beyond the caller: one per core up to the library's thread count,
 * and none for less than a few pieces' worth, which one thread reads faster
 * than others can be started. */
static int helpers_for(const tstor__io_read_batch *b) {
  int threads = tstor_get_num_threads();
  if (threads > TSTOR__READ_THREADS_MAX) threads = TSTOR__READ_THREADS_MAX;
  uint64_t by_size = b->bytes / (2 * (uint64_t)TSTOR__READ_PIECE);
  if ((uint64_t)threads > by_size) threads = (int)by_size;
  if ((size_t)threads > b->n) threads = (int)b->n;
  return threads > 1 ? threads - 1 : 0;
}

int tstor__io_read_batch_run(const tstor__io_read_batch *b, int fd) {
  batch_run r = {b, fd, PTHREAD_MUTEX_INITIALIZER, 0, 0, 0};
  pthread_t ids[TSTOR__READ_THREADS_MAX];
  int started = 0, want = helpers_for(b);
  while (started < want && pthread_create(&ids[started], NULL, run_pieces, &r) == 0) started++;
  run_pieces(&r); /* the caller reads too, and alone if no thread started */
  for (int i = 0; i < started; i++) pthread_join(ids[i], NULL);
  pthread_mutex_destroy(&r.lock);
  return r.err ? read_failure(r.err, b->pieces[r.failed_at].what) : 0;
}
