/* The remote backend through the public API, against `tstor serve`
 * processes each test starts and stops: round trips of every dtype between
 * cpu, hpu-stub and two peers; the secret (wrong, badly protected); peers
 * that are unreachable, killed mid-copy, or stopped with blocks held; the
 * per-client memory cap; streams and events; what each device stands for. */
#include <pthread.h>
#include <tstor/serialize.h>
#include <tstor/tensor.h>
#include <tstor/typed.h>

#include "remotetest.h"

#define SECRET "correct horse battery staple 42"

static test_files fixture;

static void setup_secret(void) { test_files_make(&fixture, "client", SECRET "\n"); }

static void teardown_secret(void) { test_files_remove(&fixture); }

static tstor_context *open_client(const char *peers, const char *secret, long timeout_ms) {
  char ini[2048];
  client_config(ini, sizeof ini, peers, secret, timeout_ms, 0);
  tstor_context *ctx = NULL;
  ck_tstor_ok(tstor_context_open_string(ini, "remote-test.ini", &ctx));
  return ctx;
}

/* A client of the one peer `ts`, with the test's secret. */
static tstor_context *open_client_of(const test_server *ts, long timeout_ms) {
  char peers[64];
  snprintf(peers, sizeof peers, "127.0.0.1:%u", ts->port);
  return open_client(peers, fixture.secret, timeout_ms);
}

/* A client of two peers, a then b (remote:0, remote:1); their list in peers. */
static tstor_context *open_client_of_two(const test_server *a, const test_server *b,
                                         long timeout_ms, char peers[128]) {
  snprintf(peers, 128, "127.0.0.1:%u, 127.0.0.1:%u", a->port, b->port);
  return open_client(peers, fixture.secret, timeout_ms);
}

static tstor_device dev(tstor_context *ctx, const char *name) {
  tstor_device d;
  ck_tstor_ok(tstor_device_parse(ctx, name, &d));
  return d;
}

/* --------------------------------------------------------- round trips */

START_TEST(every_dtype_round_trips) {
  test_server a, b;
  server_start(&a, fixture.secret, "dtype-a");
  server_start(&b, fixture.secret, "dtype-b");
  char peers[128];
  tstor_context *ctx = open_client_of_two(&a, &b, 5000, peers);
  tstor_device cpu = dev(ctx, "cpu"), hpu = dev(ctx, "hpu:0"), r0 = dev(ctx, "remote:0"),
               r1 = dev(ctx, "remote:1");
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  int ndtypes = 0;
  for (int t = 0; t < TSTOR_DTYPE_END; t++) {
    if (!tstor_dtype_info_of((tstor_dtype)t)) continue;
    ndtypes++;
    const size_t count = 1000 + (size_t)t;
    tstor_storage *host, *on_r0, *on_hpu, *on_r1, *back_r0, *clone, *out;
    ck_tstor_ok(tstor_typed_new(ctx, cpu, (tstor_dtype)t, count, &host));
    uint8_t *bytes = tstor_storage_data(host);
    for (size_t i = 0; i < tstor_storage_nbytes(host); i++) bytes[i] = (uint8_t)tstor_test_rng(&rng);
    ck_tstor_ok(tstor_storage_to(host, r0, &on_r0));         /* cpu -> remote (put) */
    ck_tstor_ok(tstor_storage_to(on_r0, hpu, &on_hpu));      /* remote -> hpu (staged) */
    ck_tstor_ok(tstor_storage_to(on_hpu, r1, &on_r1));       /* hpu -> remote, other peer */
    ck_tstor_ok(tstor_storage_to(on_r1, r0, &back_r0));      /* peer to peer */
    ck_tstor_ok(tstor_storage_clone(back_r0, &clone));       /* within a peer */
    ck_tstor_ok(tstor_storage_to(clone, cpu, &out));         /* remote -> cpu (get) */
    ck_assert_int_eq(tstor_storage_nbytes(out), tstor_storage_nbytes(host));
    ck_assert_msg(memcmp(tstor_storage_data(out), bytes, tstor_storage_nbytes(host)) == 0,
                  "%s: bytes changed on the way", tstor_dtype_name((tstor_dtype)t));
    /* typed access on the remote device, element by element, through the core */
    uint8_t elem[16];
    size_t esize = tstor_dtype_size((tstor_dtype)t);
    ck_tstor_ok(tstor_typed_get(clone, (tstor_dtype)t, count - 1, elem));
    ck_assert(memcmp(elem, bytes + (count - 1) * esize, esize) == 0);
    tstor_storage *list[] = {host, on_r0, on_hpu, on_r1, back_r0, clone, out};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) tstor_storage_release(list[i]);
  }
  ck_assert_int_ge(ndtypes, 20);

  /* fills and views on a remote device */
  tstor_storage *s, *view, *out;
  ck_tstor_ok(tstor_storage_new(ctx, r1, 4096, &s));
  ck_tstor_ok(tstor_storage_fill(s, 0xab));
  ck_tstor_ok(tstor_storage_view(s, 100, 50, &view));
  uint32_t pat = 0x01020304;
  ck_tstor_ok(tstor_storage_fill_pattern(view, &pat, 2));
  ck_tstor_ok(tstor_storage_to(s, cpu, &out));
  const uint8_t *o = tstor_storage_data(out);
  ck_assert_int_eq(o[99], 0xab);
  ck_assert_int_eq(o[100], 0x04);
  ck_assert_int_eq(o[101], 0x03);
  ck_assert_int_eq(o[149], 0x03);
  ck_assert_int_eq(o[150], 0xab);
  tstor_storage_release(view);
  tstor_storage_release(out);

  /* stats report what this client holds on the peer */
  tstor_stats st = TSTOR_STATS_INIT;
  ck_tstor_ok(tstor_device_stats(ctx, r1, &st));
  ck_assert_uint_eq(st.allocated, 4096);
  tstor_storage_release(s);
  ck_tstor_ok(tstor_device_stats(ctx, r1, &st));
  ck_assert_uint_eq(st.allocated, 0);

  tstor_context_close(ctx);
  ck_assert_int_eq(server_stop(&a), 0);
  ck_assert_int_eq(server_stop(&b), 0);
  ck_assert(file_has(a.log, "authenticated"));
  ck_assert(file_has(a.log, "stopped"));
}
END_TEST

