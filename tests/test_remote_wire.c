/* `tstor serve` against a hostile client: a raw UCX client of this test
 * sends crafted messages (cut short, wrong magic or version, unknown types,
 * requests before authentication, a wrong MAC, handles and ranges it does not
 * own, mutated bytes) and checks that each gets an error reply, that the
 * server stays up, that one client never reaches another's block, and that
 * a client that drops its connection has its blocks freed (the server's
 * stats say so). */
#include <pthread.h>
#include <stdatomic.h>
#include <ucp/api/ucp.h>

#include "protocol.h"
#include "remotetest.h"

#define SECRET "wire test secret, sixteen bytes or more"
#define TSTOR_ABI_VERSION_FOR_TEST 0x10002u /* the liar claims backend ABI 1.2 */

typedef struct wire {
  ucp_context_h ucp;
  ucp_worker_h worker;
  ucp_ep_h ep;
  int have_reply, failed;
  size_t reply_len;
  uint8_t reply[TSR_MAX_MESSAGE];
  uint8_t buf[TSR_MAX_MESSAGE];
} wire;

static ucs_status_t on_reply(void *arg, const void *header, size_t header_length, void *data,
                             size_t length, const ucp_am_recv_param_t *param) {
  wire *w = arg;
  (void)header, (void)header_length, (void)param;
  ck_assert_uint_le(length, TSR_MAX_MESSAGE);
  memcpy(w->reply, data, length);
  w->reply_len = length;
  w->have_reply = 1;
  return UCS_OK;
}

static void on_error(void *arg, ucp_ep_h ep, ucs_status_t status) {
  (void)ep, (void)status;
  ((wire *)arg)->failed = 1;
}

static void wire_open(wire *w, unsigned port) {
  memset(w, 0, sizeof *w);
  ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                         .features = UCP_FEATURE_AM | UCP_FEATURE_RMA};
  ck_assert_int_eq(ucp_init(&params, NULL, &w->ucp), UCS_OK);
  ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                            .thread_mode = UCS_THREAD_MODE_SINGLE};
  ck_assert_int_eq(ucp_worker_create(w->ucp, &wp, &w->worker), UCS_OK);
  ucp_am_handler_param_t am = {
      .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG,
      .id = TSR_AM_REPLY,
      .cb = on_reply,
      .arg = w,
  };
  ck_assert_int_eq(ucp_worker_set_am_recv_handler(w->worker, &am), UCS_OK);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  ucp_ep_params_t ep = {
      .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
      .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
      .sockaddr = {.addr = (struct sockaddr *)&sa, .addrlen = sizeof sa},
      .err_mode = UCP_ERR_HANDLING_MODE_PEER,
      .err_handler = {.cb = on_error, .arg = w},
  };
  ck_assert_int_eq(ucp_ep_create(w->worker, &ep, &w->ep), UCS_OK);
}

static void wire_wait(wire *w, ucs_status_ptr_t req) {
  ck_assert(!UCS_PTR_IS_ERR(req));
  if (!req) return;
  double deadline = mono_s() + 10;
  while (ucp_request_check_status(req) == UCS_INPROGRESS && mono_s() < deadline)
    ucp_worker_progress(w->worker);
  ck_assert_int_eq(ucp_request_check_status(req), UCS_OK);
  ucp_request_free(req);
}

/* Closes the connection: with bye first, or dropped (as a crash would). */
static void wire_close(wire *w, int force) {
  ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                               .flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0};
  ucs_status_ptr_t req = ucp_ep_close_nbx(w->ep, &param);
  if (UCS_PTR_IS_PTR(req)) {
    double deadline = mono_s() + 5;
    while (ucp_request_check_status(req) == UCS_INPROGRESS && mono_s() < deadline)
      ucp_worker_progress(w->worker);
    ucp_request_free(req);
  }
  ucp_worker_destroy(w->worker);
  ucp_cleanup(w->ucp);
}

