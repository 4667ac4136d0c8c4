/* Shared memory: moving a storage into it (share_memory, from several
 * threads at once), and sharing it with other processes by descriptor
 * (SCM_RIGHTS) and by name, both ways, with a peer killed mid-use; and each
 * refusal, which must leave the storage as it was and leak nothing. */
#include "maptest.h"

#include "runtime/fault.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

/* Fills a cpu storage with a pattern that depends on `seed`. */
static void pattern(tstor_storage *s, unsigned seed) {
  for (size_t i = 0; i < tstor_storage_nbytes(s); i++) bytes(s)[i] = (unsigned char)(i * 31 + seed);
}

static int has_pattern(tstor_storage *s, unsigned seed) {
  for (size_t i = 0; i < tstor_storage_nbytes(s); i++)
    if (bytes(s)[i] != (unsigned char)(i * 31 + seed)) return 0;
  return 1;
}

static tstor_storage *new_cpu(size_t nbytes, unsigned seed) {
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, nbytes, &s));
  pattern(s, seed);
  return s;
}

/* ------------------------------------------------------- share_memory */

START_TEST(share_moves_bytes) {
  held before = holding();
  tstor_storage *s = new_cpu(100000, 1);
  void *old = tstor_storage_data(s);
  ck_assert_int_eq(tstor_storage_is_shared(s), 0);
  ck_tstor_ok(tstor_storage_share_memory(s));
  ck_assert_int_eq(tstor_storage_is_shared(s), 1);
  ck_assert_ptr_ne(tstor_storage_data(s), old);
  ck_assert_uint_eq(tstor_storage_nbytes(s), 100000);
  ck_assert(has_pattern(s, 1));
  ck_assert_uint_eq(tstor_storage_flags(s), TSTOR_FLAG_SHARED);
  ck_assert_ptr_null(tstor_storage_filename(s));
  ck_assert_int_eq(tstor_storage_use_count(s), 1);
  /* One descriptor kept for export, one mapping, and no name in /dev/shm. */
  held now = holding();
  ck_assert_int_eq(now.fds, before.fds + 1);
  ck_assert_int_eq(now.maps, before.maps + 1);
  ck_assert_int_eq(now.shm, before.shm);

  ck_tstor_err(tstor_storage_resize(s, 10), TSTOR_ENOTSUP);
  ck_last_error_has("shared-memory");
  /* Again: nothing moves. */
  void *shared = tstor_storage_data(s);
  ck_tstor_ok(tstor_storage_share_memory(s));
  ck_assert_ptr_eq(tstor_storage_data(s), shared);
  /* Views made now share the shared bytes, and are shared themselves. */
  tstor_storage *v = NULL;
  ck_tstor_ok(tstor_storage_view(s, 10, 10, &v));
  ck_assert_int_eq(tstor_storage_is_shared(v), 1);
  ck_tstor_ok(tstor_storage_share_memory(v));
  tstor_storage_release(v);
  tstor_storage_release(s);
  ck_holds(before);
}
END_TEST

START_TEST(share_refusals) {
  tstor_storage *s = new_cpu(4096, 2);
  void *data = tstor_storage_data(s);
  tstor_storage *v = NULL;
  ck_tstor_ok(tstor_storage_view(s, 0, 100, &v));
  ck_fails_clean(tstor_storage_share_memory(s), TSTOR_EBUSY);
  ck_last_error_has("view");
  ck_fails_clean(tstor_storage_share_memory(v), TSTOR_ENOTSUP);
  ck_assert_ptr_eq(tstor_storage_data(s), data);
  ck_assert_uint_eq(tstor_storage_flags(s), TSTOR_FLAG_RESIZABLE);
  ck_assert(has_pattern(s, 2));
  tstor_storage_release(v);
  /* With the view gone it moves. */
  ck_tstor_ok(tstor_storage_share_memory(s));
  tstor_storage_release(s);

  tstor_storage *m = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, meta, 1 << 20, &m));
  ck_fails_clean(tstor_storage_share_memory(m), TSTOR_ENOTSUP);
  ck_assert_int_eq(tstor_storage_is_shared(m), 0);
  tstor_storage_release(m);
  ck_fails_clean(tstor_storage_share_memory(NULL), TSTOR_EINVAL);
}
END_TEST