/* ------------------------------------------------------------- secrets */

START_TEST(wrong_secret_gets_no_device) {
  test_server a;
  server_start(&a, fixture.secret, "wrong");
  char wrong[300], peers[64], ini[2048];
  snprintf(wrong, sizeof wrong, "%s.wrong", fixture.secret);
  write_secret(wrong, "this is not the secret at all\n", 0600);
  snprintf(peers, sizeof peers, "127.0.0.1:%u", a.port);

  client_config(ini, sizeof ini, peers, wrong, 5000, 0);
  tstor_context *ctx = NULL;
  ck_tstor_err(tstor_context_open_string(ini, "wrong.ini", &ctx), TSTOR_EACCES);
  ck_last_error_has(peers);
  ck_last_error_has("authentication failed");

  /* optional: the context opens, without remote devices */
  client_config(ini, sizeof ini, peers, wrong, 5000, 1);
  ck_tstor_ok(tstor_context_open_string(ini, "wrong.ini", &ctx));
  tstor_device d;
  ck_tstor_err(tstor_device_parse(ctx, "remote:0", &d), TSTOR_ENODEV);
  tstor_context_close(ctx);

  ck_assert_int_eq(server_stop(&a), 0);
  ck_assert(file_has(a.log, "wrong secret"));
  ck_assert(!file_has(a.log, "authenticated"));
  unlink(wrong);
}
END_TEST

START_TEST(secret_files_others_can_read_are_refused) {
  char loose[300], peers[64], ini[2048];
  snprintf(loose, sizeof loose, "%s.loose", fixture.secret);
  write_secret(loose, SECRET "\n", 0640);

  /* the server refuses to start */
  test_server a;
  ck_assert_int_eq(server_start_args(&a, loose, "loose", NULL, NULL), -1);
  ck_assert_msg(file_has(a.log, "mode 0640"), "see %s", a.log);

  /* the client refuses to use it */
  server_start(&a, fixture.secret, "loose-ok");
  snprintf(peers, sizeof peers, "127.0.0.1:%u", a.port);
  client_config(ini, sizeof ini, peers, loose, 5000, 0);
  tstor_context *ctx = NULL;
  ck_tstor_err(tstor_context_open_string(ini, "loose.ini", &ctx), TSTOR_ECONFIG);
  ck_last_error_has("secret_file");
  ck_last_error_has("mode 0640");
  ck_assert_int_eq(server_stop(&a), 0);
  ck_assert(!file_has(a.log, "connected"));
  unlink(loose);
}
END_TEST

/* --------------------------------------------------------------- faults */

