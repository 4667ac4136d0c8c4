/* `tstor serve` against hostile peers, over TCP and over a Unix socket:
 *
 * - before authentication, a structure-aware stream of garbage: random bytes,
 *   headers of every type, version, length and status, a hello followed by
 *   anything, wrong proofs, connections cut at every point;
 * - after it, a client holding the secret that sends thousands of random
 *   requests of every type, with the handles, offsets and lengths most likely
 *   to hurt (another client's handle values, 0, the largest, off by one);
 * - a flood of idle and half-open connections while one client works and
 *   another connects for the first time;
 * - handshakes that never finish; a secret file that would block; a stop
 *   signal while the server starts; a restart where a killed server was.
 *
 * After each: the server is up, a victim client's bytes are unchanged, and a
 * new client is served. Work is bounded by counts, never by the clock: a
 * slow machine takes longer, it does not fail. */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <tstor/tstor.h>

#include "remotewire.h"

#define SECRET "hostile test secret, long enough"
#define VICTIM_BYTES 65536

static test_files fixture;

static void setup(void) { test_files_make(&fixture, "hostile", SECRET); }

static void teardown(void) { test_files_remove(&fixture); }

static void start(test_server *srv, const char *tag) { server_start_unix(srv, &fixture, tag); }

/* 127.0.0.1:port, or the Unix socket when `over_unix`. */
static void open_on(wire *w, const test_server *srv, int over_unix) {
  wire_open(w, over_unix ? 0 : srv->port, fixture.unix_sock);
}

/* A client with a block of each device holding a known pattern. */
typedef struct victim {
  wire w;
  uint64_t handles[2];
  uint8_t pattern[VICTIM_BYTES];
} victim;

static void victim_start(victim *v, const test_server *srv) {
  tsr_msg m;
  open_on(&v->w, srv, 0);
  ck_assert_int_eq(wire_auth(&v->w, SECRET, &m), 0);
  for (int i = 0; i < VICTIM_BYTES; i++) v->pattern[i] = (uint8_t)(i * 37 + 11);
  for (uint32_t d = 0; d < 2; d++) {
    v->handles[d] = wire_alloc(&v->w, d, VICTIM_BYTES);
    ck_assert_int_eq(wire_write(&v->w, v->handles[d], 0, v->pattern, VICTIM_BYTES, &m), 0);
  }
}

/* The server is up, the victim's bytes are as written, and a new client is
 * served; then the victim leaves. */
static void victim_check(victim *v, const test_server *srv) {
  int status;
  ck_assert_msg(waitpid(srv->pid, &status, WNOHANG) == 0, "the server died (see %s)", srv->log);
  static uint8_t back[VICTIM_BYTES];
  tsr_msg m;
  for (int d = 0; d < 2; d++) {
    ck_assert_int_eq(wire_read(&v->w, v->handles[d], 0, back, VICTIM_BYTES, &m), 0);
    ck_assert_msg(memcmp(back, v->pattern, VICTIM_BYTES) == 0,
                  "device %d: the victim's bytes changed", d);
  }
  wire fresh;
  open_on(&fresh, srv, 1);
  ck_assert_int_eq(wire_auth(&fresh, SECRET, &m), 0);
  uint64_t h = wire_alloc(&fresh, 0, 4096);
  ck_assert_int_eq(wire_read(&fresh, h, 0, back, 4096, &m), 0);
  wire_close(&fresh);
  wire_close(&v->w);
}

/* ------------------------------------------------- before authentication */