START_TEST(share_zero_bytes) {
  held before = holding();
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 0, &s));
  ck_tstor_ok(tstor_storage_share_memory(s));
  ck_assert_int_eq(tstor_storage_is_shared(s), 1);
  ck_assert_uint_eq(tstor_storage_nbytes(s), 0);
  /* It can travel like any other. */
  int fd = -1;
  ck_tstor_ok(tstor_storage_export_fd(s, &fd));
  tstor_storage *t = NULL;
  ck_tstor_err(tstor_storage_import_fd(ctx, fd, 0, &t), TSTOR_ESIZE); /* "whole" of nothing */
  close(fd);
  tstor_storage_release(s);
  ck_holds(before);
}
END_TEST

static int deleted;
static void count_delete(void *data, void *arg) {
  (void)arg;
  free(data);
  deleted++;
}

START_TEST(share_wrapped_and_mapped) {
  /* Borrowed bytes stay the caller's, untouched. */
  unsigned char mine[256];
  for (int i = 0; i < 256; i++) mine[i] = (unsigned char)i;
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_wrap(ctx, cpu, mine, sizeof mine, &s));
  ck_tstor_ok(tstor_storage_share_memory(s));
  ck_assert_ptr_ne(tstor_storage_data(s), mine);
  ck_assert_uint_eq(tstor_storage_flags(s), TSTOR_FLAG_SHARED);
  ck_assert_mem_eq(tstor_storage_data(s), mine, sizeof mine);
  memset(tstor_storage_data(s), 0, sizeof mine);
  ck_assert_uint_eq(mine[255], 255);
  tstor_storage_release(s);

  /* Owned bytes go to their deleter once, at the move. */
  deleted = 0;
  void *owned = malloc(64);
  ck_assert_ptr_nonnull(owned);
  memset(owned, 3, 64);
  ck_tstor_ok(tstor_storage_wrap_owned(ctx, cpu, owned, 64, count_delete, NULL, &s));
  ck_tstor_ok(tstor_storage_share_memory(s));
  ck_assert_int_eq(deleted, 1);
  ck_assert_uint_eq(bytes(s)[63], 3);
  tstor_storage_release(s);
  ck_assert_int_eq(deleted, 1);

  /* A private file mapping becomes shared memory; the file is left alone. The
   * name given out before stays valid until the last release (mapped.h): it
   * was freed by the move (a use after free under ASan). */
  const char *path = scratch("private.bin");
  write_file(path, "abcdef", 6);
  ck_tstor_ok(tstor_storage_from_file(ctx, path, 0, 0, 1, &s));
  const char *was = tstor_storage_filename(s);
  ck_assert_str_eq(was, path);
  ck_tstor_ok(tstor_storage_share_memory(s));
  ck_assert_uint_eq(tstor_storage_flags(s), TSTOR_FLAG_SHARED);
  ck_assert_ptr_null(tstor_storage_filename(s));
  ck_assert_str_eq(was, path);
  memset(bytes(s), 'z', 6);
  tstor_storage_release(s);
  char buf[8];
  ck_assert_uint_eq(read_file(path, buf, sizeof buf), 6);
  ck_assert_mem_eq(buf, "abcdef", 6);

  /* A shared file mapping is shared already. */
  ck_tstor_ok(tstor_storage_from_file(ctx, path, TSTOR_FILE_SHARED, 0, 1, &s));
  void *data = tstor_storage_data(s);
  ck_tstor_ok(tstor_storage_share_memory(s));
  ck_assert_ptr_eq(tstor_storage_data(s), data);
  ck_assert_str_eq(tstor_storage_filename(s), path);
  tstor_storage_release(s);
}
END_TEST

#define THREADS 8

typedef struct racer {
  tstor_storage *s;
  pthread_barrier_t *go;
  int rc;
  void *data;
} racer;

static void *race(void *arg) {
  racer *r = arg;
  pthread_barrier_wait(r->go);
  r->rc = tstor_storage_share_memory(r->s);
  r->data = tstor_storage_data(r->s);
  return NULL;
}