START_TEST(unreachable_peer_is_reported) {
  test_server a;
  server_start(&a, fixture.secret, "unreach");
  unsigned dead = free_port(); /* nobody listens there */
  char peers[128], ini[2048];
  snprintf(peers, sizeof peers, "127.0.0.1:%u, 127.0.0.1:%u", dead, a.port);
  client_config(ini, sizeof ini, peers, fixture.secret, 2000, 1);
  tstor_context *ctx = NULL;
  double t0 = mono_s();
  ck_tstor_ok(tstor_context_open_string(ini, "unreach.ini", &ctx));
  ck_assert_int_eq(tstor_device_count(ctx, dev(ctx, "remote:0").type), 1);
  tstor_context_close(ctx);

  /* not optional, and nothing reachable: an error naming the peer, in time */
  snprintf(peers, sizeof peers, "127.0.0.1:%u", dead);
  client_config(ini, sizeof ini, peers, fixture.secret, 2000, 0);
  ck_tstor_err(tstor_context_open_string(ini, "unreach.ini", &ctx), TSTOR_EIO);
  ck_last_error_has(peers);
  ck_assert_double_lt(mono_s() - t0, 10.0);
  ck_assert_int_eq(server_stop(&a), 0);
}
END_TEST

typedef struct killer {
  pid_t pid;
  int delay_ms;
} killer;

static void *kill_later(void *arg) {
  killer *k = arg;
  usleep((useconds_t)k->delay_ms * 1000);
  kill(k->pid, SIGKILL);
  return NULL;
}

START_TEST(server_killed_mid_copy) {
  test_server a;
  server_start(&a, fixture.secret, "kill9");
  char peers[64];
  snprintf(peers, sizeof peers, "127.0.0.1:%u", a.port);
  /* Under the sanitizers every byte moves several times slower. */
  const int slow = UNDER_ASAN || UNDER_TSAN;
  const long timeout_ms = slow ? 5000 : 2000;
  tstor_context *ctx = open_client(peers, fixture.secret, timeout_ms);
  const size_t n = (size_t)(slow ? 8 : 64) << 20;
  tstor_storage *host, *remote, *small;
  ck_tstor_ok(tstor_storage_new(ctx, dev(ctx, "cpu"), n, &host));
  memset(tstor_storage_data(host), 7, n);
  ck_tstor_ok(tstor_storage_new(ctx, dev(ctx, "remote:0"), n, &remote));
  ck_tstor_ok(tstor_storage_new(ctx, dev(ctx, "remote:0"), 64, &small));
  ck_tstor_ok(tstor_storage_copy(remote, host));

  killer k = {a.pid, 20};
  pthread_t t;
  pthread_create(&t, NULL, kill_later, &k);
  int rc = 0;
  double worst = 0;
  for (int i = 0; i < 1000 && rc == 0; i++) {
    double t0 = mono_s();
    rc = (i % 2) ? tstor_storage_copy(host, remote) : tstor_storage_copy(remote, host);
    double took = mono_s() - t0;
    if (took > worst) worst = took;
  }
  pthread_join(t, NULL);
  waitpid(a.pid, NULL, 0);
  a.pid = 0;
  ck_tstor_err(rc, TSTOR_EIO);
  ck_last_error_has(peers);
  ck_assert_msg(worst < timeout_ms / 1000.0 + 3.0, "a copy took %.1f s", worst);

  /* later calls fail at once, naming the peer; storages can still be released */
  double t0 = mono_s();
  tstor_storage *more = NULL;
  ck_assert_int_ne(tstor_storage_new(ctx, dev(ctx, "remote:0"), 100, &more), 0);
  ck_last_error_has(peers);
  ck_tstor_err(tstor_storage_fill(small, 1), TSTOR_EIO);
  ck_assert_double_lt(mono_s() - t0, 1.0);
  tstor_storage_release(small);
  tstor_storage_release(remote);
  tstor_storage_release(host);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(server_stopped_with_blocks_held) {
  test_server a;
  server_start(&a, fixture.secret, "stop");
  tstor_context *ctx = open_client_of(&a, 2000);
  tstor_storage *s;
  ck_tstor_ok(tstor_storage_new(ctx, dev(ctx, "remote:0"), 1 << 20, &s));
  ck_assert_int_eq(server_stop(&a), 0);
  ck_assert(file_has(a.log, "freed 1 block(s)"));
  ck_assert(file_has(a.log, "stopped"));
  double t0 = mono_s();
  ck_assert_int_ne(tstor_storage_fill(s, 3), 0);
  tstor_storage_release(s);
  tstor_context_close(ctx);
  ck_assert_double_lt(mono_s() - t0, 5.0);
}
END_TEST

START_TEST(client_memory_is_capped) {
  test_server a;
  ck_assert_int_eq(server_start_args(&a, fixture.secret, "cap", "--max-client-mb", "1"), 0);
  char peers[64];
  snprintf(peers, sizeof peers, "127.0.0.1:%u", a.port);
  tstor_context *ctx = open_client(peers, fixture.secret, 5000);
  tstor_storage *s, *t;
  ck_tstor_ok(tstor_storage_new(ctx, dev(ctx, "remote:0"), 768 << 10, &s));
  ck_tstor_err(tstor_storage_new(ctx, dev(ctx, "remote:0"), 512 << 10, &t), TSTOR_ENOMEM);
  ck_last_error_has("max_client_mb");
  ck_last_error_has(peers);
  tstor_storage_release(s);
  ck_tstor_ok(tstor_storage_new(ctx, dev(ctx, "remote:0"), 512 << 10, &t));
  tstor_storage_release(t);
  tstor_context_close(ctx);
  ck_assert_int_eq(server_stop(&a), 0);
}
END_TEST

/* Strided tensor copies on one remote device go to the peer as one
 * descriptor (copy_strided); the result is what the same copy gives on cpu. */
static void check_strided_copies(tstor_context *ctx, const char *where) {
  tstor_device r0 = dev(ctx, where), cpu = dev(ctx, "cpu");
  const int64_t sizes[3] = {5, 37, 53};
  tstor_tensor *host, *remote, *perm_h, *perm_r, *want, *got, *got_h;
  ck_tstor_ok(tstor_tensor_empty(ctx, cpu, TSTOR_FLOAT64, 3, sizes, &host));
  double *v = tstor_tensor_data(host);
  for (int64_t i = 0; i < 5 * 37 * 53; i++) v[i] = (double)i * 0.5;
  ck_tstor_ok(tstor_tensor_to(host, r0, TSTOR_FLOAT64, &remote));
  const int64_t order[3] = {2, 0, 1};
  ck_tstor_ok(tstor_tensor_permute(host, 3, order, &perm_h));
  ck_tstor_ok(tstor_tensor_permute(remote, 3, order, &perm_r));
  ck_tstor_ok(tstor_tensor_contiguous(perm_h, &want));
  ck_tstor_ok(tstor_tensor_contiguous(perm_r, &got)); /* on the remote device, strided */
  ck_assert(tstor_tensor_device(got).type == r0.type);
  ck_tstor_ok(tstor_tensor_to(got, cpu, TSTOR_FLOAT64, &got_h));
  ck_assert(memcmp(tstor_tensor_data(got_h), tstor_tensor_data(want),
                   (size_t)tstor_tensor_nbytes(want)) == 0);
  tstor_tensor *list[] = {host, remote, perm_h, perm_r, want, got, got_h};
  for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) tstor_tensor_release(list[i]);
}

