/* `tstor serve` against a peer that speaks UCX at it instead of tstor's
 * protocol: it skips the handshake and sends one-sided puts, gets and atomics
 * (with a key of its own memory, at the address a victim client's block has
 * on its device, and at guessed addresses) and active messages of every id,
 * over tcp, over shared memory and over UCX's default transports. After each
 * attack the server must still be up, the victim's bytes unchanged, and a new
 * client must be served. */
#include <ucp/api/ucp.h>

#include "remotetest.h"

#define SECRET "attack test secret, long enough"
#define VICTIM_BYTES ((size_t)1 << 20)
#define VICTIM_BYTE 0x5a
#define ATTACK_BYTE 0xee

static test_files fixture;

typedef struct attacker {
  ucp_context_h ucp;
  ucp_worker_h worker;
  ucp_ep_h ep;
  int failed;
  ucs_status_t why;
  unsigned ops, refused; /* operations tried; those UCX failed */
} attacker;

static void on_error(void *arg, ucp_ep_h ep, ucs_status_t status) {
  attacker *a = arg;
  (void)ep;
  a->failed = 1;
  a->why = status;
}

/* Drives the worker until req is done, the endpoint fails or 5 s pass;
 * returns the request's status (UCS_ERR_TIMED_OUT for the last). */
static ucs_status_t attack_wait(attacker *a, ucs_status_ptr_t req) {
  if (!UCS_PTR_IS_PTR(req)) return UCS_PTR_STATUS(req);
  double deadline = mono_s() + 5;
  ucs_status_t st;
  while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS && !a->failed &&
         mono_s() < deadline)
    ucp_worker_progress(a->worker);
  if (st == UCS_INPROGRESS) {
    ucp_request_cancel(a->worker, req);
    while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS && mono_s() < deadline + 2)
      ucp_worker_progress(a->worker);
    if (st == UCS_INPROGRESS) st = UCS_ERR_TIMED_OUT;
  }
  ucp_request_free(req);
  return st;
}

static void attack_count(attacker *a, ucs_status_t st) {
  a->ops++;
  if (st != UCS_OK) a->refused++;
}

/* Every kind of operation UCX offers a peer, at each target address. */
static void attack(const char *tls, unsigned port, uint64_t victim_addr, attacker *a) {
  memset(a, 0, sizeof *a);
  ucp_config_t *config;
  ck_assert_int_eq(ucp_config_read(NULL, NULL, &config), UCS_OK);
  ck_assert_int_eq(ucp_config_modify(config, "TLS", tls ? tls : "all"), UCS_OK);
  ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                         .features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_AMO64};
  ucs_status_t st = ucp_init(&params, config, &a->ucp);
  ucp_config_release(config);
  ck_assert_int_eq(st, UCS_OK);
  ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                            .thread_mode = UCS_THREAD_MODE_SINGLE};
  ck_assert_int_eq(ucp_worker_create(a->ucp, &wp, &a->worker), UCS_OK);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  ucp_ep_params_t ep = {
      .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
      .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
      .sockaddr = {.addr = (struct sockaddr *)&sa, .addrlen = sizeof sa},
      .err_mode = UCP_ERR_HANDLING_MODE_PEER,
      .err_handler = {.cb = on_error, .arg = a},
  };
  if (ucp_ep_create(a->worker, &ep, &a->ep) != UCS_OK) {
    a->ep = NULL;
    a->failed = 1;
    return;
  }
  ucp_request_param_t none = {.op_attr_mask = 0};
  attack_count(a, attack_wait(a, ucp_ep_flush_nbx(a->ep, &none))); /* wireup */

  /* A key of the attacker's own memory: on tcp and shared memory UCX applies
   * a put with any key at any address of the target. */
  uint8_t *mine = malloc(VICTIM_BYTES);
  ck_assert_ptr_nonnull(mine);
  memset(mine, ATTACK_BYTE, VICTIM_BYTES);
  ucp_mem_map_params_t mp = {
      .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
      .address = mine,
      .length = VICTIM_BYTES};
  ucp_mem_h memh;
  ck_assert_int_eq(ucp_mem_map(a->ucp, &mp, &memh), UCS_OK);
  void *packed;
  size_t packed_len;
  ck_assert_int_eq(ucp_rkey_pack(a->ucp, memh, &packed, &packed_len), UCS_OK);
  ucp_rkey_h rkey = NULL;
  if (!a->failed && ucp_ep_rkey_unpack(a->ep, packed, &rkey) != UCS_OK) rkey = NULL;
  ucp_rkey_buffer_release(packed);

  const uint64_t targets[] = {victim_addr, victim_addr + 4096, victim_addr & ~(uint64_t)0xfffff};
  for (size_t t = 0; t < sizeof targets / sizeof targets[0] && rkey && !a->failed; t++) {
    attack_count(a, attack_wait(a, ucp_put_nbx(a->ep, mine, 65536, targets[t], rkey, &none)));
    attack_count(a, attack_wait(a, ucp_ep_flush_nbx(a->ep, &none)));
    attack_count(a, attack_wait(a, ucp_get_nbx(a->ep, mine, 65536, targets[t], rkey, &none)));
    uint64_t operand = 1, result = 0;
    ucp_request_param_t amo = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER,
        .datatype = ucp_dt_make_contig(8),
        .reply_buffer = &result};
    attack_count(a, attack_wait(a, ucp_atomic_op_nbx(a->ep, UCP_ATOMIC_OP_ADD, &operand, 1,
                                                     targets[t], rkey, &amo)));
    attack_count(a, attack_wait(a, ucp_atomic_op_nbx(a->ep, UCP_ATOMIC_OP_SWAP, &operand, 1,
                                                     targets[t], rkey, &amo)));
  }
  /* Active messages of every id a UCP worker can have, short and long. */
  for (unsigned id = 0; id < 32 && !a->failed; id++) {
    ucp_request_param_t am = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                              .flags = UCP_AM_SEND_FLAG_REPLY};
    attack_count(a, attack_wait(a, ucp_am_send_nbx(a->ep, id, mine, 16, mine, 64, &am)));
    attack_count(a, attack_wait(a, ucp_am_send_nbx(a->ep, id, NULL, 0, mine, 65536, &am)));
  }
  if (rkey) ucp_rkey_destroy(rkey);
  if (a->ep) {
    ucp_request_param_t close = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                 .flags = UCP_EP_CLOSE_FLAG_FORCE};
    ucs_status_ptr_t req = ucp_ep_close_nbx(a->ep, &close);
    if (UCS_PTR_IS_PTR(req)) {
      double deadline = mono_s() + 5;
      while (ucp_request_check_status(req) == UCS_INPROGRESS && mono_s() < deadline)
        ucp_worker_progress(a->worker);
      ucp_request_free(req);
    }
  }
  ucp_mem_unmap(a->ucp, memh);
  free(mine);
  ucp_worker_destroy(a->worker);
  ucp_cleanup(a->ucp);
}

