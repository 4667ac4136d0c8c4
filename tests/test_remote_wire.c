/* `tstor serve` against a client that crafts its bytes, and the client
 * backend against a server that lies.
 *
 * Before authentication: anything but a hello and an auth of their exact
 * sizes (other types, versions, sizes, bytes that are no tstor header, a
 * wrong proof) gets an error reply where the peer spoke the protocol and the
 * connection closed. After it: every field is checked against what this
 * client owns, with an error reply and the session kept where the stream can
 * still be framed; a fresh block reads as zeros; staged blocks move whole
 * through the server's host buffer; one client reaches none of another's
 * blocks; a dropped connection frees its blocks; each client's shared region
 * is its own. And tstor-remote.so turns every lie of a fake server into an
 * error code naming the peer, a shared region it cannot rely on included. */
#define _GNU_SOURCE /* fallocate, F_GET_SEALS */
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/un.h>

#include "remotewire.h"
#include "wire.h"

#define SECRET "wire test secret, sixteen bytes or more"

static test_files fixture;

static void setup(void) { test_files_make(&fixture, "wire", SECRET); }

static void teardown(void) { test_files_remove(&fixture); }

/* A server with cpu:0 and hpu:0 (staged), a 4 MiB cap per client. */
static void start_cap4(test_server *srv, const char *tag) {
  ck_assert_int_eq(
      server_start_with(srv, SERVER_CPU_HPU, fixture.secret, tag, "--max-client-mb", "4"), 0);
}

/* Sets the body length in a crafted header. */
static void set_length(uint8_t *msg, uint32_t body) {
  for (int i = 0; i < 4; i++) msg[TSR_LENGTH_OFFSET + i] = (uint8_t)(body >> (8 * i));
}

/* ------------------------------------------------------------- decoder */

/* Bodies of the wrong size for every type, both ways. */
START_TEST(decoder_checks_every_size) {
  uint8_t buf[TSR_MAX_MESSAGE + 8];
  char why[200];
  tsr_msg m;
  uint8_t nonce[TSR_NONCE_SIZE] = {0};
  size_t n = tsr_encode_hello(buf, 1, 2, nonce);
  ck_assert_uint_eq(n, TSR_HEADER_SIZE + 36);
  ck_assert_int_eq(tsr_decode(buf, n, 0, &m, why, sizeof why), 0);
  ck_assert_int_eq(tsr_decode(buf, n, 1, &m, why, sizeof why), TSR_ST_BADMSG);
  for (size_t cut = 0; cut < n; cut++)
    ck_assert_int_eq(tsr_decode(buf, cut, 0, &m, why, sizeof why), TSR_ST_BADMSG);
  set_length(buf, 35); /* the header disagrees with what came */
  ck_assert_int_eq(tsr_decode(buf, n, 0, &m, why, sizeof why), TSR_ST_BADMSG);
  ck_assert(strstr(why, "header says 35") != NULL);
  uint32_t body;
  ck_assert_int_eq(tsr_frame(buf, 36, &body, why, sizeof why), 0);
  ck_assert_uint_eq(body, 35);
  set_length(buf, 37);
  ck_assert_int_eq(tsr_frame(buf, 36, &body, why, sizeof why), TSR_ST_BADMSG);
  buf[0] ^= 1;
  ck_assert_int_eq(tsr_frame(buf, 1 << 20, &body, why, sizeof why), TSR_ST_BADMSG);
  ck_assert(strstr(why, "not a tstor message") != NULL);

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
  n = tsr_encode_alloc_reply(buf, 4, 0x300000001ull, 4096);
  ck_assert_int_eq(tsr_decode(buf, n, 1, &m, why, sizeof why), 0);
  ck_assert_uint_eq(m.handle, 0x300000001ull);
  ck_assert_uint_eq(m.region, 4096);
  n = tsr_encode_shm(buf, 5);
  ck_assert_int_eq(tsr_decode(buf, n, 0, &m, why, sizeof why), 0);
  ck_assert_int_eq(m.type, TSR_SHM);
  ck_assert_int_eq(tsr_decode(buf, n + 1, 0, &m, why, sizeof why), TSR_ST_BADMSG);
  n = tsr_encode_shm_reply(buf, 5, (uint64_t)16 << 20, 3);
  ck_assert_int_eq(tsr_decode(buf, n, 1, &m, why, sizeof why), 0);
  ck_assert_uint_eq(m.region, (uint64_t)16 << 20);
  ck_assert_uint_eq(m.device, 3);
  n = tsr_encode_alloc_reply(buf, 4, 0x300000001ull, TSR_NO_REGION);
  for (size_t cut = 0; cut < n; cut++)
    ck_assert_int_eq(tsr_decode(buf, cut, 1, &m, why, sizeof why), TSR_ST_BADMSG);
  for (int type = TSR_WRITE; type <= TSR_READ; type++) {
    n = tsr_encode_transfer(buf, type, 7, 9, 10, 11);
    ck_assert_int_eq(tsr_decode(buf, n, 0, &m, why, sizeof why), 0);
    ck_assert_int_eq(m.type, type);
    ck_assert_uint_eq(m.handle, 9);
    ck_assert_uint_eq(m.offset, 10);
    ck_assert_uint_eq(m.nbytes, 11);
    ck_assert_int_eq(tsr_decode(buf, n - 1, 0, &m, why, sizeof why), TSR_ST_BADMSG);
    n = tsr_encode_empty_reply(buf, type, 7);
    ck_assert_int_eq(tsr_decode(buf, n, 1, &m, why, sizeof why), 0);
  }
  n = tsr_encode_error(buf, TSR_FREE, 5, TSR_ST_NOHANDLE, "no\nsuch");
  ck_assert_int_eq(tsr_decode(buf, n, 1, &m, why, sizeof why), 0);
  ck_assert_str_eq(m.text, "no?such"); /* no control characters reach a log */
  n = tsr_encode_error(buf, 0, 5, TSR_ST_BADMSG, "type unknown");
  ck_assert_int_eq(tsr_decode(buf, n, 1, &m, why, sizeof why), 0);
  ck_assert_int_eq(m.type, TSR_REPLY);
}
END_TEST

