/* The hpu-stub backend: its config keys, its memory that the host cannot
 * touch, its arena, streams, events and fault injection. The generic checks
 * every backend must pass are the conformance suite's (conformance.sh); these
 * are the ones particular to this backend. */
#include "testutil.h"

#include <signal.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

/* A context of cpu + hpu-stub with `keys` in the hpu section, or NULL and the
 * error in *rc. */
static tstor_context *open_hpu_rc(int *rc, const char *keys) {
  char ini[2048];
  snprintf(ini, sizeof ini,
           "[tstor]\n"
           "default_device = cpu\n"
           "[backend cpu]\n"
           "library = tstor-cpu.so\n"
           "[backend hpu]\n"
           "library = tstor-hpu-stub.so\n"
           "optional = yes\n"
           "%s\n",
           keys ? keys : "");
  tstor_context *ctx = NULL;
  *rc = tstor_context_open_string(ini, "hpu-test.ini", &ctx);
  return ctx;
}

static tstor_context *open_hpu(const char *keys) {
  int rc;
  tstor_context *ctx = open_hpu_rc(&rc, keys);
  ck_assert_msg(rc == 0, "opening cpu + hpu: %s: %s", tstor_err_name(rc), tstor_last_error());
  return ctx;
}

static tstor_device dev_of(tstor_context *ctx, const char *text) {
  tstor_device d;
  ck_tstor_ok(tstor_device_parse(ctx, text, &d));
  return d;
}

static void pattern(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)((i * 131u + seed * 7u + (i >> 8)) & 0xff);
}

static void upload(tstor_context *ctx, tstor_storage *dst, const void *buf) {
  tstor_storage *h;
  ck_tstor_ok(
      tstor_storage_wrap(ctx, dev_of(ctx, "cpu"), (void *)buf, tstor_storage_nbytes(dst), &h));
  ck_tstor_ok(tstor_storage_copy(dst, h));
  tstor_storage_release(h);
}

static void download(tstor_context *ctx, void *buf, tstor_storage *src) {
  tstor_storage *h;
  ck_tstor_ok(tstor_storage_wrap(ctx, dev_of(ctx, "cpu"), buf, tstor_storage_nbytes(src), &h));
  ck_tstor_ok(tstor_storage_copy(h, src));
  tstor_storage_release(h);
}

static tstor_stats stats_of(tstor_context *ctx, const char *dev) {
  tstor_stats s = TSTOR_STATS_INIT;
  ck_tstor_ok(tstor_device_stats(ctx, dev_of(ctx, dev), &s));
  return s;
}

/* ------------------------------------------------------------- config */