/* One connection's worth of garbage, by kind. */
static void garbage(wire *w, uint64_t *rng) {
  uint8_t msg[512];
  uint8_t nonce[TSR_NONCE_SIZE] = {0};
  size_t n = 0;
  switch (tstor_test_rng(rng) % 7) {
    case 0: /* random bytes */
      n = tstor_test_rng(rng) % sizeof msg;
      for (size_t i = 0; i < n; i++) msg[i] = (uint8_t)tstor_test_rng(rng);
      break;
    case 1: /* a header of any type, version, length and status, and some body */
      n = tsr_encode_hello(msg, 1, TSTOR_ABI_VERSION, nonce);
      for (int i = 4; i < 20; i++)
        if (tstor_test_rng(rng) % 3 == 0) msg[i] = (uint8_t)tstor_test_rng(rng);
      n = TSR_HEADER_SIZE + tstor_test_rng(rng) % 200;
      break;
    case 2: /* a hello, then anything */
      n = tsr_encode_hello(msg, 1, TSTOR_ABI_VERSION, nonce);
      for (size_t i = n; i < n + 64; i++) msg[i] = (uint8_t)tstor_test_rng(rng);
      n += tstor_test_rng(rng) % 64;
      break;
    case 3: { /* a hello, then an auth that guesses */
      tsr_msg m;
      if (wire_call(w, msg, tsr_encode_hello(msg, 1, TSTOR_ABI_VERSION, nonce), &m) != 0) return;
      uint8_t mac[TSR_MAC_SIZE];
      for (size_t i = 0; i < sizeof mac; i++) mac[i] = (uint8_t)tstor_test_rng(rng);
      ck_assert_int_eq(wire_call(w, msg, tsr_encode_auth(msg, 2, mac), &m), TSR_ST_DENIED);
      return;
    }
    case 4: /* a request of a session, before one */
      n = tsr_encode_transfer(msg, TSR_WRITE, 3, 1ull << 32 | 1, 0, 64);
      memset(msg + n, 0xee, 64);
      n += 64;
      break;
    case 5: /* part of a header */
      n = tsr_encode_hello(msg, 1, TSTOR_ABI_VERSION, nonce);
      n = tstor_test_rng(rng) % TSR_HEADER_SIZE;
      break;
    default: /* nothing at all */ return;
  }
  wire_send(w, msg, n);
}

static void garbage_is_shed(int over_unix) {
  test_server srv;
  start(&srv, "garbage");
  static victim v;
  victim_start(&v, &srv);
  uint64_t rng = 0x5eed + (uint64_t)over_unix;
  for (int i = 0; i < 600; i++) {
    wire w;
    open_on(&w, &srv, over_unix);
    garbage(&w, &rng);
    if (tstor_test_rng(&rng) % 2) wire_closed(&w, 0.01); /* or hang up at once */
    wire_close(&w);
  }
  victim_check(&v, &srv);
  ck_assert_int_eq(server_stop(&srv), 0);
}

START_TEST(garbage_before_authentication_is_shed_tcp) { garbage_is_shed(0); }
END_TEST

START_TEST(garbage_before_authentication_is_shed_unix) { garbage_is_shed(1); }
END_TEST

/* ------------------------------------------------- after authentication */

/* A value for a handle, offset or length that is likely to hurt. */
static uint64_t nasty(uint64_t *rng, const uint64_t *handles, int nhandles) {
  switch (tstor_test_rng(rng) % 8) {
    case 0: return 0;
    case 1: return UINT64_MAX - tstor_test_rng(rng) % 4;
    case 2: return (uint64_t)1 << (tstor_test_rng(rng) % 64);
    case 3: return VICTIM_BYTES + (tstor_test_rng(rng) % 3) - 1;
    case 4:
    case 5: return handles[tstor_test_rng(rng) % (uint64_t)nhandles];
    default: return tstor_test_rng(rng) % 8192;
  }
}

/* One random request, framed, and its reply: 0, or -1 when the session
 * ended (and the caller reconnects). */