/* ------------------------------------------------- before authentication */

/* Sends the bytes on a fresh connection; returns the reply's status, or -1
 * when the server closed without one. Either way the server must close. */
static int first_message(unsigned port, const void *bytes, size_t n, tsr_msg *m) {
  wire w;
  wire_open(&w, port, NULL);
  int st = wire_call(&w, bytes, n, m);
  ck_assert_msg(wire_closed(&w, 10), "the connection stayed open after status %d", st);
  wire_close(&w);
  return st;
}

START_TEST(handshake_refusals_close_the_connection) {
  test_server srv;
  start_cap4(&srv, "handshake");
  uint8_t raw[TSR_MAX_MESSAGE + 64], nonce[TSR_NONCE_SIZE] = {1};
  tsr_msg m;

  /* no tstor header at all: closed without a word */
  ck_assert_int_eq(first_message(srv.port, "ZZZZZ", 5, &m), -1);
  const char *http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ck_assert_int_eq(first_message(srv.port, http, strlen(http), &m), -1);

  size_t n = tsr_encode_hello(raw, 7, TSTOR_ABI_VERSION, nonce);
  raw[4] = 99; /* version */
  ck_assert_int_eq(first_message(srv.port, raw, n, &m), TSR_ST_VERSION);
  ck_assert(strstr(m.text, "version 99") != NULL);
  raw[4] = TSR_PROTO_VERSION;
  raw[12] = 0x33; /* the id: its reply echoes it */
  raw[16] = 1;    /* a request with a status */
  ck_assert_int_eq(first_message(srv.port, raw, n, &m), TSR_ST_BADMSG);
  ck_assert_uint_eq(m.id, 0x33);
  raw[16] = 0;
  set_length(raw, 35);
  ck_assert_int_eq(first_message(srv.port, raw, n - 1, &m), TSR_ST_BADMSG);
  set_length(raw, 1u << 30); /* a body the gate never waits for */
  ck_assert_int_eq(first_message(srv.port, raw, TSR_HEADER_SIZE, &m), TSR_ST_BADMSG);
  raw[6] = TSR_HELLO | TSR_REPLY;
  set_length(raw, 36);
  ck_assert_int_eq(first_message(srv.port, raw, n, &m), TSR_ST_NOSESSION);
  ck_assert_int_eq(first_message(srv.port, raw, tsr_encode_stats(raw, 8, 0), &m), TSR_ST_NOSESSION);
  ck_assert(strstr(m.text, "STATS before authentication") != NULL);
  ck_assert_int_eq(first_message(srv.port, raw, tsr_encode_alloc(raw, 9, 0, 4096), &m),
                   TSR_ST_NOSESSION);
  ck_assert_int_eq(first_message(srv.port, raw, tsr_encode_shm(raw, 9), &m), TSR_ST_NOSESSION);
  ck_assert(strstr(m.text, "SHM before authentication") != NULL);
  n = tsr_encode_transfer(raw, TSR_WRITE, 10, 1, 0, 8);
  memset(raw + n, 0xee, 8);
  ck_assert_int_eq(first_message(srv.port, raw, n + 8, &m), TSR_ST_NOSESSION);
  uint8_t zeros[TSR_MAC_SIZE] = {0};
  ck_assert_int_eq(first_message(srv.port, raw, tsr_encode_auth(raw, 11, zeros), &m),
                   TSR_ST_NOSESSION);

  /* a wrong secret: denied and closed; a second hello after the first: closed */
  wire w;
  wire_open(&w, srv.port, NULL);
  ck_assert_int_eq(wire_auth(&w, "not the secret, but long enough", &m), TSR_ST_DENIED);
  ck_assert(wire_closed(&w, 10));
  wire_close(&w);
  wire_open(&w, srv.port, NULL);
  ck_assert_int_eq(wire_call(&w, raw, tsr_encode_hello(raw, 12, TSTOR_ABI_VERSION, nonce), &m), 0);
  ck_assert_int_eq(wire_call(&w, raw, tsr_encode_hello(raw, 13, TSTOR_ABI_VERSION, nonce), &m),
                   TSR_ST_NOSESSION);
  ck_assert(wire_closed(&w, 10));
  wire_close(&w);

  /* the right one: the devices, and a session that refuses a second hello */
  wire_open(&w, srv.port, NULL);
  ck_assert_int_eq(wire_auth(&w, SECRET, &m), 0);
  ck_assert_uint_eq(m.ndevices, 2);
  ck_assert_str_eq(m.devices[0].name, "cpu:0");
  ck_assert_str_eq(m.devices[1].name, "hpu:0");
  ck_assert_int_eq(wire_call(&w, raw, tsr_encode_hello(raw, 14, TSTOR_ABI_VERSION, nonce), &m),
                   TSR_ST_BADMSG);
  ck_assert(strstr(m.text, "already authenticated") != NULL);
  ck_assert_int_eq(wire_call(&w, raw, tsr_encode_stats(raw, 15, 0), &m), 0);
  wire_close(&w);
  ck_assert_int_eq(server_stop(&srv), 0);
  ck_assert(file_has(srv.log, "not a tstor client"));
}
END_TEST