/* Many threads, one storage: one move, and every thread sees its result. */
START_TEST(share_from_threads) {
  held before = holding();
  for (int round = 0; round < 20; round++) {
    tstor_storage *s = new_cpu(1 << 16, (unsigned)round);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, THREADS);
    racer r[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
      r[i] = (racer){s, &go, -1, NULL};
      ck_assert_int_eq(pthread_create(&t[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&go);
    for (int i = 0; i < THREADS; i++) {
      ck_assert_int_eq(r[i].rc, 0);
      ck_assert_ptr_eq(r[i].data, tstor_storage_data(s));
    }
    ck_assert(has_pattern(s, (unsigned)round));
    held now = holding();
    ck_assert_int_eq(now.fds, before.fds + 1); /* one object, not several */
    ck_assert_int_eq(now.maps, before.maps + 1);
    tstor_storage_release(s);
    ck_holds(before);
  }
}
END_TEST

/* share_memory against tstor_storage_view of the same storage: a view either
 * came first (the move is refused with TSTOR_EBUSY) or shares the moved
 * bytes. A view that kept the old pointer, which the move freed, shows as a
 * data pointer other than base + offset here, as a use after free under ASan
 * (the bytes come from malloc) and as a data race under TSan. */
typedef struct view_racer {
  tstor_storage *s;
  pthread_barrier_t *go;
  int rc;
  tstor_storage *view;
} view_racer;

static void *share_racer(void *arg) {
  view_racer *r = arg;
  pthread_barrier_wait(r->go);
  r->rc = tstor_storage_share_memory(r->s);
  return NULL;
}

static void *view_maker(void *arg) {
  view_racer *r = arg;
  pthread_barrier_wait(r->go);
  r->rc = tstor_storage_view(r->s, 64, 64, &r->view);
  if (r->rc == 0) memset(tstor_storage_data(r->view), 0x77, 64); /* the bytes must be live */
  return NULL;
}

#define VIEWERS 3

START_TEST(share_against_views) {
  held before = holding();
  int moved = 0, refused = 0;
  for (int round = 0; round < 300; round++) {
    void *bytes_in = malloc(4096);
    ck_assert_ptr_nonnull(bytes_in);
    memset(bytes_in, 1, 4096);
    tstor_storage *s = NULL;
    ck_tstor_ok(tstor_storage_wrap_owned(ctx, cpu, bytes_in, 4096, count_delete, NULL, &s));
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, VIEWERS + 1);
    view_racer r[VIEWERS + 1];
    pthread_t t[VIEWERS + 1];
    for (int i = 0; i <= VIEWERS; i++) {
      r[i] = (view_racer){s, &go, -1, NULL};
      ck_assert_int_eq(pthread_create(&t[i], NULL, i == 0 ? share_racer : view_maker, &r[i]), 0);
    }
    for (int i = 0; i <= VIEWERS; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&go);
    ck_assert_msg(r[0].rc == 0 || r[0].rc == TSTOR_EBUSY, "share_memory: %s",
                  tstor_err_name(r[0].rc));
    if (r[0].rc == 0) moved++;
    else refused++;
    for (int i = 1; i <= VIEWERS; i++) {
      ck_tstor_ok(r[i].rc);
      ck_assert_ptr_eq(tstor_storage_data(r[i].view), bytes(s) + 64);
      ck_assert_int_eq(tstor_storage_is_shared(r[i].view), tstor_storage_is_shared(s));
    }
    for (int i = 0; i < 4096; i++)
      ck_assert_uint_eq(bytes(s)[i], i >= 64 && i < 128 ? 0x77 : 1);
    for (int i = 1; i <= VIEWERS; i++) tstor_storage_release(r[i].view);
    tstor_storage_release(s);
  }
  ck_holds(before);
  ck_assert_int_eq(moved + refused, 300);
}
END_TEST

/* ------------------------------------------- by descriptor, in process */

START_TEST(export_import_fd) {
  held before = holding();
  tstor_storage *s = new_cpu(5000, 4);
  ck_tstor_ok(tstor_storage_share_memory(s));
  int fd = -1;
  ck_tstor_ok(tstor_storage_export_fd(s, &fd));
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  tstor_storage *t = NULL, *u = NULL;
  ck_tstor_ok(tstor_storage_import_fd(ctx, fd, 0, &t));
  ck_tstor_ok(tstor_storage_import_fd(ctx, fd, 100, &u));
  close(fd); /* the imports keep their own */
  ck_assert_uint_eq(tstor_storage_nbytes(t), 5000);
  ck_assert_uint_eq(tstor_storage_nbytes(u), 100);
  ck_assert_uint_eq(tstor_storage_flags(t), TSTOR_FLAG_SHARED);
  ck_assert(has_pattern(t, 4));
  bytes(t)[7] = 0xee;
  ck_assert_uint_eq(bytes(s)[7], 0xee);
  ck_assert_uint_eq(bytes(u)[7], 0xee);
  tstor_storage_release(s); /* the importers keep the bytes alive */
  bytes(u)[8] = 0xdd;
  ck_assert_uint_eq(bytes(t)[8], 0xdd);
  tstor_storage_release(t);
  tstor_storage_release(u);
  ck_holds(before);
}
END_TEST

START_TEST(export_import_refusals) {
  tstor_storage *s = new_cpu(64, 5), *t = NULL;
  int fd = -1;
  ck_fails_clean(tstor_storage_export_fd(s, &fd), TSTOR_EINVAL);
  ck_last_error_has("not shared");
  ck_fails_clean(tstor_storage_export_fd(NULL, &fd), TSTOR_EINVAL);
  ck_fails_clean(tstor_storage_export_fd(s, NULL), TSTOR_EINVAL);
  ck_tstor_ok(tstor_storage_share_memory(s));
  tstor_storage *v = NULL;
  ck_tstor_ok(tstor_storage_view(s, 0, 8, &v));
  ck_fails_clean(tstor_storage_export_fd(v, &fd), TSTOR_EINVAL);
  ck_last_error_has("view");
  tstor_storage_release(v);
  ck_assert_int_eq(fd, -1);

  ck_fails_clean(tstor_storage_import_fd(ctx, -1, 0, &t), TSTOR_EINVAL);
  ck_fails_clean(tstor_storage_import_fd(ctx, 1000000, 0, &t), TSTOR_EINVAL); /* not open */
  ck_tstor_ok(tstor_storage_export_fd(s, &fd));
  ck_fails_clean(tstor_storage_import_fd(ctx, fd, 65, &t), TSTOR_ESIZE);
  ck_last_error_has("never grows");
  ck_fails_clean(tstor_storage_import_fd(ctx, fd, 0, NULL), TSTOR_EINVAL);
  close(fd);
  /* A pipe is no memory; a read-only descriptor cannot be mapped shared. */
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  ck_fails_clean(tstor_storage_import_fd(ctx, p[0], 0, &t), TSTOR_EINVAL);
  ck_last_error_has("FIFO");
  close(p[0]);
  close(p[1]);
  const char *path = scratch("ro.bin");
  write_file(path, "0123456789", 10);
  int ro = open(path, O_RDONLY);
  ck_assert_int_ge(ro, 0);
  ck_fails_clean(tstor_storage_import_fd(ctx, ro, 0, &t), TSTOR_EACCES);
  ck_last_error_has("not open for writing");
  close(ro);
  ck_assert_ptr_null(t);
  tstor_storage_release(s);
}
END_TEST

/* ------------------------------------------ by descriptor, over sockets */

/* Child side of a test: runs and exits, never returns into Check. */
#define CHILD_CHECK(cond, code) \
  do {                          \
    if (!(cond)) _exit(code);   \
  } while (0)

static int wait_child(pid_t pid) {
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status), "child died of signal %d",
                WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return WEXITSTATUS(status);
}