/* Sends len raw bytes and waits for the reply, decoded into *m; returns its
 * status (0 for success), and checks that the reply itself is well formed. */
static int wire_call(wire *w, const void *msg, size_t len, tsr_msg *m) {
  w->have_reply = 0;
  ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                               .flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER};
  wire_wait(w, ucp_am_send_nbx(w->ep, TSR_AM_REQUEST, NULL, 0, msg, len, &param));
  double deadline = mono_s() + 10;
  while (!w->have_reply && !w->failed && mono_s() < deadline) ucp_worker_progress(w->worker);
  ck_assert_msg(w->have_reply, "no reply (connection %s)", w->failed ? "failed" : "alive");
  char why[200];
  ck_assert_msg(tsr_decode(w->reply, w->reply_len, 1, m, why, sizeof why) == 0, "reply: %s", why);
  return m->status;
}

/* hello and auth with the given secret; returns the auth reply's status. */
static int wire_auth(wire *w, const char *secret, tsr_msg *m) {
  uint8_t cnonce[TSR_NONCE_SIZE], snonce[TSR_NONCE_SIZE], mac[TSR_MAC_SIZE];
  ck_assert_int_eq(tsr_random(cnonce, sizeof cnonce), 0);
  ck_assert_int_eq(wire_call(w, w->buf, tsr_encode_hello(w->buf, 1, 0x10002, cnonce), m), 0);
  memcpy(snonce, m->nonce, sizeof snonce);
  ck_assert_int_eq(tsr_mac((const uint8_t *)secret, strlen(secret), "client", snonce, cnonce, mac),
                   0);
  int st = wire_call(w, w->buf, tsr_encode_auth(w->buf, 2, mac), m);
  if (st == 0) {
    uint8_t expect[TSR_MAC_SIZE];
    tsr_mac((const uint8_t *)secret, strlen(secret), "server", cnonce, snonce, expect);
    ck_assert(tsr_mac_equal(expect, m->mac));
  }
  return st;
}

static char secret_path[256];