/* ------------------------------------------------- after authentication */

START_TEST(crafted_requests_get_error_replies) {
  test_server srv;
  start_cap4(&srv, "crafted");
  wire a;
  tsr_msg m;
  uint8_t raw[TSR_MAX_MESSAGE + 64];
  wire_open(&a, srv.port, NULL);
  ck_assert_int_eq(wire_auth(&a, SECRET, &m), 0);

  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_alloc(raw, 11, 99, 4096), &m), TSR_ST_NODEV);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_alloc(raw, 12, 0, 0), &m), TSR_ST_INVAL);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_alloc(raw, 13, 0, UINT64_MAX), &m), TSR_ST_INVAL);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_alloc(raw, 14, 0, 5 << 20), &m), TSR_ST_QUOTA);
  ck_assert_uint_eq(m.id, 14); /* replies answer the request's id */
  uint64_t h = wire_alloc(&a, 0, 4096);
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
  ck_assert_int_eq(
      wire_call(&a, raw, tsr_encode_copy_strided(raw, 40, h, 0, h, 64, 4, 2, sz, ds, ss), &m), 0);
  ck_assert_int_eq(
      wire_call(&a, raw, tsr_encode_copy_strided(raw, 41, h, 4088, h, 0, 4, 2, sz, ds, ss), &m),
      TSR_ST_RANGE);
  int64_t huge[2] = {INT64_MAX, 2}, zero[2] = {0, 0};
  ck_assert_int_eq(
      wire_call(&a, raw, tsr_encode_copy_strided(raw, 42, h, 0, h, 0, 4, 2, huge, ds, ss), &m),
      TSR_ST_RANGE);
  ck_assert_int_eq(
      wire_call(&a, raw, tsr_encode_copy_strided(raw, 43, h, 0, h, 0, 4, 2, sz, zero, zero), &m),
      TSR_ST_INVAL);
  ck_assert_int_eq(
      wire_call(&a, raw, tsr_encode_copy_strided(raw, 44, h, 0, h, 0, 0, 2, sz, ds, ss), &m),
      TSR_ST_INVAL);
  size_t n = tsr_encode_copy_strided(raw, 45, h, 0, h, 0, 4, 1, sz, ds, ss);
  raw[TSR_HEADER_SIZE + 36] = 0; /* ndim 0 */
  set_length(raw, (uint32_t)(n - 24 - TSR_HEADER_SIZE));
  ck_assert_int_eq(wire_call(&a, raw, n - 24, &m), TSR_ST_BADMSG);
  set_length(raw, (uint32_t)(n - TSR_HEADER_SIZE));
  raw[TSR_HEADER_SIZE + 36] = 65;
  ck_assert_int_eq(wire_call(&a, raw, n, &m), TSR_ST_BADMSG);
  raw[TSR_HEADER_SIZE + 36] = 2; /* says 2, carries 1 */
  ck_assert_int_eq(wire_call(&a, raw, n, &m), TSR_ST_BADMSG);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_shm(raw, 46), &m), TSR_ST_INVAL);
  ck_assert(strstr(m.text, "Unix socket") != NULL); /* never over TCP */
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_stats(raw, 27, 5), &m), TSR_ST_NODEV);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_stats(raw, 28, 0), &m), 0);
  ck_assert_uint_eq(m.held, 4096);
  ck_assert_uint_eq(m.server_total, 4096);

  /* WRITE and READ: a refused WRITE's bytes are read past, and the session
   * goes on; the bytes land where the request said */
  uint8_t data[4096], back[4096];
  for (int i = 0; i < 4096; i++) data[i] = (uint8_t)(i * 7 + 1);
  ck_assert_int_eq(wire_write(&a, h + 1, 0, data, 64, &m), TSR_ST_NOHANDLE);
  ck_assert_int_eq(wire_write(&a, h, 4000, data, 200, &m), TSR_ST_RANGE);
  ck_assert_int_eq(wire_write(&a, h, 0, data, 4096, &m), 0);
  ck_assert_int_eq(wire_read(&a, h, 4000, back, 200, &m), TSR_ST_RANGE);
  ck_assert_int_eq(wire_read(&a, h, UINT64_MAX, back, 2, &m), TSR_ST_RANGE);
  ck_assert_int_eq(wire_read(&a, h ^ (1ull << 33), 0, back, 2, &m), TSR_ST_NOHANDLE);
  ck_assert_int_eq(wire_read(&a, h, 0, back, 4096, &m), 0);
  ck_assert_mem_eq(back, data, 4096);
  ck_assert_int_eq(wire_read(&a, h, 4096, back, 0, &m), 0); /* nothing, at the end */

  /* mutated requests: every one answered, the server stays up; magic,
   * version, type and length stay, so that each can be framed */
  uint64_t rng = 12345;
  for (int i = 0; i < 300; i++) {
    size_t len = tsr_encode_copy(raw, 100 + (uint32_t)i, h, 8, h, 16, 64);
    int flips = 1 + (int)(tstor_test_rng(&rng) % 4);
    for (int f = 0; f < flips; f++) {
      size_t at = 12 + tstor_test_rng(&rng) % (len - 12);
      raw[at] ^= (uint8_t)(1u << (tstor_test_rng(&rng) % 8));
    }
    if (tstor_test_rng(&rng) % 8 == 0) {
      len = TSR_HEADER_SIZE + tstor_test_rng(&rng) % (len - TSR_HEADER_SIZE + 8);
      set_length(raw, (uint32_t)(len - TSR_HEADER_SIZE));
    }
    ck_assert_int_ge(wire_call(&a, raw, len, &m), 0);
  }
  ck_assert_int_eq(wire_read(&a, h, 0, back, 64, &m), 0);

  /* what cannot be framed, or another version, ends the session */
  wire b;
  wire_open(&b, srv.port, NULL);
  ck_assert_int_eq(wire_auth(&b, SECRET, &m), 0);
  n = tsr_encode_stats(raw, 50, 0);
  set_length(raw, TSR_MAX_BODY + 1);
  ck_assert_int_eq(wire_call(&b, raw, TSR_HEADER_SIZE, &m), TSR_ST_BADMSG);
  ck_assert(wire_closed(&b, 10));
  wire_close(&b);
  wire_open(&b, srv.port, NULL);
  ck_assert_int_eq(wire_auth(&b, SECRET, &m), 0);
  n = tsr_encode_stats(raw, 51, 0);
  raw[4] = 7;
  ck_assert_int_eq(wire_call(&b, raw, n, &m), TSR_ST_VERSION);
  ck_assert(wire_closed(&b, 10));
  wire_close(&b);
  /* a WRITE whose request is malformed: its bytes cannot be told apart */
  wire_open(&b, srv.port, NULL);
  ck_assert_int_eq(wire_auth(&b, SECRET, &m), 0);
  n = tsr_encode_transfer(raw, TSR_WRITE, 52, 1, 0, 8);
  set_length(raw, 23);
  ck_assert_int_eq(wire_call(&b, raw, n - 1, &m), TSR_ST_BADMSG);
  ck_assert(wire_closed(&b, 10));
  wire_close(&b);
  /* a refused WRITE of more than the client may hold: not read past */
  wire_open(&b, srv.port, NULL);
  ck_assert_int_eq(wire_auth(&b, SECRET, &m), 0);
  n = tsr_encode_transfer(raw, TSR_WRITE, 53, 1, 0, (uint64_t)1 << 40);
  ck_assert_int_eq(wire_call(&b, raw, n, &m), TSR_ST_NOHANDLE);
  ck_assert(wire_closed(&b, 10));
  wire_close(&b);

  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_bye(raw, 34), &m), 0);
  ck_assert(wire_closed(&a, 10)); /* bye ends the session */
  wire_close(&a);
  ck_assert_int_eq(server_stop(&srv), 0);
  ck_assert(file_has(srv.log, "refused"));
  ck_assert(file_has(srv.log, "freed 1 block(s)"));
}
END_TEST