static char token(int sock) {
  char c = 0;
  return read(sock, &c, 1) == 1 ? c : 0;
}

/* The parent shares, the child writes and the parent reads; then the child
 * shares one of its own, the parent writes and the child reads. */
START_TEST(fork_over_socket) {
  held before = holding();
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  tstor_storage *s = new_cpu(1 << 20, 0);
  memset(bytes(s), 0, 1 << 20);
  ck_tstor_ok(tstor_storage_share_memory(s));
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    close(sv[0]);
    tstor_storage *got = NULL;
    CHILD_CHECK(tstor_storage_recv(ctx, sv[1], &got) == 0, 10);
    CHILD_CHECK(tstor_storage_nbytes(got) == 1 << 20, 11);
    CHILD_CHECK(tstor_storage_is_shared(got), 12);
    pattern(got, 42);
    tstor_storage_release(got);
    CHILD_CHECK(write(sv[1], "w", 1) == 1, 13);
    /* And back: a storage of the child's, written by the parent. */
    tstor_storage *mine = NULL;
    CHILD_CHECK(tstor_storage_new(ctx, cpu, 4096, &mine) == 0, 14);
    memset(bytes(mine), 0, 4096);
    CHILD_CHECK(tstor_storage_share_memory(mine) == 0, 15);
    CHILD_CHECK(tstor_storage_send(mine, sv[1]) == 0, 16);
    CHILD_CHECK(token(sv[1]) == 'w', 17);
    CHILD_CHECK(has_pattern(mine, 7), 18);
    tstor_storage_release(mine);
    tstor_storage_release(s); /* the parent's, inherited */
    _exit(0);
  }
  close(sv[1]);
  ck_tstor_ok(tstor_storage_send(s, sv[0]));
  ck_assert_int_eq(token(sv[0]), 'w');
  ck_assert(has_pattern(s, 42));
  tstor_storage *theirs = NULL;
  ck_tstor_ok(tstor_storage_recv(ctx, sv[0], &theirs));
  ck_assert_uint_eq(tstor_storage_nbytes(theirs), 4096);
  pattern(theirs, 7);
  ck_assert_int_eq(write(sv[0], "w", 1), 1);
  ck_assert_int_eq(wait_child(pid), 0);
  tstor_storage_release(theirs);
  tstor_storage_release(s);
  close(sv[0]);
  ck_holds(before);
  ck_assert_int_eq(count_shm(pid), 0);
}
END_TEST