START_TEST(test_defaults) {
  tstor_context *ctx = open_hpu(NULL);
  tstor_device d = dev_of(ctx, "hpu");
  ck_assert_str_eq(tstor_device_type_name(ctx, d.type), "hpu");
  ck_assert_int_eq(tstor_device_count(ctx, d.type), 2);
  tstor_device cpu = dev_of(ctx, "cpu");
  ck_assert_int_eq(tstor_copy_path_of(ctx, cpu.type, d.type), TSTOR_COPY_DIRECT);
  ck_assert_int_eq(tstor_copy_path_of(ctx, d.type, cpu.type), TSTOR_COPY_DIRECT);
  ck_assert_int_eq(tstor_copy_path_of(ctx, d.type, d.type), TSTOR_COPY_DIRECT);
  /* 256 MiB per device by default */
  tstor_storage *s;
  ck_tstor_ok(tstor_storage_new(ctx, d, (size_t)256 << 20, &s));
  tstor_storage_release(s);
  ck_tstor_err(tstor_storage_new(ctx, d, ((size_t)256 << 20) + 1, &s), TSTOR_ENOMEM);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(test_devices_and_memory) {
  tstor_context *ctx = open_hpu("devices = 3\nmemory_mb = 1");
  tstor_device d = dev_of(ctx, "hpu:2");
  ck_assert_int_eq(tstor_device_count(ctx, d.type), 3);
  tstor_context *octal = open_hpu("devices = 010"); /* ten, not eight */
  ck_assert_int_eq(tstor_device_count(octal, dev_of(octal, "hpu:0").type), 10);
  tstor_context_close(octal);
  tstor_storage *s[3];
  for (int i = 0; i < 3; i++) {
    tstor_device di = {d.type, i};
    ck_tstor_ok(tstor_storage_new(ctx, di, (size_t)1 << 20, &s[i])); /* each has its own MiB */
  }
  tstor_storage *extra = NULL;
  ck_tstor_err(tstor_storage_new(ctx, d, 1, &extra), TSTOR_ENOMEM);
  ck_assert_ptr_null(extra);
  ck_last_error_has("hpu:2");
  ck_last_error_has("out of memory");
  ck_assert_uint_eq(stats_of(ctx, "hpu:2").oom_count, 1);
  ck_assert_uint_eq(stats_of(ctx, "hpu:0").oom_count, 0);
  for (int i = 0; i < 3; i++) tstor_storage_release(s[i]);
  tstor_context_close(ctx);
}
END_TEST

static void expect_bad_config(const char *keys, const char *needle) {
  int rc;
  tstor_context *ctx = open_hpu_rc(&rc, keys);
  ck_assert_msg(rc == TSTOR_ECONFIG, "'%s' gave %s, not TSTOR_ECONFIG", keys, tstor_err_name(rc));
  ck_assert_ptr_null(ctx);
  ck_last_error_has(needle);
  ck_last_error_has("hpu-test.ini:");
}

START_TEST(test_bad_config) {
  expect_bad_config("devices = 17", "devices");
  expect_bad_config("devices = -1", "devices");
  expect_bad_config("devices = two", "devices");
  expect_bad_config("memory_mb = 0", "memory_mb");
  expect_bad_config("memory_mb = 65537", "memory_mb");
  expect_bad_config("fail_alloc_nth = -3", "fail_alloc_nth");
  expect_bad_config("copy_delay_us = 1e3", "copy_delay_us");
  expect_bad_config("devices = 0x10", "devices"); /* decimal only (docs/config.md) */
  expect_bad_config("memory_mb = 0x40", "memory_mb");
  expect_bad_config("memroy_mb = 64", "memroy_mb"); /* unknown key */
}
END_TEST

START_TEST(test_no_devices_declines) {
  tstor_context *ctx = open_hpu("devices = 0");
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  ck_tstor_ok(tstor_backend_get(ctx, 1, &info));
  ck_assert_str_eq(info.name, "hpu");
  ck_assert_int_eq(info.state, TSTOR_BACKEND_DECLINED);
  ck_assert_msg(strstr(info.message, "no hpu devices") != NULL, "message: %s", info.message);
  tstor_device d;
  ck_tstor_err(tstor_device_parse(ctx, "hpu", &d), TSTOR_ENODEV);
  tstor_context_close(ctx);
}
END_TEST

/* -------------------------------------------------------- device memory */

/* The host cannot read device memory: a dereference faults (in a child, which
 * a sanitizer may turn into an error exit instead of a signal). */
START_TEST(test_not_host_dereferenceable) {
  tstor_context *ctx = open_hpu(NULL);
  tstor_storage *s;
  ck_tstor_ok(tstor_storage_new(ctx, dev_of(ctx, "hpu"), 4096, &s));
  volatile unsigned char *p = tstor_storage_data(s);
  ck_assert_ptr_nonnull((void *)p);
  fflush(NULL);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stderr)) _exit(3);
    unsigned char c = p[0];
    _exit(42 + (c & 0)); /* reached only if the read did not fault */
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(!(WIFEXITED(status) && WEXITSTATUS(status) == 42),
                "the host read device memory without a fault");
  if (WIFSIGNALED(status))
    ck_assert_msg(WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS, "signal %d",
                  WTERMSIG(status));
  tstor_storage_release(s);
  tstor_context_close(ctx);
}
END_TEST

/* Kernels bounds-check addresses: a host pointer wrapped as hpu memory, or one
 * device's memory passed as another's, is refused, not written. */