static int malicious_request(wire *w, uint64_t *rng, const uint64_t *handles, int nhandles) {
  uint8_t msg[TSR_MAX_MESSAGE];
  static uint8_t payload[8192];
  size_t n, write_bytes = 0, read_bytes = 0;
  uint64_t h = nasty(rng, handles, nhandles), o = nasty(rng, handles, nhandles);
  uint64_t len =
      tstor_test_rng(rng) % 3 ? tstor_test_rng(rng) % 8192 : nasty(rng, handles, nhandles);
  uint32_t id = (uint32_t)tstor_test_rng(rng);
  switch (tstor_test_rng(rng) % 11) {
    case 0: n = tsr_encode_alloc(msg, id, (uint32_t)(tstor_test_rng(rng) % 3), len); break;
    case 1: n = tsr_encode_free(msg, id, h); break;
    case 2:
      n = tsr_encode_copy(msg, id, h, o, nasty(rng, handles, nhandles),
                          nasty(rng, handles, nhandles), len);
      break;
    case 3: {
      uint8_t pat[16] = {0};
      uint32_t ps = 1u << (tstor_test_rng(rng) % 6);
      memset(pat, 0xcc, ps < 16 ? ps : 16);
      n = tsr_encode_fill(msg, id, h, o, len, ps, pat);
      break;
    }
    case 4: n = tsr_encode_stats(msg, id, (uint32_t)(tstor_test_rng(rng) % 4)); break;
    case 5: {
      int ndim = 1 + (int)(tstor_test_rng(rng) % 4);
      int64_t sz[4], ds[4], ss[4];
      for (int d = 0; d < ndim; d++) {
        sz[d] = (int64_t)(tstor_test_rng(rng) % 70);
        ds[d] = (int64_t)(nasty(rng, handles, nhandles) >> 1);
        ss[d] = (int64_t)(tstor_test_rng(rng) % 5000);
      }
      n = tsr_encode_copy_strided(msg, id, h, o, nasty(rng, handles, nhandles),
                                  tstor_test_rng(rng) % 100, 1u << (tstor_test_rng(rng) % 4), ndim,
                                  sz, ds, ss);
      break;
    }
    case 6:
    case 7:
      if (len > sizeof payload) len = tstor_test_rng(rng) % sizeof payload;
      n = tsr_encode_transfer(msg, TSR_WRITE, id, h, o, len);
      write_bytes = (size_t)len;
      break;
    case 8:
      if (len > sizeof payload) len = tstor_test_rng(rng) % sizeof payload;
      n = tsr_encode_transfer(msg, TSR_READ, id, h, o, len);
      read_bytes = (size_t)len;
      break;
    case 9: /* a region: given once over a Unix socket (its descriptor dropped here, as a
             * client that never maps it), refused after that and over TCP */
      n = tsr_encode_shm(msg, id);
      break;
    default: /* a known request with its body's bytes flipped */
      n = tsr_encode_copy(msg, id, h, o, h, o, len);
      for (int f = 0; f < 3; f++)
        msg[TSR_HEADER_SIZE + tstor_test_rng(rng) % (n - TSR_HEADER_SIZE)] ^= (uint8_t)(1u << f);
      break;
  }
  int type = msg[6];
  if (wire_send(w, msg, n) != 0 || (write_bytes && wire_send(w, payload, write_bytes) != 0))
    return -1;
  tsr_msg m;
  int rc = wire_reply(w, &m);
  ck_assert_msg(rc != -2, "no reply within 10 s");
  if (rc) return -1;
  ck_assert_uint_eq(m.id, id);
  ck_assert_msg((m.type & ~TSR_REPLY) == type || (m.type & ~TSR_REPLY) == 0, "a %s reply to a %s",
                tsr_type_name(m.type), tsr_type_name(type));
  if (m.status == 0 && read_bytes) ck_assert_int_eq(wire_recv(w, payload, read_bytes, 10), 0);
  return 0;
}