START_TEST(crafted_messages_get_error_replies) {
  snprintf(secret_path, sizeof secret_path, "%s/remote-wire-secret-%d", TSTOR_TEST_BUILDDIR,
           (int)getpid());
  write_secret(secret_path, SECRET, 0600);
  test_server srv;
  ck_assert_int_eq(
      server_start_with(&srv, SERVER_CPU_HPU, secret_path, "wire", "--max-client-mb", "4"), 0);
  wire a, b;
  tsr_msg m;
  uint8_t raw[TSR_MAX_MESSAGE + 64];
  wire_open(&a, srv.port);

  /* --- before authentication */
  memset(raw, 0x5a, sizeof raw);
  ck_assert_int_eq(wire_call(&a, raw, 5, &m), TSR_ST_BADMSG); /* shorter than a header */
  ck_assert(strstr(m.text, "shorter") != NULL);
  ck_assert_int_eq(wire_call(&a, raw, TSR_MAX_MESSAGE + 64, &m), TSR_ST_BADMSG); /* too long */
  ck_assert(strstr(m.text, "longer") != NULL);
  size_t n = tsr_encode_stats(raw, 7, 0);
  raw[0] ^= 1; /* magic */
  ck_assert_int_eq(wire_call(&a, raw, n, &m), TSR_ST_BADMSG);
  raw[0] ^= 1;
  raw[4] = 99; /* version */
  ck_assert_int_eq(wire_call(&a, raw, n, &m), TSR_ST_VERSION);
  raw[4] = TSR_PROTO_VERSION;
  raw[6] = 0x55; /* unknown type */
  ck_assert_int_eq(wire_call(&a, raw, n, &m), TSR_ST_BADMSG);
  raw[6] = TSR_STATS | TSR_REPLY; /* a reply where a request belongs */
  ck_assert_int_eq(wire_call(&a, raw, n, &m), TSR_ST_BADMSG);
  raw[6] = TSR_STATS;
  raw[12] = 1; /* a request with a status */
  ck_assert_int_eq(wire_call(&a, raw, n, &m), TSR_ST_BADMSG);
  raw[12] = 0;
  ck_assert_int_eq(wire_call(&a, raw, n + 1, &m), TSR_ST_BADMSG); /* a byte too many */
  ck_assert_int_eq(wire_call(&a, raw, n - 1, &m), TSR_ST_BADMSG); /* a byte too few */
  ck_assert_int_eq(wire_call(&a, raw, n, &m), TSR_ST_NOSESSION);  /* well formed, too early */
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_alloc(raw, 8, 0, 4096), &m), TSR_ST_NOSESSION);
  uint8_t zeros[TSR_MAC_SIZE] = {0};
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_auth(raw, 9, zeros), &m), TSR_ST_BADMSG);
  ck_assert_uint_eq(m.id, 9); /* replies answer the request's id */

  /* a wrong secret is denied, and a second guess needs a new hello */
  ck_assert_int_eq(wire_auth(&a, "not the secret, but long enough", &m), TSR_ST_DENIED);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_auth(raw, 10, zeros), &m), TSR_ST_BADMSG);
  ck_assert_int_eq(wire_auth(&a, SECRET, &m), 0);
  ck_assert_uint_ge(m.ndevices, 1);
  ck_assert_str_eq(m.devices[0].name, "cpu:0");

  /* --- after: every field checked against what this client owns */
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_alloc(raw, 11, 99, 4096), &m), TSR_ST_NODEV);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_alloc(raw, 12, 0, 0), &m), TSR_ST_INVAL);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_alloc(raw, 13, 0, UINT64_MAX), &m),
                   TSR_ST_INVAL);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_alloc(raw, 14, 0, 5 << 20), &m), TSR_ST_QUOTA);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_alloc(raw, 15, 0, 4096), &m), 0);
  uint64_t h = m.handle;
  ck_assert_uint_gt(m.rkey_len, 0);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_free(raw, 16, h + 1), &m), TSR_ST_NOHANDLE);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_free(raw, 17, h ^ (1ull << 40)), &m),
                   TSR_ST_NOHANDLE); /* a stale generation */
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_free(raw, 18, 0), &m), TSR_ST_NOHANDLE);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_copy(raw, 19, h, 4000, h, 0, 200), &m),
                   TSR_ST_RANGE);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_copy(raw, 20, h, 0, h, UINT64_MAX, 2), &m),
                   TSR_ST_RANGE); /* offset + length overflows */
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_copy(raw, 21, h, 0, h, 100, 3996), &m), 0);
  uint8_t pat[16] = {1, 2, 3};
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_fill(raw, 22, h, 0, 12, 3, pat), &m),
                   TSR_ST_INVAL);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_fill(raw, 23, h, 0, 10, 4, pat), &m),
                   TSR_ST_INVAL);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_fill(raw, 24, h, 0, 12, 32, pat), &m),
                   TSR_ST_INVAL);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_fill(raw, 25, h, 4092, 8, 4, pat), &m),
                   TSR_ST_RANGE);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_fill(raw, 26, h, 4088, 8, 4, pat), &m), 0);
  /* strided copies: a 2x2 transpose of 4-byte elements, then bad descriptors */
  int64_t sz[2] = {2, 2}, ds[2] = {8, 4}, ss[2] = {4, 8};
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_copy_strided(raw, 40, h, 0, h, 64, 4, 2, sz, ds,
                                                              ss), &m), 0);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_copy_strided(raw, 41, h, 4088, h, 0, 4, 2, sz,
                                                              ds, ss), &m), TSR_ST_RANGE);
  int64_t huge[2] = {INT64_MAX, 2}, zero[2] = {0, 0};
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_copy_strided(raw, 42, h, 0, h, 0, 4, 2, huge,
                                                              ds, ss), &m), TSR_ST_RANGE);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_copy_strided(raw, 43, h, 0, h, 0, 4, 2, sz,
                                                              zero, zero), &m), TSR_ST_INVAL);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_copy_strided(raw, 44, h, 0, h, 0, 0, 2, sz, ds,
                                                              ss), &m), TSR_ST_INVAL);
  n = tsr_encode_copy_strided(raw, 45, h, 0, h, 0, 4, 1, sz, ds, ss);
  raw[TSR_HEADER_SIZE + 36] = 0; /* ndim 0 */
  ck_assert_int_eq(wire_call(&a, raw, n - 24, &m), TSR_ST_BADMSG);
  raw[TSR_HEADER_SIZE + 36] = 65;
  ck_assert_int_eq(wire_call(&a, raw, n, &m), TSR_ST_BADMSG);
  raw[TSR_HEADER_SIZE + 36] = 2; /* says 2, carries 1 */
  ck_assert_int_eq(wire_call(&a, raw, n, &m), TSR_ST_BADMSG);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_stats(raw, 27, 5), &m), TSR_ST_NODEV);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_stats(raw, 28, 0), &m), 0);
  ck_assert_uint_eq(m.held, 4096);
  ck_assert_uint_eq(m.server_total, 4096);

  /* mutated requests: every one answered, the server stays up */
  uint64_t rng = 12345;
  for (int i = 0; i < 300; i++) {
    size_t len = tsr_encode_copy(raw, 100 + (uint32_t)i, h, 8, h, 16, 64);
    int flips = 1 + (int)(tstor_test_rng(&rng) % 4);
    for (int f = 0; f < flips; f++) { /* the type stays: a mutated bye would end the session */
      size_t at = tstor_test_rng(&rng) % len;
      if (at != 6 && at != 7) raw[at] ^= (uint8_t)(1u << (tstor_test_rng(&rng) % 8));
    }
    if (tstor_test_rng(&rng) % 8 == 0) len = tstor_test_rng(&rng) % (len + 8);
    if (len == 0) len = 1;
    wire_call(&a, raw, len, &m);
  }

  /* --- another client never reaches a's block */
  wire_open(&b, srv.port);
  ck_assert_int_eq(wire_auth(&b, SECRET, &m), 0);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_free(raw, 30, h), &m), TSR_ST_NOHANDLE);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_fill(raw, 31, h, 0, 16, 1, pat), &m),
                   TSR_ST_NOHANDLE);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_stats(raw, 32, 0), &m), 0);
  ck_assert_uint_eq(m.held, 0);
  ck_assert_uint_eq(m.server_total, 4096);

  /* --- a drops its connection without bye: its block is freed */
  wire_close(&a, 1);
  double deadline = mono_s() + 10;
  do {
    ck_assert_int_eq(wire_call(&b, raw, tsr_encode_stats(raw, 33, 0), &m), 0);
    if (m.server_total == 0) break;
    usleep(20000);
  } while (mono_s() < deadline);
  ck_assert_uint_eq(m.server_total, 0);

  /* --- staged blocks (hpu:0, device 1): no key; bytes through the window */
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_alloc(raw, 50, 1, 2 << 20), &m), 0);
  uint64_t hs = m.handle;
  ck_assert_uint_eq(m.rkey_len, 0);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_stage(raw, TSR_PUSH, 51, hs, 0, 16), &m),
                   TSR_ST_INVAL); /* no window yet */
  ck_assert(strstr(m.text, "WINDOW") != NULL);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_window(raw, 52), &m), 0);
  const uint64_t window = m.nbytes;
  ck_assert_uint_eq(window, 1 << 20); /* a quarter of the 4 MiB cap */
  ck_assert_uint_gt(m.rkey_len, 0);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_window(raw, 53), &m), 0); /* the same again */
  ck_assert_uint_eq(m.nbytes, window);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_stage(raw, TSR_PULL, 54, hs, 0, window + 1), &m),
                   TSR_ST_RANGE); /* more than the window */
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_stage(raw, TSR_PULL, 55, hs, (2 << 20) - 8, 16),
                             &m), TSR_ST_RANGE); /* past the block */
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_stage(raw, TSR_PUSH, 56, hs, UINT64_MAX, 2), &m),
                   TSR_ST_RANGE);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_stage(raw, TSR_PUSH, 57, hs + 1, 0, 2), &m),
                   TSR_ST_NOHANDLE);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_stage(raw, TSR_PULL, 58, hs, 4096, window), &m), 0);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_stage(raw, TSR_PUSH, 59, hs, 1, 100), &m), 0);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_fill(raw, 60, hs, 8, 16, 8, pat), &m), 0);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_copy(raw, 61, hs, 0, hs, 10, 4096), &m), 0);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_copy_strided(raw, 62, hs, 0, hs, 64, 4, 2, sz, ds,
                                                              ss), &m), 0);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_copy_strided(raw, 63, hs, (2 << 20) - 8, hs, 0,
                                                              4, 2, sz, ds, ss), &m), TSR_ST_RANGE);
  /* the window counts against the cap: 2 MiB + 1 MiB held, 2 MiB more is over */
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_alloc(raw, 64, 1, 2 << 20), &m), TSR_ST_QUOTA);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_stats(raw, 65, 1), &m), 0);
  ck_assert_uint_eq(m.held, 2 << 20);
  ck_assert_uint_eq(m.server_total, (2 << 20) + window);

  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_bye(raw, 34), &m), 0);
  wire_close(&b, 0);
  ck_assert_int_eq(server_stop(&srv), 0);
  ck_assert(file_has(srv.log, "refused"));
  ck_assert(file_has(srv.log, "freed 1 block(s)"));
  unlink(secret_path);
}
END_TEST