START_TEST(test_foreign_addresses_refused) {
  tstor_context *ctx = open_hpu(NULL);
  unsigned char host[64], src[64];
  memset(host, 0x5a, sizeof host);
  pattern(src, sizeof src, 1);
  tstor_storage *fake, *h, *on0, *as1;
  ck_tstor_ok(tstor_storage_wrap(ctx, dev_of(ctx, "hpu"), host, sizeof host, &fake));
  ck_tstor_ok(tstor_storage_wrap(ctx, dev_of(ctx, "cpu"), src, sizeof src, &h));
  ck_tstor_err(tstor_storage_copy(fake, h), TSTOR_EINVAL);
  ck_last_error_has("not memory of this device");
  ck_assert_uint_eq(host[0], 0x5a);
  ck_tstor_err(tstor_storage_fill(fake, 1), TSTOR_EINVAL);
  ck_assert_uint_eq(host[63], 0x5a);

  ck_tstor_ok(tstor_storage_new(ctx, dev_of(ctx, "hpu:0"), 64, &on0));
  ck_tstor_ok(tstor_storage_wrap(ctx, dev_of(ctx, "hpu:1"), tstor_storage_data(on0), 64, &as1));
  ck_tstor_err(tstor_storage_copy(as1, h), TSTOR_EINVAL);
  ck_last_error_has("hpu:1");
  tstor_storage_release(as1);
  tstor_storage_release(on0);
  tstor_storage_release(h);
  tstor_storage_release(fake);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(test_copies_between_devices) {
  tstor_context *ctx = open_hpu(NULL);
  enum { N = 100003 };
  static unsigned char in[N], out[N];
  pattern(in, N, 2);
  tstor_storage *a, *b, *va, *vb;
  ck_tstor_ok(tstor_storage_new(ctx, dev_of(ctx, "hpu:0"), N, &a));
  ck_tstor_ok(tstor_storage_new(ctx, dev_of(ctx, "hpu:1"), N, &b));
  upload(ctx, a, in);
  ck_tstor_ok(tstor_storage_copy(b, a));
  download(ctx, out, b);
  ck_assert_mem_eq(in, out, N);
  /* bytes [7, 1007) of hpu:0 over [50000, 51000) of hpu:1 */
  ck_tstor_ok(tstor_storage_fill(a, 0xee));
  ck_tstor_ok(tstor_storage_view(a, 7, 1000, &va));
  ck_tstor_ok(tstor_storage_view(b, 50000, 1000, &vb));
  ck_tstor_ok(tstor_storage_copy(vb, va));
  download(ctx, out, b);
  for (size_t i = 0; i < N; i++)
    ck_assert_uint_eq(out[i], i >= 50000 && i < 51000 ? 0xee : in[i]);
  tstor_storage_release(va);
  tstor_storage_release(vb);
  tstor_storage_release(a);
  tstor_storage_release(b);
  tstor_context_close(ctx);
}
END_TEST

/* First fit with merging: freed neighbours come back as one block. */
START_TEST(test_arena_merges_free_blocks) {
  tstor_context *ctx = open_hpu("devices = 1\nmemory_mb = 1");
  tstor_device d = dev_of(ctx, "hpu");
  const size_t quarter = (size_t)256 << 10;
  tstor_storage *q[4], *big, *none = NULL;
  for (int i = 0; i < 4; i++) ck_tstor_ok(tstor_storage_new(ctx, d, quarter, &q[i]));
  ck_tstor_err(tstor_storage_new(ctx, d, 1, &none), TSTOR_ENOMEM);
  tstor_storage_release(q[1]);
  tstor_storage_release(q[2]);
  ck_tstor_ok(tstor_storage_new(ctx, d, 2 * quarter, &big)); /* q1 and q2, merged */
  ck_assert_ptr_eq(tstor_storage_data(big), (char *)tstor_storage_data(q[0]) + quarter);
  tstor_storage_release(big);
  tstor_storage_release(q[0]);
  tstor_storage_release(q[3]);
  ck_tstor_ok(tstor_storage_new(ctx, d, 4 * quarter, &big)); /* everything, merged */
  tstor_stats st = stats_of(ctx, "hpu");
  ck_assert_uint_eq(st.allocated, 4 * quarter);
  ck_assert_uint_eq(st.active, 4 * quarter);
  tstor_storage_release(big);
  st = stats_of(ctx, "hpu");
  ck_assert_uint_eq(st.allocated, 0);
  ck_assert_uint_eq(st.active, 0);
  ck_assert_uint_eq(st.peak_allocated, 4 * quarter);
  ck_assert_uint_eq(st.alloc_count, 6);
  ck_assert_uint_eq(st.free_count, 6);
  ck_assert_uint_eq(st.oom_count, 1);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(test_stats_rounding_and_devices) {
  tstor_context *ctx = open_hpu(NULL);
  tstor_storage *s;
  ck_tstor_ok(tstor_storage_new(ctx, dev_of(ctx, "hpu:1"), 1000, &s));
  tstor_stats one = stats_of(ctx, "hpu:1"), zero = stats_of(ctx, "hpu:0");
  ck_assert_uint_eq(one.allocated, 1000);
  ck_assert_uint_eq(one.active, 1024); /* 256-byte granules */
  ck_assert_uint_eq(one.reserved, 1024);
  ck_assert_uint_eq(zero.allocated, 0);
  ck_assert_uint_eq(zero.alloc_count, 0);
  tstor_storage_release(s);
  ck_tstor_ok(tstor_device_reset_peak(ctx, dev_of(ctx, "hpu:1")));
  one = stats_of(ctx, "hpu:1");
  ck_assert_uint_eq(one.peak_allocated, 0);
  ck_assert_uint_eq(one.peak_active, 0);
  tstor_context_close(ctx);
}
END_TEST

/* A storage outlives its context; the module stays loaded until it goes. */
START_TEST(test_storage_outlives_context) {
  tstor_context *ctx = open_hpu(NULL);
  unsigned char in[300], out[300];
  pattern(in, sizeof in, 3);
  tstor_storage *s;
  ck_tstor_ok(tstor_storage_new(ctx, dev_of(ctx, "hpu:1"), sizeof in, &s));
  upload(ctx, s, in);
  tstor_storage *h;
  ck_tstor_ok(tstor_storage_wrap(ctx, dev_of(ctx, "cpu"), out, sizeof out, &h));
  tstor_context_close(ctx);
  ck_tstor_ok(tstor_storage_copy(h, s));
  ck_assert_mem_eq(in, out, sizeof in);
  tstor_storage_release(s);
  tstor_storage_release(h);
}
END_TEST

/* ------------------------------------------------------ fault injection */

START_TEST(test_fail_alloc_nth) {
  tstor_context *ctx = open_hpu("fail_alloc_nth = 3");
  tstor_device d0 = dev_of(ctx, "hpu:0"), d1 = dev_of(ctx, "hpu:1");
  tstor_storage *a, *b, *c = NULL, *e;
  ck_tstor_ok(tstor_storage_new(ctx, d0, 10, &a));
  ck_tstor_ok(tstor_storage_new(ctx, d1, 10, &b)); /* counted across devices */
  ck_tstor_err(tstor_storage_new(ctx, d0, 10, &c), TSTOR_ENOMEM);
  ck_assert_ptr_null(c);
  ck_last_error_has("injected");
  ck_last_error_has("fail_alloc_nth = 3");
  ck_tstor_ok(tstor_storage_new(ctx, d0, 10, &e)); /* once only */
  tstor_stats st = stats_of(ctx, "hpu:0");
  ck_assert_uint_eq(st.oom_count, 1);
  ck_assert_uint_eq(st.alloc_count, 2);
  ck_assert_uint_eq(st.allocated, 20);
  tstor_storage_release(a);
  tstor_storage_release(b);
  tstor_storage_release(e);
  tstor_context_close(ctx);
}
END_TEST

/* With copies slowed down, asynchronous work is visibly pending: an event
 * reports TSTOR_EAGAIN until the copy is done, and a stream waiting on it
 * sees the finished bytes. */
START_TEST(test_copy_delay_makes_work_pending) {
  tstor_context *ctx = open_hpu("copy_delay_us = 300000");
  tstor_device d = dev_of(ctx, "hpu");
  enum { N = 4096 };
  static unsigned char in[N], out[N];
  pattern(in, N, 4);
  memset(out, 0, N);
  tstor_storage *x, *hin, *hout;
  tstor_stream *s1, *s2;
  tstor_event *e;
  ck_tstor_ok(tstor_storage_new(ctx, d, N, &x));
  ck_tstor_ok(tstor_storage_wrap(ctx, dev_of(ctx, "cpu"), in, N, &hin));
  ck_tstor_ok(tstor_storage_wrap(ctx, dev_of(ctx, "cpu"), out, N, &hout));
  ck_tstor_ok(tstor_stream_new(ctx, d, &s1));
  ck_tstor_ok(tstor_stream_new(ctx, d, &s2));
  ck_tstor_ok(tstor_event_new(ctx, d, &e));
  ck_tstor_ok(tstor_storage_copy_async(x, hin, s1));
  ck_tstor_ok(tstor_event_record(e, s1));
  ck_tstor_err(tstor_event_query(e), TSTOR_EAGAIN);
  ck_tstor_ok(tstor_stream_wait_event(s2, e));
  ck_tstor_ok(tstor_storage_copy_async(hout, x, s2));
  ck_tstor_ok(tstor_stream_synchronize(s2));
  ck_tstor_ok(tstor_event_query(e));
  ck_assert_mem_eq(in, out, N);
  tstor_event_free(e);
  tstor_stream_free(s1);
  tstor_stream_free(s2);
  tstor_storage_release(hin);
  tstor_storage_release(hout);
  tstor_storage_release(x);
  tstor_context_close(ctx);
}
END_TEST

/* After fork the child has none of the parent's stream workers: stream and
 * event work of the inherited context fails at once with TSTOR_EBACKEND and
 * a message that says so (it used to wait forever), freeing and closing
 * return, and a context opened in the child has working streams. The parent
 * bounds the child's run, and its own streams go on. */
#define CHILD_CHECK(cond)                                                               \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      fprintf(stderr, "child, line %d: %s is false (last error: %s)\n", __LINE__, #cond, \
              tstor_last_error());                                                      \
      _exit(1);                                                                         \
    }                                                                                   \
  } while (0)