/* check(ctx, "remote:0") with a client of a server of its own (cpu alone). */
static void on_one_server(const char *tag, void (*check)(tstor_context *, const char *)) {
  test_server a;
  server_start(&a, fixture.secret, tag);
  tstor_context *ctx = open_client_of(&a, 5000);
  check(ctx, "remote:0");
  tstor_context_close(ctx);
  ck_assert_int_eq(server_stop(&a), 0);
}

START_TEST(strided_tensor_copies) { on_one_server("strided", check_strided_copies); }
END_TEST

/* torch.save files that PyTorch wrote, loaded with map_location `where`:
 * every storage on the peer, with the bytes of the same file loaded on cpu. */
static void check_checkpoints_load(tstor_context *ctx, const char *where) {
  tstor_device r0 = dev(ctx, where), cpu = dev(ctx, "cpu");
  const char *files[] = {"module_conv_bn.pt", "checkpoint_nested.pt", "legacy_params_lstm.pt"};
  for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
    char path[512];
    snprintf(path, sizeof path, "%s/ckpt/golden/%s", TSTOR_TEST_SRCDIR, files[f]);
    tstor_load_options on_cpu = TSTOR_LOAD_OPTIONS_INIT, on_remote = TSTOR_LOAD_OPTIONS_INIT;
    on_cpu.map_location = "cpu";
    on_remote.map_location = where;
    tstor_checkpoint *want, *got;
    ck_tstor_ok(tstor_torch_load(ctx, path, &on_cpu, &want));
    ck_tstor_ok(tstor_torch_load(ctx, path, &on_remote, &got));
    size_t n = tstor_checkpoint_storage_count(want);
    ck_assert_uint_gt(n, 0);
    ck_assert_uint_eq(tstor_checkpoint_storage_count(got), n);
    for (size_t i = 0; i < n; i++) {
      const char *k1, *k2;
      tstor_storage *w, *g, *back;
      ck_tstor_ok(tstor_checkpoint_storage(want, i, &k1, &w));
      ck_tstor_ok(tstor_checkpoint_storage(got, i, &k2, &g));
      ck_assert_str_eq(k1, k2);
      ck_assert(tstor_storage_device(g).type == r0.type);
      ck_tstor_ok(tstor_storage_to(g, cpu, &back));
      ck_assert_uint_eq(tstor_storage_nbytes(back), tstor_storage_nbytes(w));
      ck_assert_msg(tstor_storage_nbytes(w) == 0 ||
                        memcmp(tstor_storage_data(back), tstor_storage_data(w),
                               tstor_storage_nbytes(w)) == 0,
                    "%s: storage %s differs", files[f], k1);
      tstor_storage_release(back);
    }
    tstor_checkpoint_free(got);
    tstor_checkpoint_free(want);
  }
}

