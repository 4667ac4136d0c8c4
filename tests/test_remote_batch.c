/* Batched remote copies and the connection's pipeline under them, against
 * `tstor serve` processes each test starts, over TCP and a Unix socket.
 *
 * The pipeline (conn.c, linked in): WRITEs and READs of megabytes, mixed, so
 * that the server blocks writing a READ's bytes while the client has a WRITE's
 * bytes to send: a client that only wrote then would never finish, and this
 * one must, with every byte in place; past its window; a refusal in the middle
 * named by its tag, the peer still usable after.
 *
 * The public API, over TCP, a Unix socket, and a Unix socket with shared
 * memory: 10,000 blocks of 4 KiB each way in one batch; a staged device's
 * bytes through the region's staging block; a region too small for every
 * block; two peers, copies within one and between the two, blocks larger
 * than a request moves; a refused item named; a server killed during a batch. */
#include <pthread.h>

#include "client.h"
#include "remotetest.h"

#define SECRET "correct horse battery staple 42"

static test_files fixture;

static void setup(void) { test_files_make(&fixture, "batch", SECRET "\n"); }

static void teardown(void) { test_files_remove(&fixture); }

static void start(test_server *srv, const char *tag) { server_start_unix(srv, &fixture, tag); }

/* "127.0.0.1:port" or "unix:path". */
static const char *peer_name(const test_server *srv, int over_unix, char *buf, size_t size) {
  if (over_unix)
    snprintf(buf, size, "unix:%s", fixture.unix_sock);
  else
    snprintf(buf, size, "127.0.0.1:%u", srv->port);
  return buf;
}

/* How the library's client reaches the server. */
enum { OVER_TCP, OVER_UNIX, OVER_SHM };

static uint8_t byte_at(size_t i, unsigned seed) {
  return (uint8_t)((i * 2654435761u >> 13) + seed);
}

static void fill_bytes(uint8_t *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = byte_at(i, seed);
}

/* ---------------------------------------------------- the pipeline alone */

static char last_error[1024];

static void quiet_log(tstor_module *m, int level, const char *fmt, ...) {}

static int keep_error(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return code;
}

static const tstor_registrar test_registrar = {
    .struct_size = sizeof(tstor_registrar),
    .abi_version = TSTOR_ABI_VERSION,
    .log = quiet_log,
    .set_error = keep_error,
};

/* The module's state as far as a peer needs it, and one connected peer. */
static peer *connect_to(remote *r, const char *name) {
  memset(r, 0, sizeof *r);
  r->reg = &test_registrar;
  r->timeout_ms = 20000;
  r->pid = getpid();
  char why[256];
  ck_assert_int_eq(tsr_secret_read(fixture.secret, &r->secret, &r->secret_len, why, sizeof why), 0);
  peer *p = peer_new(r, name);
  ck_assert_ptr_nonnull(p);
  int rc = peer_connect(p);
  ck_assert_msg(rc == 0, "connecting to %s: %s", name, p->failure);
  return p;
}

static void disconnect(remote *r, peer *p) {
  peer_close(p);
  tsr_secret_free(r->secret, r->secret_len);
}

static uint64_t alloc_on(peer *p, uint32_t device, uint64_t n) {
  uint8_t req[TSR_MAX_MESSAGE];
  tsr_msg reply;
  int rc = peer_rpc(p, (int)device, req, tsr_encode_alloc(req, 0, device, n), &reply);
  ck_assert_msg(rc == 0, "ALLOC: %s", last_error);
  return reply.handle;
}

#define PIECES 24

/* WRITE piece k (k MiB + k bytes, some megabytes each), then READ piece k - 1
 * back, all in one pipeline: the server blocks writing READ bytes while the
 * client still has WRITE bytes to send, on device `device` (0: cpu, 1: the
 * staged hpu). */