static void child_after_fork(tstor_context *ctx, tstor_storage *x, tstor_storage *hin,
                             tstor_stream *s, tstor_event *e) {
  alarm(30); /* a hang must end the child, not the run */
  tstor_device d = {tstor_storage_device(x).type, 0};
  CHILD_CHECK(tstor_stream_synchronize(s) == TSTOR_EBACKEND);
  CHILD_CHECK(strstr(tstor_last_error(), "forked") && strstr(tstor_last_error(), "new context"));
  CHILD_CHECK(tstor_storage_copy_async(x, hin, s) == TSTOR_EBACKEND);
  CHILD_CHECK(tstor_event_query(e) == TSTOR_EBACKEND);
  CHILD_CHECK(tstor_event_synchronize(e) == TSTOR_EBACKEND);
  CHILD_CHECK(tstor_event_record(e, s) == TSTOR_EBACKEND);
  CHILD_CHECK(tstor_stream_wait_event(s, e) == TSTOR_EBACKEND);
  CHILD_CHECK(tstor_storage_record_stream(x, s) == TSTOR_EBACKEND);
  CHILD_CHECK(tstor_synchronize(ctx, d) == TSTOR_EBACKEND);
  tstor_stream *again = NULL;
  CHILD_CHECK(tstor_stream_new(ctx, d, &again) == TSTOR_EBACKEND && again == NULL);
  tstor_event_free(e);
  tstor_stream_free(s);
  tstor_storage_release(x);
  tstor_storage_release(hin);
  tstor_context_close(ctx);

  /* A context of its own: new workers, in this process. Not under TSan, whose
   * thread registry still holds the parent's threads in a forked child and
   * refuses a new thread that reuses one of their ids. */
#if defined(__SANITIZE_THREAD__)
  _exit(0);
#endif
  int rc;
  tstor_context *mine = open_hpu_rc(&rc, NULL);
  CHILD_CHECK(rc == 0);
  tstor_device md;
  CHILD_CHECK(tstor_device_parse(mine, "hpu", &md) == 0);
  enum { N = 1000 };
  static unsigned char in[N], out[N];
  pattern(in, N, 9);
  tstor_storage *dev = NULL, *a = NULL, *b = NULL;
  tstor_stream *st = NULL;
  CHILD_CHECK(tstor_storage_new(mine, md, N, &dev) == 0);
  CHILD_CHECK(tstor_storage_wrap(mine, dev_of(mine, "cpu"), in, N, &a) == 0);
  CHILD_CHECK(tstor_storage_wrap(mine, dev_of(mine, "cpu"), out, N, &b) == 0);
  CHILD_CHECK(tstor_stream_new(mine, md, &st) == 0);
  CHILD_CHECK(tstor_storage_copy_async(dev, a, st) == 0);
  CHILD_CHECK(tstor_storage_copy_async(b, dev, st) == 0);
  CHILD_CHECK(tstor_stream_synchronize(st) == 0);
  CHILD_CHECK(memcmp(in, out, N) == 0);
  tstor_stream_free(st);
  tstor_storage_release(dev);
  tstor_storage_release(a);
  tstor_storage_release(b);
  tstor_context_close(mine);
  _exit(0);
}