static void malicious_session(int over_unix) {
  test_server srv;
  start(&srv, "malicious");
  static victim v;
  victim_start(&v, &srv);
  wire w;
  tsr_msg m;
  open_on(&w, &srv, over_unix);
  ck_assert_int_eq(wire_auth(&w, SECRET, &m), 0);
  uint64_t handles[6] = {v.handles[0],
                         v.handles[1],
                         wire_alloc(&w, 0, VICTIM_BYTES),
                         wire_alloc(&w, 1, VICTIM_BYTES),
                         1ull << 32 | 2,
                         2ull << 32 | 1};
  uint64_t rng = 0xbad + (uint64_t)over_unix;
  int sessions = 1;
  for (int i = 0; i < 3000; i++) {
    if (malicious_request(&w, &rng, handles, 6) == 0) continue;
    wire_close(&w); /* the server ended that session: another */
    open_on(&w, &srv, over_unix);
    ck_assert_int_eq(wire_auth(&w, SECRET, &m), 0);
    sessions++;
  }
  wire_close(&w);
  victim_check(&v, &srv);
  ck_assert_int_eq(server_stop(&srv), 0);
  ck_assert(file_has(srv.log, "refused"));
  printf("malicious session over %s: 3000 requests, %d session(s)\n", over_unix ? "unix" : "tcp",
         sessions);
}

START_TEST(a_malicious_client_reaches_nothing_tcp) { malicious_session(0); }
END_TEST

START_TEST(a_malicious_client_reaches_nothing_unix) { malicious_session(1); }
END_TEST

/* ------------------------------------------------------------- a flood */

typedef struct flood {
  unsigned port;
  atomic_int stop;
  atomic_long connections;
} flood;

/* Opens connections that say nothing, and hangs up on each after its next,
 * as fast as it can, until told to stop or after 20,000 of them. */
static void *flood_thread(void *arg) {
  flood *f = arg;
  wire held[32];
  int n = 0;
  while (!atomic_load(&f->stop) && atomic_load(&f->connections) < 20000) {
    if (n == 32) {
      for (int i = 0; i < n; i++) wire_close(&held[i]);
      n = 0;
    }
    if (wire_try_open(&held[n], f->port, NULL) == 0) {
      n++;
      atomic_fetch_add(&f->connections, 1);
    }
  }
  for (int i = 0; i < n; i++) wire_close(&held[i]);
  return NULL;
}

START_TEST(a_flood_of_connections_locks_out_nobody) {
  test_server srv;
  start(&srv, "flood");
  char ini[1024], peers[64];
  snprintf(peers, sizeof peers, "127.0.0.1:%u", srv.port);
  client_config(ini, sizeof ini, peers, fixture.secret, 30000, 0);
  tstor_context *working;
  ck_tstor_ok(tstor_context_open_string(ini, "working.ini", &working));
  tstor_device r0, cpu;
  ck_tstor_ok(tstor_device_parse(working, "remote:0", &r0));
  ck_tstor_ok(tstor_device_parse(working, "cpu", &cpu));
  tstor_storage *remote, *host;
  ck_tstor_ok(tstor_storage_new(working, r0, 1 << 20, &remote));
  ck_tstor_ok(tstor_storage_new(working, cpu, 1 << 20, &host));

  /* 300 connections that stay idle, 100 that said hello and nothing more */
  static wire idle[400];
  uint8_t hello[TSR_MAX_MESSAGE], nonce[TSR_NONCE_SIZE] = {0};
  size_t hn = tsr_encode_hello(hello, 1, TSTOR_ABI_VERSION, nonce);
  for (int i = 0; i < 400; i++) {
    wire_open(&idle[i], srv.port, NULL);
    if (i >= 300) wire_send(&idle[i], hello, hn);
  }
  flood f = {.port = srv.port};
  atomic_init(&f.stop, 0);
  atomic_init(&f.connections, 0);
  pthread_t thread;
  ck_assert_int_eq(pthread_create(&thread, NULL, flood_thread, &f), 0);
  int newcomers = 0;

  /* while it lasts (2,000 connections at least): the working client works,
   * new ones get in */
  for (int round = 0; round < 20 || atomic_load(&f.connections) < 2000; round++) {
    ck_tstor_ok(tstor_storage_fill(host, (uint8_t)round));
    ck_tstor_ok(tstor_storage_copy(remote, host));
    ck_tstor_ok(tstor_storage_fill(host, 0xff));
    ck_tstor_ok(tstor_storage_copy(host, remote));
    ck_assert_uint_eq(((uint8_t *)tstor_storage_data(host))[12345], (uint8_t)round);
    if (round % 10 != 0) continue;
    tstor_context *newcomer;
    ck_tstor_ok(tstor_context_open_string(ini, "newcomer.ini", &newcomer));
    tstor_device d;
    ck_tstor_ok(tstor_device_parse(newcomer, "remote:0", &d));
    tstor_storage *s;
    ck_tstor_ok(tstor_storage_new(newcomer, d, 4096, &s));
    tstor_storage_release(s);
    tstor_context_close(newcomer);
    newcomers++;
  }
  atomic_store(&f.stop, 1);
  pthread_join(thread, NULL);
  for (int i = 0; i < 400; i++) wire_close(&idle[i]);
  printf("flood: %ld connections opened beside 400 idle ones; %d newcomers served\n",
         atomic_load(&f.connections), newcomers);

  tstor_storage_release(host);
  tstor_storage_release(remote);
  tstor_context_close(working);
  ck_assert_int_eq(server_stop(&srv), 0);
  ck_assert(file_has(srv.log, "pushed out"));
}
END_TEST