static void mixed_pipeline(int over_unix, uint32_t device) {
  test_server srv;
  start(&srv, over_unix ? "pipe-unix" : "pipe-tcp");
  remote r;
  char name[160];
  peer *p = connect_to(&r, peer_name(&srv, over_unix, name, sizeof name));
  size_t size[PIECES], at[PIECES + 1] = {0};
  for (int k = 0; k < PIECES; k++) {
    size[k] = ((size_t)(k % 4) << 20) + 3 * (size_t)k + 1 + (k % 3 == 0 ? 100 : 0);
    at[k + 1] = at[k] + size[k];
  }
  uint64_t block = alloc_on(p, device, at[PIECES]);
  uint8_t *out = malloc(at[PIECES]), *back = calloc(1, at[PIECES]);
  fill_bytes(out, at[PIECES], 7);
  uint8_t req[TSR_MAX_MESSAGE];
  pthread_mutex_lock(&p->mu);
  pipe_begin(p);
  for (int k = 0; k <= PIECES; k++) {
    if (k < PIECES)
      ck_assert_int_eq(
          pipe_send(p, 0, req, tsr_encode_transfer(req, TSR_WRITE, 0, block, at[k], size[k]),
                    out + at[k], NULL, size[k], NULL, (size_t)k),
          0);
    if (k > 0)
      ck_assert_int_eq(
          pipe_send(p, 0, req, tsr_encode_transfer(req, TSR_READ, 0, block, at[k - 1], size[k - 1]),
                    NULL, back + at[k - 1], size[k - 1], NULL, (size_t)k),
          0);
  }
  size_t tag = 99;
  int rc = pipe_end(p, &tag);
  pthread_mutex_unlock(&p->mu);
  ck_assert_msg(rc == 0, "the pipeline: %s (tag %zu)", last_error, tag);
  ck_assert(memcmp(out, back, at[PIECES]) == 0);
  free(out);
  free(back);
  disconnect(&r, p);
  ck_assert_int_eq(server_stop(&srv), 0);
}

START_TEST(mixed_reads_and_writes_over_tcp) { mixed_pipeline(0, 0); }
END_TEST

START_TEST(mixed_reads_and_writes_over_unix) { mixed_pipeline(1, 0); }
END_TEST

START_TEST(mixed_reads_and_writes_staged) { mixed_pipeline(1, 1); }
END_TEST

/* More requests and READ bytes than the window holds; a refusal at tag 1700
 * names it, the requests after it are not sent, and the peer goes on. */
START_TEST(past_the_window_and_a_refusal) {
  test_server srv;
  start(&srv, "window");
  remote r;
  char name[160];
  peer *p = connect_to(&r, peer_name(&srv, 1, name, sizeof name));
  const size_t n = 3000, piece = 64 << 10; /* 3 RPIPE_DEPTHs, 3 RPIPE_READ_BYTES */
  uint64_t block = alloc_on(p, 0, piece * 4);
  uint8_t *src = malloc(piece * 4), *dst = malloc(n * piece);
  fill_bytes(src, piece * 4, 3);
  uint8_t req[TSR_MAX_MESSAGE];
  pthread_mutex_lock(&p->mu);
  pipe_begin(p);
  ck_assert_int_eq(pipe_send(p, 0, req, tsr_encode_transfer(req, TSR_WRITE, 0, block, 0, piece * 4),
                             src, NULL, piece * 4, NULL, 0),
                   0);
  for (size_t k = 0; k < n; k++)
    ck_assert_int_eq(
        pipe_send(p, 0, req, tsr_encode_transfer(req, TSR_READ, 0, block, (k % 4) * piece, piece),
                  NULL, dst + k * piece, piece, NULL, k),
        0);
  ck_assert_int_eq(pipe_end(p, NULL), 0);
  for (size_t k = 0; k < n; k++)
    ck_assert(memcmp(dst + k * piece, src + (k % 4) * piece, piece) == 0);

  pipe_begin(p);
  int rc = 0;
  size_t sent = 0;
  for (size_t k = 0; k < n && rc == 0; k++, sent++) {
    uint64_t handle = k == 1700 ? block + 1 : block; /* another generation: no such block */
    rc = pipe_send(p, 0, req, tsr_encode_transfer(req, TSR_READ, 0, handle, 0, 4096), NULL,
                   dst + k * 4096, 4096, NULL, k);
  }
  size_t tag = 0;
  int end = pipe_end(p, &tag);
  pthread_mutex_unlock(&p->mu);
  ck_assert_int_ne(end, 0);
  ck_assert_uint_eq(tag, 1700);
  ck_assert_msg(strstr(last_error, "no such block"), "%s", last_error);
  ck_assert(!p->failed);
  ck_assert_uint_lt(sent, n);          /* it stopped queuing once it knew */
  uint64_t again = alloc_on(p, 0, 64); /* the peer is usable */
  ck_assert_uint_ne(again, 0);
  free(src);
  free(dst);
  disconnect(&r, p);
  ck_assert_int_eq(server_stop(&srv), 0);
}
END_TEST