START_TEST(test_streams_after_fork) {
  tstor_context *ctx = open_hpu("copy_delay_us = 200000");
  tstor_device d = dev_of(ctx, "hpu");
  enum { N = 4096 };
  static unsigned char in[N];
  pattern(in, N, 5);
  tstor_storage *x, *hin;
  tstor_stream *s;
  tstor_event *e;
  ck_tstor_ok(tstor_storage_new(ctx, d, N, &x));
  ck_tstor_ok(tstor_storage_wrap(ctx, dev_of(ctx, "cpu"), in, N, &hin));
  ck_tstor_ok(tstor_stream_new(ctx, d, &s));
  ck_tstor_ok(tstor_event_new(ctx, d, &e));
  ck_tstor_ok(tstor_storage_copy_async(x, hin, s)); /* pending for 0.2 s: the fork sees it */
  ck_tstor_ok(tstor_event_record(e, s));
  /* Fork once the stream's worker has started and sleeps in the copy's delay
   * (which leaves 150 ms of it pending). A thread starting up allocates, and
   * ASan's allocator (GCC 12's runtime) takes no lock around fork: a child
   * forked while another thread held one of its locks waits on it forever at
   * its first new thread, which was one run in four on a VM with slow page
   * faults. glibc's malloc locks around fork, so a plain build never did. */
  usleep(50 * 1000);
  fflush(NULL);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) child_after_fork(ctx, x, hin, s, e);
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 400 && done == 0; i++) { /* 20 s at most */
    done = waitpid(pid, &status, WNOHANG);
    if (done == 0) usleep(50 * 1000);
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    ck_abort_msg("the child hung on a stream it inherited");
  }
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "the child failed (status %d; its stderr says why)", status);
  /* The parent's stream finishes its work as if nothing happened. */
  ck_tstor_ok(tstor_stream_synchronize(s));
  ck_tstor_ok(tstor_event_query(e));
  unsigned char back[N];
  download(ctx, back, x);
  ck_assert_mem_eq(back, in, N);
  tstor_event_free(e);
  tstor_stream_free(s);
  tstor_storage_release(x);
  tstor_storage_release(hin);
  tstor_context_close(ctx);
}
END_TEST