/* The child imports, writes, says so and is killed while it still maps the
 * bytes: the parent's storage is intact and nothing is left in /dev/shm. */
START_TEST(peer_killed_mid_use) {
  held before = holding();
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  tstor_storage *s = new_cpu(65536, 0);
  ck_tstor_ok(tstor_storage_share_memory(s));
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    close(sv[0]);
    tstor_storage *got = NULL;
    CHILD_CHECK(tstor_storage_recv(ctx, sv[1], &got) == 0, 10);
    /* And one of its own, so that it dies holding shared memory it made. */
    tstor_storage *mine = NULL;
    CHILD_CHECK(tstor_storage_new(ctx, cpu, 4096, &mine) == 0, 11);
    CHILD_CHECK(tstor_storage_share_memory(mine) == 0, 12);
    pattern(got, 9);
    CHILD_CHECK(write(sv[1], "w", 1) == 1, 13);
    for (;;) pause();
  }
  close(sv[1]);
  ck_tstor_ok(tstor_storage_send(s, sv[0]));
  ck_assert_int_eq(token(sv[0]), 'w');
  ck_assert_int_eq(kill(pid, SIGKILL), 0);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ck_assert(has_pattern(s, 9));
  ck_assert_int_eq(count_shm(pid), 0);
  /* The dead peer's end reads as closed. */
  tstor_storage *none = NULL;
  ck_fails_clean(tstor_storage_recv(ctx, sv[0], &none), TSTOR_EIO);
  ck_last_error_has("closed");
  ck_fails_clean(tstor_storage_send(s, sv[0]), TSTOR_EIO); /* and no SIGPIPE */
  close(sv[0]);
  tstor_storage_release(s);
  ck_holds(before);
}
END_TEST

static void send_raw(int sock, const void *data, size_t len, const int *fds, int nfds) {
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(4 * sizeof(int))];
  } control;
  memset(&control, 0, sizeof control);
  struct iovec iov = {(void *)data, len};
  struct msghdr msg;
  memset(&msg, 0, sizeof msg);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (nfds > 0) {
    msg.msg_control = control.buf;
    msg.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
    memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
  }
  ck_assert_int_eq(sendmsg(sock, &msg, 0), (ssize_t)len);
}

/* recv must close whatever it was handed when the message is not one of
 * ours, and say what was wrong. */