/* --------------------------------------------------------- handshakes */

START_TEST(handshakes_that_never_finish_are_dropped) {
  test_server srv;
  int rc = server_start_with(&srv, SERVER_CPU, fixture.secret, "deadline", "--handshake-timeout-ms",
                             "300");
  ck_assert_msg(rc == 0, "tstor serve did not start; see %s", srv.log);
  uint8_t msg[TSR_MAX_MESSAGE], nonce[TSR_NONCE_SIZE] = {0};
  wire silent, partial, hello_only;
  wire_open(&silent, srv.port, NULL);
  wire_open(&partial, srv.port, NULL);
  wire_send(&partial, msg, tsr_encode_hello(msg, 1, TSTOR_ABI_VERSION, nonce) - 10);
  wire_open(&hello_only, srv.port, NULL);
  tsr_msg m;
  ck_assert_int_eq(
      wire_call(&hello_only, msg, tsr_encode_hello(msg, 1, TSTOR_ABI_VERSION, nonce), &m), 0);
  ck_assert(wire_closed(&silent, 60));
  ck_assert(wire_closed(&partial, 60));
  ck_assert(wire_closed(&hello_only, 60));
  wire_close(&silent);
  wire_close(&partial);
  wire_close(&hello_only);
  ck_assert_int_eq(server_stop(&srv), 0);
  ck_assert(file_has(srv.log, "did not authenticate in time"));
}
END_TEST

/* Runs `tstor serve` with the arguments; returns its exit status (waiting at
 * most 60 s: a server that hangs fails the test, as before the fix). */
static int serve_status(const char *log, const char *const *args) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execv(REMOTE_TSTOR, (char *const *)args);
    _exit(127);
  }
  int status = -1;
  double deadline = mono_s() + 60;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (mono_s() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ck_abort_msg("tstor serve hung (see %s)", log);
    }
    usleep(10000);
  }
  return status;
}

START_TEST(a_secret_file_that_would_block_is_refused) {
  char fifo[300], log[300];
  snprintf(fifo, sizeof fifo, "%s/remote-fifo-%d", TSTOR_TEST_BUILDDIR, (int)getpid());
  snprintf(log, sizeof log, "%s/remote-fifo-%d.log", TSTOR_TEST_BUILDDIR, (int)getpid());
  unlink(fifo);
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  const char *args[] = {"tstor", "serve", "--listen", "127.0.0.1:1", "--secret-file", fifo, NULL};
  int status = serve_status(log, args);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0);
  ck_assert(file_has(log, "not a regular file (a FIFO)"));
  /* the client's secret_file alike */
  char ini[1024];
  client_config(ini, sizeof ini, "127.0.0.1:1", fifo, 1000, 0);
  tstor_context *ctx;
  ck_tstor_err(tstor_context_open_string(ini, "fifo.ini", &ctx), TSTOR_ECONFIG);
  ck_last_error_has("a FIFO");
  unlink(fifo);
  unlink(log);
}
END_TEST