/* The decoder alone: bodies of the wrong size for every type, both ways. */
START_TEST(decoder_checks_every_size) {
  uint8_t buf[TSR_MAX_MESSAGE + 8];
  char why[200];
  tsr_msg m;
  uint8_t nonce[TSR_NONCE_SIZE] = {0};
  size_t n = tsr_encode_hello(buf, 1, 2, nonce);
  ck_assert_int_eq(tsr_decode(buf, n, 0, &m, why, sizeof why), 0);
  ck_assert_int_eq(tsr_decode(buf, n, 1, &m, why, sizeof why), TSR_ST_BADMSG);
  for (size_t cut = 0; cut < n; cut++)
    ck_assert_int_eq(tsr_decode(buf, cut, 0, &m, why, sizeof why), TSR_ST_BADMSG);
  tsr_device_desc d[2] = {{"cpu:0", 0}, {"cpu:1", 5}};
  uint8_t mac[TSR_MAC_SIZE] = {0};
  n = tsr_encode_welcome(buf, 3, mac, d, 2);
  ck_assert_int_eq(tsr_decode(buf, n, 1, &m, why, sizeof why), 0);
  ck_assert_uint_eq(m.ndevices, 2);
  ck_assert_str_eq(m.devices[1].name, "cpu:1");
  buf[TSR_HEADER_SIZE + TSR_MAC_SIZE] = 65; /* more devices than the body holds */
  ck_assert_int_eq(tsr_decode(buf, n, 1, &m, why, sizeof why), TSR_ST_BADMSG);
  n = tsr_encode_welcome(buf, 3, mac, d, 1);
  memset(buf + TSR_HEADER_SIZE + TSR_MAC_SIZE + 4, 'x', TSR_DEVICE_NAME_SIZE); /* no NUL */
  ck_assert_int_eq(tsr_decode(buf, n, 1, &m, why, sizeof why), TSR_ST_BADMSG);
  n = tsr_encode_alloc_reply(buf, 4, 1, 2, "key", 3);
  ck_assert_int_eq(tsr_decode(buf, n, 1, &m, why, sizeof why), 0);
  ck_assert_int_eq(tsr_decode(buf, n - 1, 1, &m, why, sizeof why), TSR_ST_BADMSG);
  buf[TSR_HEADER_SIZE + 16] = 0; /* a key of 0 bytes: a staged block */
  ck_assert_int_eq(tsr_decode(buf, n - 3, 1, &m, why, sizeof why), 0);
  ck_assert_uint_eq(m.rkey_len, 0);
  ck_assert_int_eq(tsr_decode(buf, n, 1, &m, why, sizeof why), TSR_ST_BADMSG); /* then 3 bytes too many */
  n = tsr_encode_window_reply(buf, 6, 4096, 7, "key", 3);
  ck_assert_int_eq(tsr_decode(buf, n, 1, &m, why, sizeof why), 0);
  ck_assert_uint_eq(m.nbytes, 4096);
  ck_assert_uint_eq(m.raddr, 7);
  ck_assert_uint_eq(m.rkey_len, 3);
  for (size_t cut = 0; cut < n; cut++)
    ck_assert_int_eq(tsr_decode(buf, cut, 1, &m, why, sizeof why), TSR_ST_BADMSG);
  buf[TSR_HEADER_SIZE + 16] = 0; /* a window must have a key */
  ck_assert_int_eq(tsr_decode(buf, n - 3, 1, &m, why, sizeof why), TSR_ST_BADMSG);
  n = tsr_encode_stage(buf, TSR_PULL, 7, 9, 10, 11);
  ck_assert_int_eq(tsr_decode(buf, n, 0, &m, why, sizeof why), 0);
  ck_assert_int_eq(m.type, TSR_PULL);
  ck_assert_uint_eq(m.handle, 9);
  ck_assert_uint_eq(m.offset, 10);
  ck_assert_uint_eq(m.nbytes, 11);
  ck_assert_int_eq(tsr_decode(buf, n - 1, 0, &m, why, sizeof why), TSR_ST_BADMSG);
  n = tsr_encode_error(buf, TSR_FREE, 5, TSR_ST_NOHANDLE, "no\nsuch");
  ck_assert_int_eq(tsr_decode(buf, n, 1, &m, why, sizeof why), 0);
  ck_assert_str_eq(m.text, "no?such"); /* no control characters reach a log */
}
END_TEST