START_TEST(checkpoint_loads_onto_a_remote_device) {
  on_one_server("ckpt", check_checkpoints_load);
}
END_TEST

/* A device that is not host memory (hpu-stub here, cuda alike) is exported
 * too, its bytes staged through a host buffer of the client's session on the
 * server: copies larger than the buffer, fills, copies between it and the
 * peer's cpu and within one block (overlapping), strided copies and
 * checkpoints. */
START_TEST(staged_devices_are_exported) {
  test_server a;
  ck_assert_int_eq(server_start_with(&a, SERVER_CPU_HPU, fixture.secret, "staged", NULL, NULL), 0);
  tstor_context *ctx = open_client_of(&a, 10000);
  tstor_device cpu = dev(ctx, "cpu"), r0 = dev(ctx, "remote:0"), r1 = dev(ctx, "remote:1");
  char line[256], want[128];
  ck_tstor_ok(tstor_device_describe(ctx, r1, line, sizeof line));
  snprintf(want, sizeof want, "remote:1 -> 127.0.0.1:%u hpu:0", a.port);
  ck_assert_str_eq(line, want);
  ck_assert(file_has(a.log, "2 device(s)"));

  /* 40 MiB: three pieces through a 16 MiB buffer, both ways */
  const size_t n = (size_t)40 << 20;
  tstor_storage *h, *back, *staged, *plain;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, n, &h));
  ck_tstor_ok(tstor_storage_new(ctx, cpu, n, &back));
  uint64_t rng = 0x2545f4914f6cdd1dull;
  uint8_t *hb = tstor_storage_data(h);
  for (size_t i = 0; i < n; i += 8) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    memcpy(hb + i, &rng, 8);
  }
  ck_tstor_ok(tstor_storage_new(ctx, r1, n, &staged));
  ck_tstor_ok(tstor_storage_copy(staged, h));
  ck_tstor_ok(tstor_storage_copy(back, staged));
  ck_assert(memcmp(tstor_storage_data(back), hb, n) == 0);

  /* a fill of a range: the bytes around it stay */
  tstor_storage *mid;
  const uint32_t pattern = 0xa5c3e1f0u;
  ck_tstor_ok(tstor_storage_view(staged, 4096, 3 * 4096, &mid));
  ck_tstor_ok(tstor_storage_fill_pattern(mid, &pattern, 4));
  ck_tstor_ok(tstor_storage_copy(back, staged));
  for (size_t i = 4096; i < 4 * 4096; i += 4) memcpy(hb + i, &pattern, 4);
  ck_assert(memcmp(tstor_storage_data(back), hb, n) == 0);
  tstor_storage_release(mid);

  /* within the peer: hpu -> cpu -> hpu, and overlapping ranges of one block */
  ck_tstor_ok(tstor_storage_new(ctx, r0, n, &plain));
  ck_tstor_ok(tstor_storage_copy(plain, staged));
  tstor_storage *lo, *hi;
  ck_tstor_ok(tstor_storage_view(staged, 0, n - 1000, &lo));
  ck_tstor_ok(tstor_storage_view(staged, 1000, n - 1000, &hi));
  ck_tstor_ok(tstor_storage_copy(hi, lo));
  memmove(hb + 1000, hb, n - 1000);
  ck_tstor_ok(tstor_storage_copy(back, staged));
  ck_assert(memcmp(tstor_storage_data(back), hb, n) == 0);
  ck_tstor_ok(tstor_storage_copy(staged, plain)); /* the bytes before the fill's neighbours moved */
  ck_tstor_ok(tstor_storage_copy(back, staged));
  ck_tstor_ok(tstor_storage_copy(h, plain));
  ck_assert(memcmp(tstor_storage_data(back), tstor_storage_data(h), n) == 0);
  tstor_storage_release(hi);
  tstor_storage_release(lo);

  tstor_stats st = TSTOR_STATS_INIT;
  ck_tstor_ok(tstor_device_stats(ctx, r1, &st));
  ck_assert_uint_eq(st.allocated, n);
  tstor_storage_release(plain);
  tstor_storage_release(staged);
  tstor_storage_release(back);
  tstor_storage_release(h);

  check_strided_copies(ctx, "remote:1");
  check_checkpoints_load(ctx, "remote:1");
  tstor_context_close(ctx);
  ck_assert_int_eq(server_stop(&a), 0);
}
END_TEST