/* ------------------------------------------------------- the public API */

/* A client of `peers`; with shared memory on Unix sockets unless told no. */
static tstor_context *open_client_shm(const char *peers, int shared_memory) {
  char ini[2048];
  client_config(ini, sizeof ini, peers, fixture.secret, 20000, 0);
  if (!shared_memory) strcat(ini, "shared_memory = no\n");
  tstor_context *ctx = NULL;
  ck_tstor_ok(tstor_context_open_string(ini, "batch.ini", &ctx));
  return ctx;
}

static tstor_context *open_client(const char *peers) { return open_client_shm(peers, 1); }

static tstor_context *open_over(const test_server *srv, int how) {
  char name[160];
  return open_client_shm(peer_name(srv, how != OVER_TCP, name, sizeof name), how == OVER_SHM);
}

static tstor_device dev(tstor_context *ctx, const char *name) {
  tstor_device d;
  ck_tstor_ok(tstor_device_parse(ctx, name, &d));
  return d;
}

static tstor_storage *new_storage(tstor_context *ctx, const char *device, size_t n) {
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, dev(ctx, device), n, &s));
  return s;
}

/* 10,000 blocks of 4 KiB out to remote:0 in one batch, scattered, and back
 * into another order. */
static void ten_thousand(int how) {
  test_server srv;
  start(&srv, "tenk");
  tstor_context *ctx = open_over(&srv, how);
  const size_t n = 10000, bs = 4096;
  tstor_storage *h = new_storage(ctx, "cpu", n * bs), *back = new_storage(ctx, "cpu", n * bs);
  tstor_storage *r = new_storage(ctx, "remote:0", n * bs);
  fill_bytes(tstor_storage_data(h), n * bs, 11);
  tstor_copy_item *items = malloc(n * sizeof *items);
  for (size_t k = 0; k < n; k++) /* 7919 is prime to 10,000 */
    items[k] = (tstor_copy_item){r, (k * 7919 % n) * bs, h, k * bs, bs};
  ck_tstor_ok(tstor_storage_copy_batch(items, n));
  for (size_t k = 0; k < n; k++) items[k] = (tstor_copy_item){back, k * bs, r, k * bs, bs};
  ck_tstor_ok(tstor_storage_copy_batch(items, n));
  const uint8_t *hb = tstor_storage_data(h), *bb = tstor_storage_data(back);
  for (size_t k = 0; k < n; k++)
    ck_assert_msg(memcmp(bb + (k * 7919 % n) * bs, hb + k * bs, bs) == 0, "block %zu", k);
  free(items);
  tstor_storage_release(r);
  tstor_storage_release(back);
  tstor_storage_release(h);
  tstor_context_close(ctx);
  ck_assert_int_eq(server_stop(&srv), 0);
}

START_TEST(ten_thousand_blocks_over_tcp) { ten_thousand(OVER_TCP); }
END_TEST

START_TEST(ten_thousand_blocks_over_unix) { ten_thousand(OVER_UNIX); }
END_TEST

START_TEST(ten_thousand_blocks_in_shared_memory) { ten_thousand(OVER_SHM); }
END_TEST

/* A staged device (the server's hpu:0) over shared memory: its bytes pass
 * through the staging block's halves, many pieces each way, at odd offsets,
 * single copies and a batch that mixes them with blocks in the region. Over a
 * socket too, for the same bytes. */