START_TEST(recv_refusals) {
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
  tstor_storage *s = new_cpu(64, 1), *t = NULL;
  ck_tstor_ok(tstor_storage_share_memory(s));
  int fd = -1;
  ck_tstor_ok(tstor_storage_export_fd(s, &fd));

  /* Data without a descriptor, a descriptor with a foreign header, two
   * descriptors, a short message. */
  unsigned char good[16] = {'T', 'S', 'T', 'R', 1, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0};
  send_raw(sv[0], good, sizeof good, NULL, 0);
  ck_fails_clean(tstor_storage_recv(ctx, sv[1], &t), TSTOR_EIO);
  ck_last_error_has("0 descriptors");
  send_raw(sv[0], "GARBAGE-GARBAGE!", 16, &fd, 1);
  ck_fails_clean(tstor_storage_recv(ctx, sv[1], &t), TSTOR_EIO);
  ck_last_error_has("not a tstor storage message");
  int two[2] = {fd, fd};
  send_raw(sv[0], good, sizeof good, two, 2);
  ck_fails_clean(tstor_storage_recv(ctx, sv[1], &t), TSTOR_EIO);
  ck_last_error_has("2 descriptors");
  send_raw(sv[0], good, 8, &fd, 1);
  ck_fails_clean(tstor_storage_recv(ctx, sv[1], &t), TSTOR_EIO);
  /* A size beyond the object. */
  good[9] = 1; /* 64 + 256 */
  send_raw(sv[0], good, sizeof good, &fd, 1);
  ck_fails_clean(tstor_storage_recv(ctx, sv[1], &t), TSTOR_ESIZE);
  good[9] = 0;

  /* Out of descriptors: the kernel drops the one sent, and we say so. */
  send_raw(sv[0], good, sizeof good, &fd, 1);
  held before = holding();
  struct rlimit old = exhaust_nofile();
  int rc = tstor_storage_recv(ctx, sv[1], &t);
  restore_nofile(old);
  ck_assert_int_eq(rc, TSTOR_EMFILE);
  ck_last_error_has("descriptor");
  ck_holds(before);

  /* Not a socket; a closed peer; bad arguments. */
  ck_fails_clean(tstor_storage_recv(ctx, fd, &t), TSTOR_EINVAL);
  ck_fails_clean(tstor_storage_recv(ctx, sv[1], NULL), TSTOR_EINVAL);
  ck_fails_clean(tstor_storage_send(NULL, sv[0]), TSTOR_EINVAL);
  close(sv[0]);
  ck_fails_clean(tstor_storage_recv(ctx, sv[1], &t), TSTOR_EIO);
  ck_fails_clean(tstor_storage_send(s, sv[1]), TSTOR_EIO);
  tstor_storage *plain = new_cpu(8, 0);
  ck_fails_clean(tstor_storage_send(plain, sv[1]), TSTOR_EINVAL);
  tstor_storage_release(plain);
  close(sv[1]);
  close(fd);
  ck_assert_ptr_null(t);
  tstor_storage_release(s);
}
END_TEST

/* ------------------------------------------------------------- by name */

START_TEST(export_import_name) {
  held before = holding();
  tstor_storage *s = new_cpu(10000, 3);
  char name[TSTOR_SHM_NAME_MAX];
  ck_tstor_ok(tstor_storage_export_name(s, name, sizeof name));
  ck_assert(has_pattern(s, 3));
  ck_assert_int_eq(tstor_storage_is_shared(s), 1);
  ck_assert_str_eq(tstor_storage_filename(s), name);
  ck_assert_int_eq(count_shm(getpid()), before.shm + 1);
  struct stat st;
  ck_assert_int_eq(stat(coretest_fmt("/dev/shm%s", name), &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0600);
  /* Exporting again gives the same name. */
  char again[TSTOR_SHM_NAME_MAX];
  ck_tstor_ok(tstor_storage_export_name(s, again, sizeof again));
  ck_assert_str_eq(again, name);

  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    tstor_storage *t = NULL;
    CHILD_CHECK(tstor_storage_import_name(ctx, name, 0, &t) == 0, 10);
    CHILD_CHECK(tstor_storage_nbytes(t) == 10000, 11);
    CHILD_CHECK(has_pattern(t, 3), 12);
    CHILD_CHECK(strcmp(tstor_storage_filename(t), name) == 0, 13);
    pattern(t, 77);
    tstor_storage_release(t);
    /* The child's copy of the exporter is not the exporter: its release
     * must not unlink the name. */
    tstor_storage_release(s);
    _exit(0);
  }
  ck_assert_int_eq(wait_child(pid), 0);
  ck_assert(has_pattern(s, 77));
  ck_assert_int_eq(count_shm(getpid()), before.shm + 1);

  /* An importer re-exports the same name. */
  tstor_storage *t = NULL;
  ck_tstor_ok(tstor_storage_import_name(ctx, name, 100, &t));
  ck_assert_uint_eq(tstor_storage_nbytes(t), 100);
  ck_tstor_ok(tstor_storage_export_name(t, again, sizeof again));
  ck_assert_str_eq(again, name);
  /* The exporter's release ends the name; imports keep their bytes. */
  tstor_storage_release(s);
  ck_assert_int_eq(count_shm(getpid()), before.shm);
  ck_assert_uint_eq(bytes(t)[99], (unsigned char)(99 * 31 + 77));
  tstor_storage *late = NULL;
  ck_fails_clean(tstor_storage_import_name(ctx, name, 0, &late), TSTOR_ENOENT);
  tstor_storage_release(t);
  ck_holds(before);
}
END_TEST