/* A block freed while a stream still writes into it comes back only after
 * that work: in a full arena the next allocation waits for it (a retry). */
START_TEST(test_record_stream_defers_reuse) {
  tstor_context *ctx = open_hpu("devices = 1\nmemory_mb = 1\ncopy_delay_us = 500000");
  tstor_device d = dev_of(ctx, "hpu");
  const size_t n = (size_t)1 << 20;
  unsigned char *in = malloc(n), *fresh = malloc(n), *out = malloc(n);
  ck_assert_ptr_nonnull(in);
  ck_assert_ptr_nonnull(fresh);
  ck_assert_ptr_nonnull(out);
  pattern(in, n, 5);
  pattern(fresh, n, 6);
  tstor_storage *x, *z, *hin;
  tstor_stream *s;
  ck_tstor_ok(tstor_stream_new(ctx, d, &s));
  ck_tstor_ok(tstor_storage_wrap(ctx, dev_of(ctx, "cpu"), in, n, &hin));
  ck_tstor_ok(tstor_storage_new(ctx, d, n, &x));
  ck_tstor_ok(tstor_storage_copy_async(x, hin, s));
  ck_tstor_ok(tstor_storage_record_stream(x, s));
  tstor_storage_release(x);
  tstor_stats st = stats_of(ctx, "hpu");
  ck_assert_uint_eq(st.allocated, 0);     /* given back by the core... */
  ck_assert_uint_eq(st.reserved, n);      /* ...but not free yet */
  ck_tstor_ok(tstor_storage_new(ctx, d, n, &z)); /* waits for the copy */
  upload(ctx, z, fresh);
  ck_tstor_ok(tstor_stream_synchronize(s));
  download(ctx, out, z);
  ck_assert_mem_eq(fresh, out, n);
  st = stats_of(ctx, "hpu");
  ck_assert_uint_eq(st.retries, 1);
  tstor_storage_release(z);
  tstor_storage_release(hin);
  tstor_stream_free(s);
  tstor_context_close(ctx);
  free(in);
  free(fresh);
  free(out);
}
END_TEST