static void staged_through(int how) {
  test_server srv;
  start(&srv, "staged");
  tstor_context *ctx = open_over(&srv, how);
  const size_t n = (9 << 20) + 333;
  tstor_storage *h = new_storage(ctx, "cpu", n), *back = new_storage(ctx, "cpu", n);
  tstor_storage *staged = new_storage(ctx, "remote:1", n + 4096);
  tstor_storage *mapped = new_storage(ctx, "remote:0", n);
  uint8_t *hb = tstor_storage_data(h), *bb = tstor_storage_data(back);
  fill_bytes(hb, n, 9);
  tstor_storage *v = NULL, *w = NULL;
  ck_tstor_ok(tstor_storage_view(staged, 4095, n, &v));
  ck_tstor_ok(tstor_storage_copy(v, h));
  ck_tstor_ok(tstor_storage_copy(back, v));
  ck_assert(memcmp(bb, hb, n) == 0);
  /* a batch: pieces of the host into both, then both back, crossed */
  memset(bb, 0, n);
  const size_t k = 7, piece = n / k;
  tstor_copy_item items[2 * 7];
  for (size_t i = 0; i < k; i++) {
    items[2 * i] = (tstor_copy_item){staged, i * piece, h, i * piece, piece};
    items[2 * i + 1] = (tstor_copy_item){mapped, i * piece, h, i * piece, piece};
  }
  ck_tstor_ok(tstor_storage_copy_batch(items, 2 * k));
  for (size_t i = 0; i < k; i++) {
    tstor_storage *from = i % 2 ? staged : mapped;
    items[i] = (tstor_copy_item){back, i * piece, from, i * piece, piece};
  }
  ck_tstor_ok(tstor_storage_copy_batch(items, k));
  ck_assert(memcmp(bb, hb, k * piece) == 0);
  /* remote to remote within the peer: a block in the region and a staged one */
  ck_tstor_ok(tstor_storage_view(staged, 0, n, &w));
  ck_tstor_ok(tstor_storage_copy(mapped, w));
  ck_tstor_ok(tstor_storage_copy(back, mapped));
  ck_tstor_ok(tstor_storage_copy(h, w));
  ck_assert(memcmp(bb, hb, n) == 0);
  tstor_storage_release(w);
  tstor_storage_release(v);
  tstor_storage_release(mapped);
  tstor_storage_release(staged);
  tstor_storage_release(back);
  tstor_storage_release(h);
  tstor_context_close(ctx);
  ck_assert_int_eq(server_stop(&srv), 0);
}

START_TEST(staged_in_shared_memory) { staged_through(OVER_SHM); }
END_TEST

START_TEST(staged_over_a_socket) { staged_through(OVER_UNIX); }
END_TEST

/* A region too small for every block: 1-byte blocks take a line each, so past
 * 16,384 of them in a 1 MiB region the server places them outside it, and the
 * staging block does not fit the cap; every block still moves its bytes. */
START_TEST(blocks_past_a_full_region) {
  test_server srv;
  char listen[128];
  snprintf(listen, sizeof listen, "unix:%s", fixture.unix_sock);
  const char *extra[] = {"--listen", listen, "--max-client-mb", "1", NULL};
  ck_assert_int_eq(server_start_argv(&srv, SERVER_CPU_HPU, fixture.secret, "full", extra), 0);
  tstor_context *ctx = open_over(&srv, OVER_SHM);
  enum { N = 17000 };
  tstor_storage **r = malloc(N * sizeof *r);
  tstor_storage *h = new_storage(ctx, "cpu", N), *back = new_storage(ctx, "cpu", N);
  fill_bytes(tstor_storage_data(h), N, 3);
  tstor_copy_item *items = malloc(N * sizeof *items);
  for (size_t i = 0; i < N; i++) {
    r[i] = new_storage(ctx, "remote:0", 1);
    items[i] = (tstor_copy_item){r[i], 0, h, i, 1};
  }
  ck_tstor_ok(tstor_storage_copy_batch(items, N));
  for (size_t i = 0; i < N; i++) items[i] = (tstor_copy_item){back, i, r[i], 0, 1};
  ck_tstor_ok(tstor_storage_copy_batch(items, N));
  ck_assert(memcmp(tstor_storage_data(back), tstor_storage_data(h), N) == 0);
  tstor_storage *staged = new_storage(ctx, "remote:1", 100000);
  tstor_storage *big = new_storage(ctx, "cpu", 100000);
  fill_bytes(tstor_storage_data(big), 100000, 4);
  ck_tstor_ok(tstor_storage_copy(staged, big));
  memset(tstor_storage_data(big), 0, 100000);
  ck_tstor_ok(tstor_storage_copy(big, staged));
  for (size_t i = 0; i < 100000; i++)
    ck_assert_uint_eq(((uint8_t *)tstor_storage_data(big))[i], byte_at(i, 4));
  tstor_storage_release(staged);
  tstor_storage_release(big);
  for (size_t i = 0; i < N; i++) tstor_storage_release(r[i]);
  free(r);
  free(items);
  tstor_storage_release(back);
  tstor_storage_release(h);
  tstor_context_close(ctx);
  ck_assert_int_eq(server_stop(&srv), 0);
}
END_TEST