/* ------------------------------------------------------------ a liar */

/* A fake server that answers the client backend the way `mode` says, to
 * check that tstor-remote.so turns every lie into an error code naming the
 * peer instead of trusting it. */
enum { LIE_VERSION, LIE_SHORT, LIE_TYPE, LIE_MAC, LIE_SILENT, LIE_EMPTY_WINDOW };

typedef struct liar {
  int mode;
  ucp_context_h ucp;
  ucp_worker_h worker;
  ucp_listener_h listener;
  ucp_ep_h eps[8];
  int neps;
  ucp_ep_h pending_ep;
  size_t pending_len;
  uint8_t pending[TSR_MAX_MESSAGE];
  uint8_t cnonce[TSR_NONCE_SIZE], snonce[TSR_NONCE_SIZE];
  uint8_t out[TSR_MAX_MESSAGE];
  atomic_int stop;
  pthread_t thread;
  unsigned port;
} liar;

static ucs_status_t liar_request(void *arg, const void *header, size_t header_length, void *data,
                                 size_t length, const ucp_am_recv_param_t *param) {
  liar *l = arg;
  (void)header, (void)header_length;
  if (length <= TSR_MAX_MESSAGE && param->reply_ep) {
    memcpy(l->pending, data, length);
    l->pending_len = length;
    l->pending_ep = param->reply_ep;
  }
  return UCS_OK;
}