/* A fork child cannot use the parent's connections: calls fail with a
 * reason instead of waiting; releasing works in both processes. */
START_TEST(fork_child_fails_cleanly) {
  test_server a;
  server_start(&a, fixture.secret, "fork");
  tstor_context *ctx = open_client_of(&a, 2000);
  tstor_storage *s;
  ck_tstor_ok(tstor_storage_new(ctx, dev(ctx, "remote:0"), 4096, &s));
  pid_t child = fork();
  ck_assert_int_ge(child, 0);
  if (child == 0) {
    tstor_storage *t = NULL;
    int code = 0;
    if (tstor_storage_new(ctx, dev(ctx, "remote:0"), 64, &t) != TSTOR_EBACKEND) code |= 1;
    if (!strstr(tstor_last_error(), "forked")) code |= 2;
    if (tstor_storage_fill(s, 1) != TSTOR_EBACKEND) code |= 4;
    tstor_storage_release(s);
    _exit(code);
  }
  int status;
  ck_assert_int_eq(waitpid(child, &status, 0), child);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x", status);
  ck_tstor_ok(tstor_storage_fill(s, 2)); /* the parent's connection is untouched */
  tstor_storage_release(s);
  tstor_context_close(ctx);
  ck_assert_int_eq(server_stop(&a), 0);
}
END_TEST

/* ------------------------------------------------------ streams, events */

/* Fills a host storage with `value`, all bytes. */
static tstor_storage *host_filled(tstor_context *ctx, size_t n, int value) {
  tstor_storage *s;
  ck_tstor_ok(tstor_storage_new(ctx, dev(ctx, "cpu"), n, &s));
  memset(tstor_storage_data(s), value, n);
  return s;
}

/* Work queued on a remote stream runs in queue order, after the call that
 * queued it returned: with the server stopped (SIGSTOP) the calls still return
 * at once and the work waits, then completes when the server goes on. */
START_TEST(streams_queue_work_in_order) {
  test_server a;
  server_start(&a, fixture.secret, "streams");
  tstor_context *ctx = open_client_of(&a, 20000);
  tstor_device r0 = dev(ctx, "remote:0");
  enum { ROUNDS = 24 };
  const size_t n = 1 << 20;
  tstor_storage *remote, *in[ROUNDS], *out[ROUNDS];
  ck_tstor_ok(tstor_storage_new(ctx, r0, n, &remote));
  for (int k = 0; k < ROUNDS; k++) {
    in[k] = host_filled(ctx, n, k + 1);
    out[k] = host_filled(ctx, n, 0);
  }
  tstor_stream *st;
  tstor_event *ev;
  ck_tstor_ok(tstor_stream_new(ctx, r0, &st));
  ck_tstor_ok(tstor_event_new(ctx, r0, &ev));

  tstor_storage *remote2;
  ck_tstor_ok(tstor_storage_new(ctx, r0, n, &remote2));
  ck_assert_int_eq(kill(a.pid, SIGSTOP), 0);
  /* first a copy the stopped peer itself must make (whatever the transport:
   * shared-memory puts and gets would not need it), so what follows waits */
  ck_tstor_ok(tstor_storage_copy_async(remote2, remote, st));
  /* every round writes the one remote block, then reads it back: only queue
   * order gives each out[k] its own in[k] */
  for (int k = 0; k < ROUNDS; k++) {
    ck_tstor_ok(tstor_storage_copy_async(remote, in[k], st));
    ck_tstor_ok(tstor_storage_copy_async(out[k], remote, st));
  }
  ck_tstor_ok(tstor_event_record(ev, st));
  ck_tstor_err(tstor_event_query(ev), TSTOR_EAGAIN);
  ck_assert_int_eq(((unsigned char *)tstor_storage_data(out[ROUNDS - 1]))[0], 0);
  ck_assert_int_eq(kill(a.pid, SIGCONT), 0);
  ck_tstor_ok(tstor_event_synchronize(ev));
  ck_tstor_ok(tstor_event_query(ev));
  for (int k = 0; k < ROUNDS; k++) {
    const unsigned char *o = tstor_storage_data(out[k]);
    ck_assert_msg(o[0] == k + 1 && o[n - 1] == k + 1 && memcmp(o, tstor_storage_data(in[k]), n) == 0,
                  "round %d read back %d", k, o[0]);
  }

  /* a second stream waits for an event of the first without blocking the host */
  tstor_stream *st2;
  ck_tstor_ok(tstor_stream_new(ctx, r0, &st2));
  ck_assert_int_eq(kill(a.pid, SIGSTOP), 0);
  ck_tstor_ok(tstor_storage_copy_async(remote, in[3], st));
  ck_tstor_ok(tstor_event_record(ev, st));
  ck_tstor_ok(tstor_stream_wait_event(st2, ev));
  ck_tstor_ok(tstor_storage_copy_async(out[0], remote, st2));
  ck_assert_int_eq(kill(a.pid, SIGCONT), 0);
  ck_tstor_ok(tstor_stream_synchronize(st2));
  ck_assert_int_eq(((unsigned char *)tstor_storage_data(out[0]))[n / 2], 4);
  ck_tstor_ok(tstor_synchronize(ctx, r0));

  /* a bad argument fails the call that queues it, not a later one */
  tstor_storage *small;
  ck_tstor_ok(tstor_storage_new(ctx, r0, 16, &small));
  ck_assert_int_ne(tstor_storage_copy_async(small, in[0], st), 0);
  ck_tstor_ok(tstor_stream_synchronize(st));
  tstor_storage_release(small);

  tstor_stream_free(st2);
  tstor_stream_free(st);
  tstor_event_free(ev);
  for (int k = 0; k < ROUNDS; k++) {
    tstor_storage_release(in[k]);
    tstor_storage_release(out[k]);
  }
  tstor_storage_release(remote2);
  tstor_storage_release(remote);
  tstor_context_close(ctx);
  ck_assert_int_eq(server_stop(&a), 0);
  ck_assert(!file_has(a.log, "block(s)")); /* the client freed every block itself */
}
END_TEST