/* export_name of a private file mapping moves it into named shared memory:
 * tstor_storage_filename answers the new name, and the file's name given out
 * before stays valid until the last release, for the storage and its views. */
START_TEST(filename_outlives_export_name) {
  const char *path = scratch("named.bin");
  write_file(path, "0123456789", 10);
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_from_file(ctx, path, 0, 0, 1, &s));
  const char *was = tstor_storage_filename(s);
  ck_assert_str_eq(was, path);
  char name[TSTOR_SHM_NAME_MAX];
  ck_tstor_ok(tstor_storage_export_name(s, name, sizeof name));
  ck_assert_str_eq(tstor_storage_filename(s), name);
  ck_assert_str_eq(was, path);
  tstor_storage *v = NULL;
  ck_tstor_ok(tstor_storage_view(s, 2, 4, &v));
  ck_assert_str_eq(tstor_storage_filename(v), name);
  ck_assert_mem_eq(tstor_storage_data(v), "2345", 4);
  tstor_storage_release(s);
  ck_assert_str_eq(was, path); /* the view still holds the storage */
  tstor_storage_release(v);
}
END_TEST

START_TEST(export_name_refusals) {
  tstor_storage *s = new_cpu(64, 8), *t = NULL;
  void *data = tstor_storage_data(s);
  char small[8];
  ck_fails_clean(tstor_storage_export_name(s, small, sizeof small), TSTOR_ERANGE);
  ck_assert_ptr_eq(tstor_storage_data(s), data);
  ck_assert_int_eq(tstor_storage_is_shared(s), 0);
  char name[TSTOR_SHM_NAME_MAX];
  ck_fails_clean(tstor_storage_export_name(NULL, name, sizeof name), TSTOR_EINVAL);
  ck_fails_clean(tstor_storage_export_name(s, NULL, sizeof name), TSTOR_EINVAL);
  tstor_storage *v = NULL;
  ck_tstor_ok(tstor_storage_view(s, 0, 8, &v));
  ck_fails_clean(tstor_storage_export_name(v, name, sizeof name), TSTOR_EINVAL);
  ck_fails_clean(tstor_storage_export_name(s, name, sizeof name), TSTOR_EBUSY);
  tstor_storage_release(v);
  /* Shared by descriptor: it has no name to give. */
  ck_tstor_ok(tstor_storage_share_memory(s));
  ck_fails_clean(tstor_storage_export_name(s, name, sizeof name), TSTOR_EINVAL);
  ck_last_error_has("descriptor");
  tstor_storage_release(s);

  ck_fails_clean(tstor_storage_import_name(ctx, NULL, 0, &t), TSTOR_EINVAL);
  ck_fails_clean(tstor_storage_import_name(ctx, "", 0, &t), TSTOR_EINVAL);
  ck_fails_clean(tstor_storage_import_name(ctx, shm_name("gone"), 0, &t), TSTOR_ENOENT);
  ck_assert_ptr_null(t);
}
END_TEST

/* The cleanup rule: an exporter killed before it released leaves its name;
 * the sweep removes it (and only it), and the importer keeps its bytes. */