/* Two peers, each with cpu:0 and hpu:0 (remote:0..3): out of the host into
 * every device, between devices of one peer and of two, one block larger than
 * a request moves, and back; the bytes as single copies give them. */
START_TEST(every_path_in_one_batch) {
  test_server a, b;
  start(&a, "paths-a");
  ck_assert_int_eq(server_start_with(&b, SERVER_CPU_HPU, fixture.secret, "paths-b", NULL, NULL), 0);
  char peers[256], one[160];
  snprintf(peers, sizeof peers, "%s, 127.0.0.1:%u", peer_name(&a, 1, one, sizeof one), b.port);
  tstor_context *ctx = open_client(peers);
  const size_t big = CHUNK + (1 << 20) + 5, n = big + (1 << 20);
  static const char *const devs[] = {"remote:0", "remote:1", "remote:2", "remote:3"};
  tstor_storage *h = new_storage(ctx, "cpu", n), *d[4], *back = new_storage(ctx, "cpu", 4 * n);
  fill_bytes(tstor_storage_data(h), n, 5);
  for (int i = 0; i < 4; i++) d[i] = new_storage(ctx, devs[i], n);
  /* everything into remote:0 and remote:2, the big block included */
  tstor_copy_item in[4] = {{d[0], 0, h, 0, n}, {d[2], 0, h, 0, n}};
  ck_tstor_ok(tstor_storage_copy_batch(in, 2));
  /* within peer a (remote:0 -> remote:1), across (remote:2 -> remote:3 is
   * within b; remote:0 -> remote:3 across), in pieces */
  tstor_copy_item on[3] = {
      {d[1], 0, d[0], 0, big}, {d[3], 0, d[2], 0, n / 2}, {d[3], n / 2, d[0], n / 2, n - n / 2}};
  ck_tstor_ok(tstor_storage_copy_batch(on, 3));
  ck_tstor_ok(tstor_storage_copy_batch((tstor_copy_item[]){{d[1], big, d[2], big, n - big}}, 1));
  tstor_copy_item out[4];
  for (int i = 0; i < 4; i++) out[i] = (tstor_copy_item){back, (size_t)i * n, d[i], 0, n};
  ck_tstor_ok(tstor_storage_copy_batch(out, 4));
  for (int i = 0; i < 4; i++)
    ck_assert_msg(
        memcmp((uint8_t *)tstor_storage_data(back) + (size_t)i * n, tstor_storage_data(h), n) == 0,
        "%s differs", devs[i]);
  for (int i = 0; i < 4; i++) tstor_storage_release(d[i]);
  tstor_storage_release(back);
  tstor_storage_release(h);
  tstor_context_close(ctx);
  ck_assert_int_eq(server_stop(&a), 0);
  ck_assert_int_eq(server_stop(&b), 0);
}
END_TEST

/* With the cap nearly taken by a staged block, the first staged transfer
 * finds no room for the server's staging buffer: that item is refused and
 * named, and the peer serves the next batch. */