/* One client reaches none of another's blocks, by any handle. */
START_TEST(clients_reach_only_their_own_blocks) {
  test_server srv;
  start_cap4(&srv, "isolated");
  wire a, b;
  tsr_msg m;
  uint8_t raw[TSR_MAX_MESSAGE], data[4096], back[4096];
  wire_open(&a, srv.port, NULL);
  ck_assert_int_eq(wire_auth(&a, SECRET, &m), 0);
  uint64_t ha = wire_alloc(&a, 0, 4096), hs = wire_alloc(&a, 1, 4096);
  memset(data, 0xa5, sizeof data);
  ck_assert_int_eq(wire_write(&a, ha, 0, data, 4096, &m), 0);
  ck_assert_int_eq(wire_write(&a, hs, 0, data, 4096, &m), 0);

  wire_open(&b, srv.port, NULL);
  ck_assert_int_eq(wire_auth(&b, SECRET, &m), 0);
  /* a's handles, and every handle of the first 64 slots and 4 generations */
  for (uint64_t gen = 1; gen <= 4; gen++)
    for (uint64_t slot = 1; slot <= 64; slot++) {
      uint64_t h = gen << 32 | slot;
      ck_assert_int_eq(wire_read(&b, h, 0, back, 16, &m), TSR_ST_NOHANDLE);
      ck_assert_int_eq(wire_write(&b, h, 0, data, 16, &m), TSR_ST_NOHANDLE);
      ck_assert_int_eq(wire_call(&b, raw, tsr_encode_fill(raw, 30, h, 0, 16, 1, data), &m),
                       TSR_ST_NOHANDLE);
      ck_assert_int_eq(wire_call(&b, raw, tsr_encode_free(raw, 31, h), &m), TSR_ST_NOHANDLE);
    }
  /* Handles are names in one client's table: b's first block has the very
   * handle a's first block has, and it names b's block to b */
  uint64_t hb = wire_alloc(&b, 0, 4096);
  ck_assert_uint_eq(hb, ha);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_copy(raw, 32, hb, 0, ha, 16, 16), &m), 0);
  ck_assert_int_eq(wire_read(&b, ha, 0, back, 4096, &m), 0);
  for (int i = 0; i < 4096; i++) ck_assert_uint_eq(back[i], 0);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_stats(raw, 33, 0), &m), 0);
  ck_assert_uint_eq(m.held, 4096);
  ck_assert_uint_eq(m.server_total, 3 * 4096 + (1 << 20)); /* and a's staging buffer */
  /* a's bytes, untouched */
  ck_assert_int_eq(wire_read(&a, ha, 0, back, 4096, &m), 0);
  ck_assert_mem_eq(back, data, 4096);
  ck_assert_int_eq(wire_read(&a, hs, 0, back, 4096, &m), 0);
  ck_assert_mem_eq(back, data, 4096);

  /* a drops its connection without bye: its blocks are freed */
  wire_close(&a);
  double deadline = mono_s() + 10;
  do {
    ck_assert_int_eq(wire_call(&b, raw, tsr_encode_stats(raw, 34, 0), &m), 0);
    if (m.server_total == 4096) break;
    usleep(20000);
  } while (mono_s() < deadline);
  ck_assert_uint_eq(m.server_total, 4096);
  wire_close(&b);
  ck_assert_int_eq(server_stop(&srv), 0);
}
END_TEST