/* A job that fails on the stream's worker stops the stream: the jobs after it
 * are skipped, events after it and the next synchronize report the failure,
 * naming the peer, and the synchronize after that is clean. */
START_TEST(stream_failure_is_reported_once) {
  test_server a;
  server_start(&a, fixture.secret, "streamfail");
  char peers[64];
  snprintf(peers, sizeof peers, "127.0.0.1:%u", a.port);
  tstor_context *ctx = open_client(peers, fixture.secret, 1000);
  tstor_device r0 = dev(ctx, "remote:0");
  const size_t n = 1 << 20;
  tstor_storage *remote, *in = host_filled(ctx, n, 5), *out = host_filled(ctx, n, 0);
  ck_tstor_ok(tstor_storage_new(ctx, r0, n, &remote));
  tstor_stream *st;
  tstor_event *before, *after;
  ck_tstor_ok(tstor_stream_new(ctx, r0, &st));
  ck_tstor_ok(tstor_event_new(ctx, r0, &before));
  ck_tstor_ok(tstor_event_new(ctx, r0, &after));
  ck_tstor_ok(tstor_storage_copy_async(remote, in, st));
  ck_tstor_ok(tstor_event_record(before, st));
  ck_tstor_ok(tstor_event_synchronize(before));

  ck_assert_int_eq(kill(a.pid, SIGKILL), 0);
  waitpid(a.pid, NULL, 0);
  a.pid = 0;
  ck_tstor_ok(tstor_storage_copy_async(out, remote, st));
  ck_tstor_ok(tstor_storage_copy_async(remote, in, st));
  ck_tstor_ok(tstor_storage_copy_async(out, remote, st));
  ck_tstor_ok(tstor_event_record(after, st));

  double t0 = mono_s();
  ck_tstor_err(tstor_event_synchronize(after), TSTOR_EIO);
  ck_assert_double_lt(mono_s() - t0, 1.0 + 3.0);
  ck_last_error_has("work queued on a stream failed");
  ck_last_error_has(peers);
  ck_tstor_ok(tstor_event_query(before)); /* the failure came after it */
  ck_tstor_err(tstor_stream_synchronize(st), TSTOR_EIO);
  ck_last_error_has("2 later jobs on the stream not run");
  ck_tstor_ok(tstor_stream_synchronize(st));
  ck_assert_int_eq(((unsigned char *)tstor_storage_data(out))[0], 0);

  tstor_event_free(after);
  tstor_event_free(before);
  tstor_stream_free(st);
  tstor_storage_release(remote);
  tstor_storage_release(out);
  tstor_storage_release(in);
  tstor_context_close(ctx);
}
END_TEST

/* tstor_device_describe names the peer and the peer's device each remote
 * device stands for, and says when the peer is gone; `tstor info` prints it. */