/* Events never recorded are complete; recording again moves the point. */
START_TEST(test_events) {
  tstor_context *ctx = open_hpu(NULL);
  tstor_device d = dev_of(ctx, "hpu");
  tstor_stream *s;
  tstor_event *e;
  ck_tstor_ok(tstor_stream_new(ctx, d, &s));
  ck_tstor_ok(tstor_event_new(ctx, d, &e));
  ck_tstor_ok(tstor_event_query(e));
  ck_tstor_ok(tstor_event_synchronize(e));
  ck_tstor_ok(tstor_stream_wait_event(s, e));
  ck_tstor_ok(tstor_event_record(e, s));
  ck_tstor_ok(tstor_event_record(e, s));
  ck_tstor_ok(tstor_event_synchronize(e));
  ck_tstor_ok(tstor_stream_wait_event(s, e)); /* its own point: nothing to wait for */
  ck_tstor_ok(tstor_stream_synchronize(s));
  tstor_stream_free(s);
  ck_tstor_ok(tstor_event_query(e)); /* the event outlives its stream */
  tstor_event_free(e);
  tstor_context_close(ctx);
}
END_TEST

/* Pinned host memory (pinned.c): tstor_storage_pin and
 * tstor_storage_new_pinned take it from the stub's allocator for "cpu", an
 * asynchronous copy from it to a device arrives, and pinned_memory = no
 * leaves the stub without one. */
START_TEST(test_pinned_host_memory) {
  tstor_context *ctx = open_hpu(NULL);
  tstor_device cpu = dev_of(ctx, "cpu"), hpu = dev_of(ctx, "hpu:1");
  unsigned char src[5000], back[5000];
  pattern(src, sizeof src, 3);
  tstor_storage *h, *p, *d, *n, *z;
  ck_tstor_ok(tstor_storage_wrap(ctx, cpu, src, sizeof src, &h));
  ck_assert_int_eq(tstor_storage_is_pinned(h), 0);
  ck_tstor_ok(tstor_storage_pin(h, &p));
  ck_assert_int_eq(tstor_storage_is_pinned(p), 1);
  ck_assert_int_eq(tstor_storage_device(p).type, cpu.type);
  ck_assert_int_eq(memcmp(tstor_storage_data(p), src, sizeof src), 0);
  ck_tstor_ok(tstor_storage_new(ctx, hpu, sizeof src, &d));
  tstor_stream *st;
  ck_tstor_ok(tstor_stream_new(ctx, hpu, &st));
  ck_tstor_ok(tstor_storage_copy_async(d, p, st));
  ck_tstor_ok(tstor_stream_synchronize(st));
  tstor_stream_free(st);
  download(ctx, back, d);
  ck_assert_int_eq(memcmp(back, src, sizeof src), 0);
  ck_tstor_ok(tstor_storage_new_pinned(ctx, 100, &n));
  ck_assert_int_eq(tstor_storage_is_pinned(n), 1);
  ck_assert_uint_eq(tstor_storage_nbytes(n), 100);
  memset(tstor_storage_data(n), 0xab, 100); /* host memory: the host may write it */
  ck_tstor_ok(tstor_storage_new_pinned(ctx, 0, &z));
  ck_assert_uint_eq(tstor_storage_nbytes(z), 0);
  tstor_storage_release(z);
  tstor_storage_release(n);
  tstor_storage_release(d);
  tstor_storage_release(p);
  tstor_storage_release(h);
  tstor_context_close(ctx);

  ctx = open_hpu("pinned_memory = no");
  n = (tstor_storage *)0x1;
  ck_tstor_err(tstor_storage_new_pinned(ctx, 100, &n), TSTOR_ENOTSUP);
  ck_assert_ptr_null(n);
  tstor_context_close(ctx);
}
END_TEST

/* tstor_device_get_properties (ABI 1.5): hpu-stub's capacity, what no block
 * holds, its largest free block, its alignment and a stable id, each
 * following the allocations; and the cpu's, which are the machine's. */