static void liar_connect(ucp_conn_request_h req, void *arg) {
  liar *l = arg;
  ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST, .conn_request = req};
  if (l->neps < 8 && ucp_ep_create(l->worker, &ep, &l->eps[l->neps]) == UCS_OK) l->neps++;
}

static void liar_send(liar *l, size_t len) {
  ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                               .flags = UCP_AM_SEND_FLAG_EAGER};
  ucs_status_ptr_t req = ucp_am_send_nbx(l->pending_ep, TSR_AM_REPLY, NULL, 0, l->out, len, &param);
  if (UCS_PTR_IS_PTR(req)) {
    while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(l->worker);
    ucp_request_free(req);
  }
}

/* Answers one request as the mode says. */
static void liar_answer(liar *l) {
  tsr_msg m;
  char why[200];
  if (tsr_decode(l->pending, l->pending_len, 0, &m, why, sizeof why) != 0) return;
  if (l->mode == LIE_SILENT) return; /* never answers */
  size_t n;
  if (m.type == TSR_HELLO) {
    memcpy(l->cnonce, m.nonce, TSR_NONCE_SIZE);
    memset(l->snonce, 0x33, TSR_NONCE_SIZE);
    n = tsr_encode_challenge(l->out, m.id, TSTOR_ABI_VERSION_FOR_TEST, l->snonce);
    if (l->mode == LIE_VERSION) l->out[4] = 99;
    if (l->mode == LIE_SHORT) n -= 5;
    if (l->mode == LIE_TYPE) n = tsr_encode_empty_reply(l->out, TSR_FREE, m.id); /* well formed */
    return liar_send(l, n);
  }
  if (m.type == TSR_AUTH) {
    uint8_t mac[TSR_MAC_SIZE];
    tsr_mac((const uint8_t *)SECRET, strlen(SECRET), "server", l->cnonce, l->snonce, mac);
    if (l->mode == LIE_MAC) mac[0] ^= 1;
    tsr_device_desc d = {"cpu:0", 0};
    return liar_send(l, tsr_encode_welcome(l->out, m.id, mac, &d, 1));
  }
  /* LIE_EMPTY_WINDOW: a staged block, then a window of no bytes */
  if (m.type == TSR_ALLOC)
    return liar_send(l, tsr_encode_alloc_reply(l->out, m.id, 1ull << 32 | 1, 0x10000, NULL, 0));
  if (m.type == TSR_WINDOW)
    return liar_send(l, tsr_encode_window_reply(l->out, m.id, 0, 0x20000, "key", 3));
  liar_send(l, tsr_encode_empty_reply(l->out, m.type, m.id));
}