START_TEST(devices_describe_their_peer) {
  test_server a, b;
  server_start(&a, fixture.secret, "describe-a");
  server_start(&b, fixture.secret, "describe-b");
  char peers[128];
  tstor_context *ctx = open_client_of_two(&a, &b, 1000, peers);
  char line[256], want[128];
  ck_tstor_ok(tstor_device_describe(ctx, dev(ctx, "remote:0"), line, sizeof line));
  snprintf(want, sizeof want, "remote:0 -> 127.0.0.1:%u cpu:0", a.port);
  ck_assert_str_eq(line, want);
  ck_tstor_ok(tstor_device_describe(ctx, dev(ctx, "remote:1"), line, sizeof line));
  snprintf(want, sizeof want, "remote:1 -> 127.0.0.1:%u cpu:0", b.port);
  ck_assert_str_eq(line, want);
  ck_tstor_ok(tstor_device_describe(ctx, dev(ctx, "cpu"), line, sizeof line));
  ck_assert_str_eq(line, "cpu:0");
  /* too small for the description, though not for the name: nothing half-written */
  ck_tstor_err(tstor_device_describe(ctx, dev(ctx, "remote:0"), line, 12), TSTOR_ERANGE);
  ck_assert_str_eq(line, "");
  ck_tstor_err(tstor_device_describe(ctx, (tstor_device){dev(ctx, "remote:0").type, 2}, line,
                                     sizeof line),
               TSTOR_ENODEV);

  /* its properties: the peer and its device as the id, and the total memory
   * the server announced (its cpu's, this machine's); free memory is not on
   * the wire */
  tstor_device_properties rp = TSTOR_DEVICE_PROPERTIES_INIT, cp = TSTOR_DEVICE_PROPERTIES_INIT;
  ck_tstor_ok(tstor_device_get_properties(ctx, dev(ctx, "remote:1"), &rp));
  ck_tstor_ok(tstor_device_get_properties(ctx, dev(ctx, "cpu"), &cp));
  ck_assert_uint_eq(rp.reported, TSTOR_PROP_TOTAL | TSTOR_PROP_ID);
  ck_assert_uint_eq(rp.total_bytes, cp.total_bytes);
  snprintf(want, sizeof want, "127.0.0.1:%u cpu:0", b.port);
  ck_assert_str_eq(rp.id, want);
  ck_assert_uint_ne(rp.capabilities & TSTOR_DEVICE_CAP_PROPERTIES, 0);

  /* the same through `tstor info` */
  char ini[2048], path[256], cmd[1024], out[300];
  client_config(ini, sizeof ini, peers, fixture.secret, 1000, 0);
  snprintf(path, sizeof path, "%s/remote-describe-%d.ini", TSTOR_TEST_BUILDDIR, (int)getpid());
  snprintf(out, sizeof out, "%s.out", path);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(ini, f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "%s info --config %s > %s 2>&1", REMOTE_TSTOR, path, out);
  ck_assert_int_eq(system(cmd), 0);
  snprintf(want, sizeof want, "remote:1 -> 127.0.0.1:%u cpu:0", b.port);
  ck_assert_msg(file_has(out, want), "tstor info does not show '%s' (see %s)", want, out);
  unlink(path);
  unlink(out);

  /* a peer that is gone says so */
  ck_assert_int_eq(kill(b.pid, SIGKILL), 0);
  waitpid(b.pid, NULL, 0);
  b.pid = 0;
  tstor_storage *s = NULL;
  ck_assert_int_ne(tstor_storage_new(ctx, dev(ctx, "remote:1"), 4096, &s), 0);
  ck_tstor_ok(tstor_device_describe(ctx, dev(ctx, "remote:1"), line, sizeof line));
  ck_assert_msg(strstr(line, "unusable"), "%s", line);
  tstor_context_close(ctx);
  ck_assert_int_eq(server_stop(&a), 0);
}
END_TEST

static Suite *remote_suite(void) {
  Suite *s = suite_create("remote");
  TCase *tc = tcase_create("remote");
  tcase_add_checked_fixture(tc, setup_secret, teardown_secret);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, every_dtype_round_trips);
  tcase_add_test(tc, wrong_secret_gets_no_device);
  tcase_add_test(tc, secret_files_others_can_read_are_refused);
  tcase_add_test(tc, unreachable_peer_is_reported);
  tcase_add_test(tc, server_killed_mid_copy);
  tcase_add_test(tc, server_stopped_with_blocks_held);
  tcase_add_test(tc, client_memory_is_capped);
  tcase_add_test(tc, fork_child_fails_cleanly);
  tcase_add_test(tc, checkpoint_loads_onto_a_remote_device);
  tcase_add_test(tc, strided_tensor_copies);
  tcase_add_test(tc, streams_queue_work_in_order);
  tcase_add_test(tc, stream_failure_is_reported_once);
  tcase_add_test(tc, devices_describe_their_peer);
  tcase_add_test(tc, staged_devices_are_exported);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tstor_test_run(remote_suite()); }