START_TEST(test_properties) {
  tstor_context *ctx = open_hpu("memory_mb = 4");
  tstor_device hpu = dev_of(ctx, "hpu:1"), cpu = dev_of(ctx, "cpu");
  tstor_device_properties p = TSTOR_DEVICE_PROPERTIES_INIT;
  ck_tstor_ok(tstor_device_get_properties(ctx, hpu, &p));
  const uint32_t all = TSTOR_PROP_FREE | TSTOR_PROP_TOTAL | TSTOR_PROP_ALIGNMENT |
                       TSTOR_PROP_MAX_ALLOCATION | TSTOR_PROP_ID;
  ck_assert_uint_eq(p.reported, all);
  ck_assert_uint_eq(p.total_bytes, 4u << 20);
  ck_assert_uint_eq(p.free_bytes, 4u << 20);
  ck_assert_uint_eq(p.max_allocation, 4u << 20);
  ck_assert_uint_eq(p.alignment, 256);
  ck_assert_str_eq(p.id, "hpu-stub:1");
  ck_assert_uint_eq(p.capabilities, TSTOR_DEVICE_CAP_STREAMS | TSTOR_DEVICE_CAP_FILL |
                                        TSTOR_DEVICE_CAP_COPY_STRIDED |
                                        TSTOR_DEVICE_CAP_PROPERTIES);
  /* 1000 bytes take a 1024-byte block; a second block leaves the free
   * space in one piece after it */
  tstor_storage *a, *b;
  ck_tstor_ok(tstor_storage_new(ctx, hpu, 1000, &a));
  ck_tstor_ok(tstor_storage_new(ctx, hpu, 3u << 20, &b));
  ck_tstor_ok(tstor_device_get_properties(ctx, hpu, &p));
  ck_assert_uint_eq(p.free_bytes, (4u << 20) - 1024 - (3u << 20));
  ck_assert_uint_eq(p.max_allocation, p.free_bytes);
  tstor_storage_release(a);
  ck_tstor_ok(tstor_device_get_properties(ctx, hpu, &p));
  ck_assert_uint_eq(p.free_bytes, (1u << 20));
  ck_assert_uint_eq(p.max_allocation, (1u << 20) - 1024); /* two pieces now */
  tstor_storage_release(b);
  ck_tstor_ok(tstor_device_get_properties(ctx, dev_of(ctx, "hpu:0"), &p));
  ck_assert_str_eq(p.id, "hpu-stub:0");

  ck_tstor_ok(tstor_device_get_properties(ctx, cpu, &p));
  ck_assert_uint_eq(p.reported & (TSTOR_PROP_TOTAL | TSTOR_PROP_FREE | TSTOR_PROP_ALIGNMENT),
                    TSTOR_PROP_TOTAL | TSTOR_PROP_FREE | TSTOR_PROP_ALIGNMENT);
  ck_assert_uint_gt(p.total_bytes, 0);
  ck_assert_uint_le(p.free_bytes, p.total_bytes);
  ck_assert_uint_eq(p.alignment, 64);
  ck_assert(p.capabilities & TSTOR_DEVICE_CAP_MAPPING);
  tstor_device nosuch = {hpu.type, 7};
  ck_tstor_err(tstor_device_get_properties(ctx, nosuch, &p), TSTOR_ENODEV);
  ck_tstor_err(tstor_device_get_properties(ctx, cpu, NULL), TSTOR_EINVAL);
  tstor_context_close(ctx);
}
END_TEST

Suite *hpu_suite(void) {
  Suite *s = suite_create("hpu-stub");
  TCase *tc = tcase_create("config");
  tcase_add_test(tc, test_defaults);
  tcase_add_test(tc, test_devices_and_memory);
  tcase_add_test(tc, test_bad_config);
  tcase_add_test(tc, test_no_devices_declines);
  suite_add_tcase(s, tc);
  tc = tcase_create("memory");
  tcase_add_test(tc, test_not_host_dereferenceable);
  tcase_add_test(tc, test_foreign_addresses_refused);
  tcase_add_test(tc, test_copies_between_devices);
  tcase_add_test(tc, test_arena_merges_free_blocks);
  tcase_add_test(tc, test_stats_rounding_and_devices);
  tcase_add_test(tc, test_storage_outlives_context);
  suite_add_tcase(s, tc);
  tc = tcase_create("faults and streams");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_fail_alloc_nth);
  tcase_add_test(tc, test_copy_delay_makes_work_pending);
  tcase_add_test(tc, test_record_stream_defers_reuse);
  tcase_add_test(tc, test_events);
  tcase_add_test(tc, test_pinned_host_memory);
  tcase_add_test(tc, test_properties);
  tcase_add_test(tc, test_streams_after_fork);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tstor_test_run(hpu_suite()); }