/* A block reads as zeros when its handle is returned, whoever held its
 * memory before: the same client, or another (cpu's allocator caches freed
 * blocks, so without the scrub the next one of that size is the last one). */
START_TEST(fresh_blocks_read_as_zeros) {
  test_server srv;
  start_cap4(&srv, "zeros");
  const size_t n = (size_t)1 << 20;
  uint8_t *data = malloc(n), *back = malloc(n);
  ck_assert_ptr_nonnull(data);
  ck_assert_ptr_nonnull(back);
  memset(data, 0xab, n);
  tsr_msg m;
  uint8_t raw[TSR_MAX_MESSAGE];
  for (uint32_t device = 0; device < 2; device++) {
    wire a, b;
    wire_open(&a, srv.port, NULL);
    ck_assert_int_eq(wire_auth(&a, SECRET, &m), 0);
    uint64_t h = wire_alloc(&a, device, n);
    ck_assert_int_eq(wire_write(&a, h, 0, data, n, &m), 0);
    ck_assert_int_eq(wire_call(&a, raw, tsr_encode_free(raw, 40, h), &m), 0);
    h = wire_alloc(&a, device, n); /* the same client again */
    ck_assert_int_eq(wire_read(&a, h, 0, back, n, &m), 0);
    for (size_t i = 0; i < n; i++)
      ck_assert_msg(back[i] == 0, "device %u: byte %zu of a fresh block is %u", device, i, back[i]);
    ck_assert_int_eq(wire_write(&a, h, 0, data, n, &m), 0);
    wire_close(&a); /* its blocks go with it */

    wire_open(&b, srv.port, NULL);
    ck_assert_int_eq(wire_auth(&b, SECRET, &m), 0);
    double deadline = mono_s() + 10;
    do { /* until a's session has freed its block */
      ck_assert_int_eq(wire_call(&b, raw, tsr_encode_stats(raw, 41, 0), &m), 0);
      if (m.server_total == 0) break;
      usleep(20000);
    } while (mono_s() < deadline);
    h = wire_alloc(&b, device, n);
    ck_assert_int_eq(wire_read(&b, h, 0, back, n, &m), 0);
    for (size_t i = 0; i < n; i++)
      ck_assert_msg(back[i] == 0, "device %u: byte %zu of another client's block is %u", device, i,
                    back[i]);
    wire_close(&b);
  }
  free(data);
  free(back);
  ck_assert_int_eq(server_stop(&srv), 0);
}
END_TEST

/* hpu:0 (device 1) is staged: WRITE and READ larger than the server's host
 * buffer (a quarter of the 4 MiB cap: 1 MiB), which counts against the cap. */
START_TEST(staged_blocks_move_through_host_memory) {
  test_server srv;
  start_cap4(&srv, "staged");
  wire b;
  tsr_msg m;
  uint8_t raw[TSR_MAX_MESSAGE];
  const size_t n = (size_t)2 << 20;
  uint8_t *data = malloc(n), *back = malloc(n);
  for (size_t i = 0; i < n; i++) data[i] = (uint8_t)(i * 131 + 7);
  wire_open(&b, srv.port, NULL);
  ck_assert_int_eq(wire_auth(&b, SECRET, &m), 0);
  uint64_t hs = wire_alloc(&b, 1, n);
  ck_assert_int_eq(wire_write(&b, hs, 0, data, n, &m), 0);
  ck_assert_int_eq(wire_read(&b, hs, 0, back, n, &m), 0);
  ck_assert_mem_eq(back, data, n);
  ck_assert_int_eq(wire_write(&b, hs, n - 8, data, 16, &m), TSR_ST_RANGE);
  ck_assert_int_eq(wire_write(&b, hs, 1, data, 100, &m), 0);
  ck_assert_int_eq(wire_read(&b, hs, 0, back, 101, &m), 0);
  ck_assert_uint_eq(back[0], data[0]);
  ck_assert_mem_eq(back + 1, data, 100);
  uint8_t pat[16] = {9, 8, 7, 6, 5, 4, 3, 2};
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_fill(raw, 60, hs, 8, 16, 8, pat), &m), 0);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_copy(raw, 61, hs, 0, hs, 10, 4096), &m), 0);
  int64_t sz[2] = {2, 2}, ds[2] = {8, 4}, ss[2] = {4, 8};
  ck_assert_int_eq(
      wire_call(&b, raw, tsr_encode_copy_strided(raw, 62, hs, 0, hs, 64, 4, 2, sz, ds, ss), &m), 0);
  ck_assert_int_eq(
      wire_call(&b, raw, tsr_encode_copy_strided(raw, 63, hs, n - 8, hs, 0, 4, 2, sz, ds, ss), &m),
      TSR_ST_RANGE);
  /* 2 MiB held and the 1 MiB buffer: 2 MiB more is over the cap */
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_alloc(raw, 64, 1, 2 << 20), &m), TSR_ST_QUOTA);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_stats(raw, 65, 1), &m), 0);
  ck_assert_uint_eq(m.held, n);
  ck_assert_uint_eq(m.server_total, n + (1 << 20));
  wire_close(&b);
  free(data);
  free(back);
  ck_assert_int_eq(server_stop(&srv), 0);
}
END_TEST

/* --------------------------------------------------- shared regions */

/* SHM on a raw session over a Unix socket: the region's descriptor, mapped
 * here; *size its bytes. */