START_TEST(a_refused_item_is_named) {
  test_server srv;
  ck_assert_int_eq(
      server_start_with(&srv, SERVER_CPU_HPU, fixture.secret, "refused", "--max-client-mb", "1"),
      0);
  char name[160];
  tstor_context *ctx = open_client(peer_name(&srv, 0, name, sizeof name));
  tstor_storage *h = new_storage(ctx, "cpu", 4096), *c = new_storage(ctx, "remote:0", 4096);
  tstor_storage *staged = new_storage(ctx, "remote:1", 900 << 10);
  tstor_copy_item items[6];
  for (int k = 0; k < 6; k++)
    items[k] = k == 3 ? (tstor_copy_item){staged, 0, h, 0, 64}
                      : (tstor_copy_item){c, (size_t)k * 64, h, 0, 64};
  ck_tstor_err(tstor_storage_copy_batch(items, 6), TSTOR_ENOMEM);
  ck_last_error_has("storage_copy_batch: item 3 of 6");
  ck_last_error_has("staging buffer");
  items[3] = (tstor_copy_item){c, 3 * 64, h, 0, 64};
  ck_tstor_ok(tstor_storage_copy_batch(items, 6));
  tstor_storage_release(staged);
  tstor_storage_release(c);
  tstor_storage_release(h);
  tstor_context_close(ctx);
  ck_assert_int_eq(server_stop(&srv), 0);
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

/* Batches until the server is killed: the batch then fails with TSTOR_EIO,
 * naming an item and the peer, within the timeout. (Over shared memory the
 * copies to blocks in the region never talk to the server: the next request
 * that does finds it gone.) */
START_TEST(server_killed_mid_batch) {
  test_server srv;
  start(&srv, "kill-batch");
  char name[160];
  const long timeout_ms = 5000;
  char ini[2048];
  client_config(ini, sizeof ini, peer_name(&srv, 1, name, sizeof name), fixture.secret, timeout_ms,
                0);
  strcat(ini, "shared_memory = no\n");
  tstor_context *ctx;
  ck_tstor_ok(tstor_context_open_string(ini, "kill.ini", &ctx));
  const size_t n = 256, bs = 64 << 10;
  tstor_storage *h = new_storage(ctx, "cpu", n * bs), *r = new_storage(ctx, "remote:0", n * bs);
  tstor_copy_item put[256], get[256];
  for (size_t k = 0; k < n; k++) {
    put[k] = (tstor_copy_item){r, k * bs, h, k * bs, bs};
    get[k] = (tstor_copy_item){h, k * bs, r, k * bs, bs};
  }
  killer k = {srv.pid, 30};
  pthread_t t;
  pthread_create(&t, NULL, kill_later, &k);
  int rc = 0;
  double worst = 0;
  for (int i = 0; i < 100000 && rc == 0; i++) {
    double t0 = mono_s();
    rc = tstor_storage_copy_batch(i % 2 ? get : put, n);
    if (mono_s() - t0 > worst) worst = mono_s() - t0;
  }
  pthread_join(t, NULL);
  waitpid(srv.pid, NULL, 0);
  srv.pid = 0;
  ck_tstor_err(rc, TSTOR_EIO);
  ck_last_error_has("storage_copy_batch: item ");
  ck_last_error_has(name);
  ck_assert_msg(worst < timeout_ms / 1000.0 + 3.0, "a batch took %.1f s", worst);
  tstor_storage_release(r);
  tstor_storage_release(h);
  tstor_context_close(ctx);
}
END_TEST

static Suite *batch_suite(void) {
  Suite *s = suite_create("remote batch");
  TCase *tc = tcase_create("pipeline");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, mixed_reads_and_writes_over_tcp);
  tcase_add_test(tc, mixed_reads_and_writes_over_unix);
  tcase_add_test(tc, mixed_reads_and_writes_staged);
  tcase_add_test(tc, past_the_window_and_a_refusal);
  suite_add_tcase(s, tc);
  tc = tcase_create("batches");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, ten_thousand_blocks_over_tcp);
  tcase_add_test(tc, ten_thousand_blocks_over_unix);
  tcase_add_test(tc, ten_thousand_blocks_in_shared_memory);
  tcase_add_test(tc, staged_in_shared_memory);
  tcase_add_test(tc, staged_over_a_socket);
  tcase_add_test(tc, blocks_past_a_full_region);
  tcase_add_test(tc, every_path_in_one_batch);
  tcase_add_test(tc, a_refused_item_is_named);
  tcase_add_test(tc, server_killed_mid_batch);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tstor_test_run(batch_suite()); }