START_TEST(exporter_killed_then_swept) {
  held before = holding();
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    close(sv[0]);
    tstor_storage *s = NULL;
    char name[TSTOR_SHM_NAME_MAX] = "";
    CHILD_CHECK(tstor_storage_new(ctx, cpu, 8192, &s) == 0, 10);
    pattern(s, 5);
    CHILD_CHECK(tstor_storage_export_name(s, name, sizeof name) == 0, 11);
    CHILD_CHECK(write(sv[1], name, sizeof name) == (ssize_t)sizeof name, 12);
    for (;;) pause();
  }
  close(sv[1]);
  char name[TSTOR_SHM_NAME_MAX];
  ck_assert_int_eq(read(sv[0], name, sizeof name), (ssize_t)sizeof name);
  close(sv[0]);
  tstor_storage *t = NULL;
  ck_tstor_ok(tstor_storage_import_name(ctx, name, 0, &t));
  ck_assert(has_pattern(t, 5));

  /* A live exporter's name is never swept. */
  tstor_storage *live = new_cpu(64, 0);
  char live_name[TSTOR_SHM_NAME_MAX];
  ck_tstor_ok(tstor_storage_export_name(live, live_name, sizeof live_name));

  ck_assert_int_eq(kill(pid, SIGKILL), 0);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_int_eq(count_shm(pid), 1); /* left behind, as documented */
  int removed = -1;
  ck_tstor_ok(tstor_shm_sweep(ctx, &removed));
  ck_assert_int_ge(removed, 1);
  ck_assert_int_eq(count_shm(pid), 0);
  ck_assert_int_eq(count_shm(getpid()), before.shm + 1);
  ck_tstor_ok(tstor_shm_sweep(ctx, NULL));
  ck_assert_int_eq(count_shm(getpid()), before.shm + 1);

  ck_assert(has_pattern(t, 5));
  pattern(t, 6);
  tstor_storage_release(t);
  tstor_storage_release(live);
  ck_holds(before);
}
END_TEST

/* Every acquisition of share_memory and export_name failed in turn: each
 * failure leaves the storage as it was and holds nothing. */
START_TEST(fault_sweep) {
  const unsigned kinds = TSTOR_FAULT_MALLOC | TSTOR_FAULT_MMAP | TSTOR_FAULT_SHM;
  for (int named = 0; named <= 1; named++) {
    tstor_storage *s = new_cpu(3000, 11);
    void *data = tstor_storage_data(s);
    int failures = 0;
    for (unsigned long n = 1; n < 100; n++) {
      held before = holding();
      char name[TSTOR_SHM_NAME_MAX];
      tstor__fault_arm(kinds, n, 0);
      int rc =
          named ? tstor_storage_export_name(s, name, sizeof name) : tstor_storage_share_memory(s);
      unsigned long failed = tstor__fault_failed();
      tstor__fault_disarm();
      if (rc == 0) {
        ck_assert_uint_eq(failed, 0);
        break;
      }
      failures++;
      ck_assert_uint_eq(failed, 1);
      ck_assert_msg(rc == TSTOR_ENOMEM || rc == TSTOR_EMFILE, "run %lu: %s: %s", n,
                    tstor_err_name(rc), tstor_last_error());
      ck_assert(tstor_last_error()[0]);
      ck_holds(before);
      ck_assert_ptr_eq(tstor_storage_data(s), data);
      ck_assert_uint_eq(tstor_storage_flags(s), TSTOR_FLAG_RESIZABLE);
      ck_assert(has_pattern(s, 11));
    }
    ck_assert_int_ge(failures, 2);
    ck_assert_int_eq(tstor_storage_is_shared(s), 1);
    ck_assert(has_pattern(s, 11));
    tstor_storage_release(s);
  }
}
END_TEST

static Suite *suite(void) {
  Suite *su = suite_create("shm");
  TCase *tc = tcase_create("share_memory");
  tcase_set_timeout(tc, 60); /* the thread races, on a loaded machine or a sanitizer */
  tcase_add_checked_fixture(tc, open_ctx, close_ctx);
  tcase_add_test(tc, share_moves_bytes);
  tcase_add_test(tc, share_refusals);
  tcase_add_test(tc, share_zero_bytes);
  tcase_add_test(tc, share_wrapped_and_mapped);
  tcase_add_test(tc, share_from_threads);
  tcase_add_test(tc, share_against_views);
  tcase_add_test(tc, fault_sweep);
  suite_add_tcase(su, tc);

  tc = tcase_create("by descriptor");
  tcase_add_checked_fixture(tc, open_ctx, close_ctx);
  tcase_add_test(tc, export_import_fd);
  tcase_add_test(tc, export_import_refusals);
  tcase_add_test(tc, fork_over_socket);
  tcase_add_test(tc, peer_killed_mid_use);
  tcase_add_test(tc, recv_refusals);
  suite_add_tcase(su, tc);

  tc = tcase_create("by name");
  tcase_add_checked_fixture(tc, open_ctx, close_ctx);
  tcase_add_test(tc, export_import_name);
  tcase_add_test(tc, export_name_refusals);
  tcase_add_test(tc, filename_outlives_export_name);
  tcase_add_test(tc, exporter_killed_then_swept);
  suite_add_tcase(su, tc);
  return su;
}

int main(void) { return tstor_test_run(suite()); }