static uint8_t *open_region(wire *w, uint64_t *size, int *fd_out) {
  uint8_t raw[TSR_MAX_MESSAGE];
  size_t n = tsr_encode_shm(raw, 70);
  ck_assert_int_eq(wire_send(w, raw, n), 0);
  int fd = -1;
  ck_assert_int_eq(tsr_recv_fd(w->fd, raw, TSR_HEADER_SIZE, 10000, &fd), 0);
  tsr_head head;
  tsr_head_read(raw, &head);
  ck_assert_uint_eq(head.body, 12);
  ck_assert_int_eq(wire_recv(w, raw + TSR_HEADER_SIZE, head.body, 10), 0);
  tsr_msg m;
  char why[200];
  ck_assert_int_eq(tsr_decode(raw, TSR_HEADER_SIZE + head.body, 1, &m, why, sizeof why), 0);
  ck_assert_int_eq(m.status, 0);
  ck_assert_int_ge(fd, 0);
  ck_assert_uint_eq(m.device, 0); /* cpu:0 */
  *size = m.region;
  void *base = mmap(NULL, m.region, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ck_assert(base != MAP_FAILED);
  *fd_out = fd;
  return base;
}

/* ALLOC in the region: its handle, and where it is (TSR_NO_REGION: outside). */
static uint64_t alloc_at(wire *w, uint32_t device, uint64_t n, uint64_t *where) {
  tsr_msg m;
  ck_assert_int_eq(wire_call(w, w->buf, tsr_encode_alloc(w->buf, 71, device, n), &m), 0);
  *where = m.region;
  return m.handle;
}

static int all_zero(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

/* Each client's region is its own: made for its session, sealed against
 * resizing (a client that could shrink it would fault the server), holding
 * its host blocks, which both sides see; another client's region holds none
 * of them; fresh blocks read as zeros; a client that punches holes in its own
 * region gets zeros, and the server keeps serving. */
START_TEST(shared_regions_are_each_clients_own) {
  char sock[108], listen[128];
  snprintf(sock, sizeof sock, "/tmp/tstor-wire-%d.sock", (int)getpid());
  snprintf(listen, sizeof listen, "unix:%s", sock);
  unlink(sock);
  test_server srv;
  const char *extra[] = {"--listen", listen, "--max-client-mb", "8", NULL};
  ck_assert_int_eq(server_start_argv(&srv, SERVER_CPU_HPU, fixture.secret, "region", extra), 0);
  wire a, b;
  tsr_msg m;
  uint8_t raw[TSR_MAX_MESSAGE];
  wire_open(&a, 0, sock);
  ck_assert_int_eq(wire_auth(&a, SECRET, &m), 0);
  uint64_t size_a;
  int fd_a;
  uint8_t *ra = open_region(&a, &size_a, &fd_a);
  ck_assert_uint_eq(size_a, 8u << 20); /* the cap */
  int seals = fcntl(fd_a, F_GET_SEALS);
  ck_assert(seals & F_SEAL_SHRINK);
  ck_assert(seals & F_SEAL_GROW);
  ck_assert(seals & F_SEAL_SEAL);
  ck_assert_int_ne(ftruncate(fd_a, 4096), 0);
  ck_assert_int_ne(ftruncate(fd_a, (off_t)size_a * 2), 0);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_shm(raw, 72), &m), TSR_ST_INVAL);

  /* a host block in the region: what a writes there the server reads, and the
   * other way round; a staged block is outside it */
  uint64_t at, staged_at;
  uint64_t h = alloc_at(&a, 0, 1 << 20, &at), hs = alloc_at(&a, 1, 4096, &staged_at);
  ck_assert_uint_lt(at, size_a);
  ck_assert_uint_eq(staged_at, TSR_NO_REGION);
  ck_assert(all_zero(ra + at, 1 << 20));
  uint8_t data[4096], back[4096];
  for (int i = 0; i < 4096; i++) data[i] = (uint8_t)(i * 13 + 5);
  memcpy(ra + at + 100, data, 4096);
  ck_assert_int_eq(wire_read(&a, h, 100, back, 4096, &m), 0);
  ck_assert_mem_eq(back, data, 4096);
  ck_assert_int_eq(wire_write(&a, h, 9000, data, 4096, &m), 0);
  ck_assert_mem_eq(ra + at + 9000, data, 4096);
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_copy(raw, 73, hs, 0, h, 100, 4096), &m), 0);
  ck_assert_int_eq(wire_read(&a, hs, 0, back, 4096, &m), 0);
  ck_assert_mem_eq(back, data, 4096);

  /* b's region: its own, with none of a's bytes, all of it read */
  wire_open(&b, 0, sock);
  ck_assert_int_eq(wire_auth(&b, SECRET, &m), 0);
  uint64_t size_b, at_b;
  int fd_b;
  uint8_t *rb = open_region(&b, &size_b, &fd_b);
  ck_assert(rb != ra);
  alloc_at(&b, 0, 1 << 20, &at_b);
  ck_assert(all_zero(rb, size_b));
  /* freed and made again: zeros, in the same place or not */
  ck_assert_int_eq(wire_call(&a, raw, tsr_encode_free(raw, 74, h), &m), 0);
  h = alloc_at(&a, 0, 1 << 20, &at);
  ck_assert(all_zero(ra + at, 1 << 20));
  /* a punches its own region's pages: zeros for it, and the server serves on */
  memset(ra + at, 0x77, 1 << 20);
  ck_assert_int_eq(fallocate(fd_a, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)at, 1 << 20),
                   0);
  ck_assert_int_eq(wire_read(&a, h, 0, back, 4096, &m), 0);
  ck_assert(all_zero(back, 4096));
  ck_assert_int_eq(wire_write(&a, h, 0, data, 4096, &m), 0);
  ck_assert_mem_eq(ra + at, data, 4096);
  munmap(ra, size_a);
  close(fd_a);
  wire_close(&a);
  ck_assert_int_eq(wire_call(&b, raw, tsr_encode_stats(raw, 75, 0), &m), 0);
  munmap(rb, size_b);
  close(fd_b);
  wire_close(&b);
  ck_assert_int_eq(server_stop(&srv), 0);
  ck_assert(file_has(srv.log, "a shared region of 8 MiB"));
}
END_TEST