START_TEST(a_stop_signal_while_starting_ends_the_server) {
  for (int sig = SIGINT; sig <= SIGTERM; sig += SIGTERM - SIGINT) {
    for (int delay_us = 0; delay_us <= 20000; delay_us += 5000) {
      char listen[64];
      snprintf(listen, sizeof listen, "127.0.0.1:%u", free_port());
      /* The signal may come before the exec: the child must not run Check's
       * handler, which would signal this test's whole process group. */
      sigset_t stop, old;
      sigemptyset(&stop);
      sigaddset(&stop, SIGINT);
      sigaddset(&stop, SIGTERM);
      sigprocmask(SIG_BLOCK, &stop, &old);
      pid_t pid = fork();
      ck_assert_int_ge(pid, 0);
      if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        dup2(fd, 2);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        execl(REMOTE_TSTOR, "tstor", "serve", "--listen", listen, "--secret-file", fixture.secret,
              (char *)NULL);
        _exit(127);
      }
      sigprocmask(SIG_SETMASK, &old, NULL);
      /* REMOTE_TSTOR is libtool's wrapper, a shell script that swallows the
       * signal while one of its own commands runs: the count starts when it
       * has exec'd the program itself. */
      char exe[64], target[512];
      snprintf(exe, sizeof exe, "/proc/%d/exe", (int)pid);
      for (int i = 0; i < 20000; i++) {
        ssize_t n = readlink(exe, target, sizeof target - 1);
        if (n < 0) break; /* gone already */
        target[n] = '\0';
        const char *base = strrchr(target, '/');
        if (base && (strcmp(base, "/tstor") == 0 || strcmp(base, "/lt-tstor") == 0)) break;
        usleep(500);
      }
      usleep((useconds_t)delay_us);
      kill(pid, sig);
      int status = -1;
      double deadline = mono_s() + 60;
      while (waitpid(pid, &status, WNOHANG) == 0) {
        if (mono_s() > deadline) {
          kill(pid, SIGKILL);
          waitpid(pid, &status, 0);
          ck_abort_msg("signal %d after %d us: tstor serve did not stop", sig, delay_us);
        }
        usleep(5000);
      }
      /* killed by it before it was ready, or a clean stop after */
      ck_assert_msg((WIFSIGNALED(status) && WTERMSIG(status) == sig) ||
                        (WIFEXITED(status) && WEXITSTATUS(status) == 0),
                    "signal %d after %d us: status 0x%x", sig, delay_us, status);
    }
  }
}
END_TEST

/* A server killed with clients connected leaves a port in TIME-WAIT and a
 * Unix socket file behind: the next one starts on both at once. */