static void *liar_thread(void *arg) {
  liar *l = arg;
  while (!atomic_load(&l->stop)) {
    ucp_worker_progress(l->worker);
    if (l->pending_ep) {
      liar_answer(l);
      l->pending_ep = NULL;
    }
  }
  return NULL;
}

static void liar_start(liar *l, int mode) {
  memset(l, 0, sizeof *l);
  l->mode = mode;
  ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                         .features = UCP_FEATURE_AM | UCP_FEATURE_RMA};
  ck_assert_int_eq(ucp_init(&params, NULL, &l->ucp), UCS_OK);
  ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                            .thread_mode = UCS_THREAD_MODE_SINGLE};
  ck_assert_int_eq(ucp_worker_create(l->ucp, &wp, &l->worker), UCS_OK);
  ucp_am_handler_param_t am = {
      .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG,
      .id = TSR_AM_REQUEST,
      .cb = liar_request,
      .arg = l,
  };
  ck_assert_int_eq(ucp_worker_set_am_recv_handler(l->worker, &am), UCS_OK);
  for (int attempt = 0; attempt < 5 && !l->listener; attempt++) {
    l->port = free_port();
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)l->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ucp_listener_params_t lp = {
        .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
        .sockaddr = {.addr = (struct sockaddr *)&sa, .addrlen = sizeof sa},
        .conn_handler = {.cb = liar_connect, .arg = l},
    };
    if (ucp_listener_create(l->worker, &lp, &l->listener) != UCS_OK) l->listener = NULL;
  }
  ck_assert_ptr_nonnull(l->listener);
  atomic_init(&l->stop, 0);
  ck_assert_int_eq(pthread_create(&l->thread, NULL, liar_thread, l), 0);
}