/* ------------------------------------------------------------ a liar */

/* A fake server that answers the client backend the way `mode` says, to
 * check that tstor-remote.so turns every lie into an error code naming the
 * peer instead of trusting it. */
enum {
  LIE_VERSION,
  LIE_SHORT,
  LIE_TYPE,
  LIE_MAC,
  LIE_SILENT,
  LIE_ID,
  LIE_HUGE,
  LIE_CUT_READ,
  /* on a Unix socket, SHM: */
  LIE_UNSEALED, /* a region it could shrink */
  LIE_SMALLER,  /* a region smaller than it says */
  LIE_NO_FD     /* a reply with no region at all */
};

typedef struct liar {
  int mode, listen_fd;
  unsigned port;
  char path[108]; /* the Unix socket of the SHM lies */
  atomic_int stop;
  pthread_t thread;
} liar;

/* Answers one connection's requests as the mode says, until it closes. */
static void liar_serve(liar *l, int fd) {
  uint8_t in[TSR_MAX_MESSAGE], out[TSR_MAX_MESSAGE], cnonce[TSR_NONCE_SIZE], snonce[TSR_NONCE_SIZE];
  wire w = {.fd = fd};
  for (;;) {
    if (wire_recv(&w, in, TSR_HEADER_SIZE, 5) != 0) return;
    uint32_t body;
    char why[200];
    if (tsr_frame(in, TSR_MAX_BODY, &body, why, sizeof why) != 0) return;
    if (wire_recv(&w, in + TSR_HEADER_SIZE, body, 5) != 0) return;
    tsr_msg m;
    if (tsr_decode(in, TSR_HEADER_SIZE + body, 0, &m, why, sizeof why) != 0) return;
    if (l->mode == LIE_SILENT) continue; /* never answers */
    size_t n;
    if (m.type == TSR_HELLO) {
      memcpy(cnonce, m.nonce, TSR_NONCE_SIZE);
      memset(snonce, 0x33, TSR_NONCE_SIZE);
      n = tsr_encode_challenge(out, m.id, TSTOR_ABI_VERSION, snonce);
      if (l->mode == LIE_VERSION) out[4] = 99;
      if (l->mode == LIE_SHORT) set_length(out, (uint32_t)(n -= 5) - TSR_HEADER_SIZE);
      if (l->mode == LIE_TYPE) n = tsr_encode_empty_reply(out, TSR_FREE, m.id); /* well formed */
      if (l->mode == LIE_ID) tsr_set_id(out, m.id + 1);
      if (l->mode == LIE_HUGE) set_length(out, 1u << 30);
    } else if (m.type == TSR_AUTH) {
      uint8_t mac[TSR_MAC_SIZE];
      tsr_mac((const uint8_t *)SECRET, strlen(SECRET), "server", cnonce, snonce, mac);
      if (l->mode == LIE_MAC) mac[0] ^= 1;
      tsr_device_desc d = {"cpu:0", 0};
      n = tsr_encode_welcome(out, m.id, mac, &d, 1);
    } else if (m.type == TSR_SHM) {
      int region = memfd_create("liar", MFD_CLOEXEC | MFD_ALLOW_SEALING);
      if (region < 0 || ftruncate(region, 1 << 20) != 0) return;
      if (l->mode != LIE_UNSEALED) fcntl(region, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
      n = tsr_encode_shm_reply(out, m.id, l->mode == LIE_SMALLER ? 2 << 20 : 1 << 20, 0);
      int rc = l->mode == LIE_NO_FD ? wire_send(&w, out, n) : tsr_send_fd(fd, out, n, region, 5000);
      close(region);
      if (rc) return;
      continue;
    } else if (m.type == TSR_ALLOC) {
      n = tsr_encode_alloc_reply(out, m.id, 1ull << 32 | 1, TSR_NO_REGION);
    } else if (m.type == TSR_WRITE) {
      uint8_t sink[4096];
      for (uint64_t left = m.nbytes; left;) {
        size_t k = left < sizeof sink ? (size_t)left : sizeof sink;
        if (wire_recv(&w, sink, k, 5) != 0) return;
        left -= k;
      }
      n = tsr_encode_empty_reply(out, m.type, m.id);
    } else if (m.type == TSR_READ) { /* LIE_CUT_READ: half the bytes, then hang up */
      n = tsr_encode_empty_reply(out, m.type, m.id);
      wire_send(&w, out, n);
      static const uint8_t some[64];
      wire_send(&w, some, m.nbytes / 2 < sizeof some ? (size_t)m.nbytes / 2 : sizeof some);
      return;
    } else {
      n = tsr_encode_empty_reply(out, m.type, m.id);
    }
    if (wire_send(&w, out, n) != 0) return;
  }
}

static void *liar_thread(void *arg) {
  liar *l = arg;
  while (!atomic_load(&l->stop)) {
    struct pollfd p = {.fd = l->listen_fd, .events = POLLIN};
    if (poll(&p, 1, 50) <= 0) continue;
    int fd = accept(l->listen_fd, NULL, NULL);
    if (fd < 0) continue;
    liar_serve(l, fd);
    close(fd);
  }
  return NULL;
}

static void liar_start(liar *l, int mode) {
  memset(l, 0, sizeof *l);
  l->mode = mode;
  if (mode >= LIE_UNSEALED) {
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    snprintf(l->path, sizeof l->path, "/tmp/tstor-liar-%d.sock", (int)getpid());
    snprintf(un.sun_path, sizeof un.sun_path, "%s", l->path);
    unlink(l->path);
    l->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_eq(bind(l->listen_fd, (struct sockaddr *)&un, sizeof un), 0);
    ck_assert_int_eq(listen(l->listen_fd, 8), 0);
    atomic_init(&l->stop, 0);
    ck_assert_int_eq(pthread_create(&l->thread, NULL, liar_thread, l), 0);
    return;
  }
  l->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof sa;
  ck_assert_int_eq(bind(l->listen_fd, (struct sockaddr *)&sa, sizeof sa), 0);
  ck_assert_int_eq(listen(l->listen_fd, 8), 0);
  ck_assert_int_eq(getsockname(l->listen_fd, (struct sockaddr *)&sa, &len), 0);
  l->port = ntohs(sa.sin_port);
  atomic_init(&l->stop, 0);
  ck_assert_int_eq(pthread_create(&l->thread, NULL, liar_thread, l), 0);
}

static void liar_stop(liar *l) {
  atomic_store(&l->stop, 1);
  pthread_join(l->thread, NULL);
  close(l->listen_fd);
  if (l->path[0]) unlink(l->path);
}

/* The peer the client names: the liar's TCP port or its Unix socket. */
static const char *liar_peer(const liar *l, char *buf, size_t size) {
  if (l->path[0])
    snprintf(buf, size, "unix:%s", l->path);
  else
    snprintf(buf, size, "127.0.0.1:%u", l->port);
  return buf;
}

/* Opens a client context against the liar; returns what the open returned. */
static int open_against(liar *l, tstor_context **ctx) {
  char ini[1024], peer[160];
  client_config(ini, sizeof ini, liar_peer(l, peer, sizeof peer), fixture.secret, 1000, 0);
  *ctx = NULL;
  return tstor_context_open_string(ini, "liar.ini", ctx);
}

START_TEST(replies_that_lie_are_errors) {
  static const struct {
    int mode, code;
    const char *says;
  } cases[] = {
      {LIE_VERSION, TSTOR_EABI, "protocol version 99"},
      {LIE_SHORT, TSTOR_EIO, "malformed reply"},
      {LIE_TYPE, TSTOR_EIO, "answered with a FREE reply"},
      {LIE_MAC, TSTOR_EACCES, "does not hold the secret"},
      {LIE_SILENT, TSTOR_EIO, "no reply within 1000 ms"},
      {LIE_ID, TSTOR_EIO, "a reply to request"},
      {LIE_HUGE, TSTOR_EIO, "at most"},
      {LIE_UNSEALED, TSTOR_EIO, "SHM: malformed reply: no sealed region"},
      {LIE_SMALLER, TSTOR_EIO, "SHM: malformed reply: no sealed region"},
      {LIE_NO_FD, TSTOR_EIO, "SHM: malformed reply: no sealed region"},
  };
  char peer[160];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    liar l;
    liar_start(&l, cases[i].mode);
    tstor_context *ctx;
    ck_tstor_err(open_against(&l, &ctx), cases[i].code);
    ck_last_error_has(cases[i].says);
    ck_last_error_has(liar_peer(&l, peer, sizeof peer));
    liar_stop(&l);
  }

  /* after a good start: a READ cut short fails the copy and the peer; the
   * storage can still be released */
  liar l;
  liar_start(&l, LIE_CUT_READ);
  tstor_context *ctx;
  ck_tstor_ok(open_against(&l, &ctx));
  tstor_device r0, cpu;
  ck_tstor_ok(tstor_device_parse(ctx, "remote:0", &r0));
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  tstor_storage *remote, *host;
  ck_tstor_ok(tstor_storage_new(ctx, r0, 100, &remote));
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 100, &host));
  ck_tstor_ok(tstor_storage_copy(remote, host));
  ck_tstor_err(tstor_storage_copy(host, remote), TSTOR_EIO);
  ck_last_error_has("connection lost");
  snprintf(peer, sizeof peer, "127.0.0.1:%u", l.port);
  ck_last_error_has(peer);
  ck_tstor_err(tstor_storage_copy(remote, host), TSTOR_EIO); /* the peer stays failed */
  tstor_storage_release(host);
  tstor_storage_release(remote);
  tstor_context_close(ctx);
  liar_stop(&l);
}
END_TEST

static Suite *wire_suite(void) {
  Suite *s = suite_create("remote wire");
  TCase *tc = tcase_create("wire");
  tcase_set_timeout(tc, 120);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, decoder_checks_every_size);
  tcase_add_test(tc, handshake_refusals_close_the_connection);
  tcase_add_test(tc, crafted_requests_get_error_replies);
  tcase_add_test(tc, clients_reach_only_their_own_blocks);
  tcase_add_test(tc, fresh_blocks_read_as_zeros);
  tcase_add_test(tc, staged_blocks_move_through_host_memory);
  tcase_add_test(tc, shared_regions_are_each_clients_own);
  tcase_add_test(tc, replies_that_lie_are_errors);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tstor_test_run(wire_suite()); }