START_TEST(a_restart_takes_the_same_addresses) {
  test_server srv;
  start(&srv, "restart");
  wire w;
  tsr_msg m;
  open_on(&w, &srv, 0);
  ck_assert_int_eq(wire_auth(&w, SECRET, &m), 0);
  kill(srv.pid, SIGKILL);
  waitpid(srv.pid, NULL, 0);
  ck_assert(wire_closed(&w, 10));
  wire_close(&w);
  struct stat st;
  ck_assert_int_eq(stat(fixture.unix_sock, &st), 0); /* left behind */
  char listen_tcp[64], listen_unix[128], config[300], log[200];
  snprintf(listen_tcp, sizeof listen_tcp, "127.0.0.1:%u", srv.port);
  snprintf(listen_unix, sizeof listen_unix, "unix:%s", fixture.unix_sock);
  snprintf(config, sizeof config, "%s/remote-restart-%d.ini", TSTOR_TEST_BUILDDIR, (int)getpid());
  snprintf(log, sizeof log, "%s/remote-restart-%d.log", TSTOR_TEST_BUILDDIR, (int)getpid());
  FILE *f = fopen(config, "w");
  fputs(SERVER_CPU, f);
  fclose(f);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(REMOTE_TSTOR, "tstor", "serve", "--listen", listen_tcp, "--listen", listen_unix,
          "--secret-file", fixture.secret, "--config", config, (char *)NULL);
    _exit(127);
  }
  test_server again = {.pid = pid, .port = srv.port};
  snprintf(again.log, sizeof again.log, "%s", log);
  double deadline = mono_s() + 20;
  while (!file_has(log, "listening on unix:") && mono_s() < deadline) {
    int status;
    ck_assert_msg(waitpid(pid, &status, WNOHANG) == 0, "the restart failed: see %s", log);
    usleep(10000);
  }
  open_on(&w, &again, 0);
  ck_assert_int_eq(wire_auth(&w, SECRET, &m), 0);
  wire_close(&w);
  open_on(&w, &again, 1);
  ck_assert_int_eq(wire_auth(&w, SECRET, &m), 0);
  wire_close(&w);
  ck_assert_int_eq(server_stop(&again), 0);
  ck_assert_int_ne(stat(fixture.unix_sock, &st), 0); /* a clean stop removes its socket */
  unlink(config);
}
END_TEST

/* The library's client over a Unix socket: a round trip. */
START_TEST(the_client_reaches_a_unix_socket) {
  test_server srv;
  start(&srv, "unix-client");
  char ini[1024], peers[160];
  snprintf(peers, sizeof peers, "unix:%s", fixture.unix_sock);
  client_config(ini, sizeof ini, peers, fixture.secret, 5000, 0);
  tstor_context *ctx;
  ck_tstor_ok(tstor_context_open_string(ini, "unix.ini", &ctx));
  tstor_device r1, cpu;
  ck_tstor_ok(tstor_device_parse(ctx, "remote:1", &r1)); /* the server's hpu:0 */
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  tstor_storage *remote, *host;
  ck_tstor_ok(tstor_storage_new(ctx, r1, 3 << 20, &remote));
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 3 << 20, &host));
  uint8_t *p = tstor_storage_data(host);
  for (size_t i = 0; i < (3u << 20); i++) p[i] = (uint8_t)(i ^ (i >> 9));
  ck_tstor_ok(tstor_storage_copy(remote, host));
  memset(p, 0, 3u << 20);
  ck_tstor_ok(tstor_storage_copy(host, remote));
  for (size_t i = 0; i < (3u << 20); i++) ck_assert_uint_eq(p[i], (uint8_t)(i ^ (i >> 9)));
  char line[256];
  ck_tstor_ok(tstor_device_describe(ctx, r1, line, sizeof line));
  ck_assert_msg(strstr(line, "unix:") && strstr(line, "hpu:0"), "%s", line);
  tstor_storage_release(host);
  tstor_storage_release(remote);
  tstor_context_close(ctx);
  ck_assert_int_eq(server_stop(&srv), 0);
}
END_TEST

static Suite *hostile_suite(void) {
  Suite *s = suite_create("remote hostile");
  TCase *tc = tcase_create("hostile");
  tcase_set_timeout(tc, 600);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, garbage_before_authentication_is_shed_tcp);
  tcase_add_test(tc, garbage_before_authentication_is_shed_unix);
  tcase_add_test(tc, a_malicious_client_reaches_nothing_tcp);
  tcase_add_test(tc, a_malicious_client_reaches_nothing_unix);
  tcase_add_test(tc, a_flood_of_connections_locks_out_nobody);
  tcase_add_test(tc, handshakes_that_never_finish_are_dropped);
  tcase_add_test(tc, a_secret_file_that_would_block_is_refused);
  tcase_add_test(tc, a_stop_signal_while_starting_ends_the_server);
  tcase_add_test(tc, a_restart_takes_the_same_addresses);
  tcase_add_test(tc, the_client_reaches_a_unix_socket);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tstor_test_run(hostile_suite()); }