static void liar_stop(liar *l) {
  atomic_store(&l->stop, 1);
  pthread_join(l->thread, NULL);
  for (int i = 0; i < l->neps; i++) {
    ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                 .flags = UCP_EP_CLOSE_FLAG_FORCE};
    ucs_status_ptr_t req = ucp_ep_close_nbx(l->eps[i], &param);
    if (UCS_PTR_IS_PTR(req)) {
      while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(l->worker);
      ucp_request_free(req);
    }
  }
  ucp_listener_destroy(l->listener);
  ucp_worker_destroy(l->worker);
  ucp_cleanup(l->ucp);
}

/* Opens a client context against the liar; returns what the open returned. */
static int open_against(liar *l, tstor_context **ctx) {
  char ini[1024], peer[64];
  snprintf(peer, sizeof peer, "127.0.0.1:%u", l->port);
  client_config(ini, sizeof ini, peer, secret_path, 1000, 0);
  *ctx = NULL;
  return tstor_context_open_string(ini, "liar.ini", ctx);
}

START_TEST(replies_that_lie_are_errors) {
  snprintf(secret_path, sizeof secret_path, "%s/remote-liar-secret-%d", TSTOR_TEST_BUILDDIR,
           (int)getpid());
  write_secret(secret_path, SECRET, 0600);
  static const struct {
    int mode, code;
    const char *says;
  } cases[] = {
      {LIE_VERSION, TSTOR_EABI, "protocol version 99"},
      {LIE_SHORT, TSTOR_EIO, "malformed reply"},
      {LIE_TYPE, TSTOR_EIO, "answered with a FREE reply"},
      {LIE_MAC, TSTOR_EACCES, "does not hold the secret"},
      {LIE_SILENT, TSTOR_EIO, "no reply within 1000 ms"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    liar l;
    liar_start(&l, cases[i].mode);
    tstor_context *ctx;
    double t0 = mono_s();
    ck_tstor_err(open_against(&l, &ctx), cases[i].code);
    ck_last_error_has(cases[i].says);
    char peer[64];
    snprintf(peer, sizeof peer, "127.0.0.1:%u", l.port);
    ck_last_error_has(peer);
    ck_assert_double_lt(mono_s() - t0, 5.0);
    liar_stop(&l);
  }

  /* after a good start: a window that could move nothing fails the copy, not
   * loops for ever; the storage can still be released */
  liar l;
  liar_start(&l, LIE_EMPTY_WINDOW);
  tstor_context *ctx;
  ck_tstor_ok(open_against(&l, &ctx));
  tstor_device r0, cpu;
  ck_tstor_ok(tstor_device_parse(ctx, "remote:0", &r0));
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  tstor_storage *remote, *host;
  ck_tstor_ok(tstor_storage_new(ctx, r0, 100, &remote));
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 100, &host));
  ck_tstor_err(tstor_storage_copy(remote, host), TSTOR_EIO);
  ck_last_error_has("window of 0 bytes");
  char peer[64];
  snprintf(peer, sizeof peer, "127.0.0.1:%u", l.port);
  ck_last_error_has(peer);
  tstor_storage_release(host);
  tstor_storage_release(remote);
  tstor_context_close(ctx);
  liar_stop(&l);

  unlink(secret_path);
}
END_TEST

static Suite *wire_suite(void) {
  Suite *s = suite_create("remote wire");
  TCase *tc = tcase_create("wire");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, decoder_checks_every_size);
  tcase_add_test(tc, crafted_messages_get_error_replies);
  tcase_add_test(tc, replies_that_lie_are_errors);
  suite_add_tcase(s, tc);
  return s;
}

int main(int argc, char **argv) {
  (void)argc;
  /* This program links UCX, whose hooks read their settings when it is
   * loaded, before main: under TSan, run again with them in the environment. */
  if (UNDER_TSAN && !getenv("UCX_MEM_MMAP_HOOK_MODE")) {
    remote_test_env();
    execv("/proc/self/exe", argv);
    perror("execv /proc/self/exe");
    return 99;
  }
  remote_test_env();
  return tstor_test_run(wire_suite());
}