static tstor_context *open_victim(unsigned port) {
  char ini[1024], peers[64];
  snprintf(peers, sizeof peers, "127.0.0.1:%u", port);
  client_config(ini, sizeof ini, peers, fixture.secret, 10000, 0);
  tstor_context *ctx = NULL;
  ck_tstor_ok(tstor_context_open_string(ini, "victim.ini", &ctx));
  return ctx;
}

/* Whether every byte of the victim's block still holds VICTIM_BYTE. */
static int victim_intact(tstor_context *ctx, tstor_storage *victim) {
  tstor_device cpu;
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  tstor_storage *back;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, VICTIM_BYTES, &back));
  ck_tstor_ok(tstor_storage_copy(back, victim));
  const uint8_t *p = tstor_storage_data(back);
  size_t bad = 0;
  for (size_t i = 0; i < VICTIM_BYTES; i++) bad += p[i] != VICTIM_BYTE;
  tstor_storage_release(back);
  return bad == 0;
}

static void ucx_peer_reaches_nothing(const char *tls) {
  test_server srv;
  server_start(&srv, fixture.secret, "attack");
  tstor_context *ctx = open_victim(srv.port);
  tstor_device r0;
  ck_tstor_ok(tstor_device_parse(ctx, "remote:0", &r0));
  tstor_storage *victim;
  ck_tstor_ok(tstor_storage_new(ctx, r0, VICTIM_BYTES, &victim));
  ck_tstor_ok(tstor_storage_fill(victim, VICTIM_BYTE));

  attacker a;
  attack(tls, srv.port, (uint64_t)(uintptr_t)tstor_storage_data(victim), &a);

  int status;
  ck_assert_msg(waitpid(srv.pid, &status, WNOHANG) == 0, "UCX_TLS=%s: the server died (see %s)",
                tls ? tls : "(default)", srv.log);
  ck_assert_msg(victim_intact(ctx, victim), "UCX_TLS=%s: the victim's block was written",
                tls ? tls : "(default)");
  ck_assert_msg(a.failed || a.refused == a.ops, "UCX_TLS=%s: %u of %u operations went through",
                tls ? tls : "(default)", a.ops - a.refused, a.ops);
  /* and the server still serves: a new client, a round trip */
  tstor_context *other = open_victim(srv.port);
  tstor_storage *s;
  ck_tstor_ok(tstor_storage_new(other, r0, 4096, &s));
  ck_tstor_ok(tstor_storage_fill(s, 1));
  tstor_storage_release(s);
  tstor_context_close(other);

  tstor_storage_release(victim);
  tstor_context_close(ctx);
  ck_assert_int_eq(server_stop(&srv), 0);
}

START_TEST(ucx_over_tcp_reaches_nothing) { ucx_peer_reaches_nothing("tcp"); }
END_TEST

START_TEST(ucx_over_shared_memory_reaches_nothing) { ucx_peer_reaches_nothing("sm,tcp"); }
END_TEST

START_TEST(ucx_defaults_reach_nothing) { ucx_peer_reaches_nothing(NULL); }
END_TEST

static void setup(void) { test_files_make(&fixture, "attack", SECRET); }

static void teardown(void) { test_files_remove(&fixture); }

static Suite *attack_suite(void) {
  Suite *s = suite_create("remote attack");
  TCase *tc = tcase_create("ucx peer");
  tcase_set_timeout(tc, 120);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, ucx_over_tcp_reaches_nothing);
  tcase_add_test(tc, ucx_over_shared_memory_reaches_nothing);
  tcase_add_test(tc, ucx_defaults_reach_nothing);
  suite_add_tcase(s, tc);
  return s;
}

int main(int argc, char **argv) {
  (void)argc;
  /* UCX's hooks read their settings when it is loaded, before main: under
   * TSan, run again with them in the environment (remotetest.h). */
  if (UNDER_TSAN && !getenv("UCX_MEM_MMAP_HOOK_MODE")) {
    setenv("UCX_MEM_MMAP_HOOK_MODE", "none", 1);
    execv("/proc/self/exe", argv);
    perror("execv /proc/self/exe");
    return 99;
  }
  return tstor_test_run(attack_suite());
}
