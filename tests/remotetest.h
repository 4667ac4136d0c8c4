/* Helpers for the remote suites: start a `tstor serve` of the build tree on
 * a free loopback port (and any other address a test adds), wait until it
 * listens, stop it. Every server a test
 * starts it stops; one left behind by a test that failed part-way gets
 * SIGTERM when that test's process exits (PR_SET_PDEATHSIG). */
#ifndef TSTOR_REMOTETEST_H
#define TSTOR_REMOTETEST_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define REMOTE_TSTOR TSTOR_TEST_BUILDDIR "/../tools/tstor"

typedef struct test_server {
  pid_t pid;
  unsigned port;
  char log[256];
} test_server;

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

static inline unsigned free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

/* Writes a secret file of `mode` at path with the given text. */
static inline void write_secret(const char *path, const char *text, mode_t mode) {
  unlink(path);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  ck_assert_int_eq(chmod(path, mode), 0);
}

static inline int file_has(const char *path, const char *needle) {
  char buf[65536];
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return strstr(buf, needle) != NULL;
}

static inline double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The servers' configs: cpu alone (one device a server, remote:N for the
 * N-th server), or cpu and one hpu-stub device, whose blocks the server
 * stages through host memory. */
#define SERVER_CPU "[backend cpu]\nlibrary = tstor-cpu.so\n"
#define SERVER_CPU_HPU SERVER_CPU "[backend hpu]\nlibrary = tstor-hpu-stub.so\ndevices = 1\nmemory_mb = 96\n"

/* Starts `tstor serve` with the config text, the secret file and the extra
 * arguments in `extra` (NULL-terminated; NULL when none), on a free port;
 * returns 0 once it listens, -1 when it exited first (its log says why:
 * ts->log). */
static inline int server_start_argv(test_server *ts, const char *config, const char *secret,
                                    const char *tag, const char *const *extra) {
  char config_path[300];
  snprintf(config_path, sizeof config_path, "%s/remote-%s-%d.ini", TSTOR_TEST_BUILDDIR, tag,
           (int)getpid());
  FILE *f = fopen(config_path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(config, f);
  fclose(f);
  int rc = -1;
  for (int attempt = 0; attempt < 3 && rc != 0; attempt++) {
    ts->port = free_port();
    snprintf(ts->log, sizeof ts->log, "%s/remote-%s-%u.log", TSTOR_TEST_BUILDDIR, tag, ts->port);
    unlink(ts->log);
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%u", ts->port);
    pid_t parent = getpid();
    ts->pid = fork();
    ck_assert_int_ge(ts->pid, 0);
    if (ts->pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(127);
      int fd = open(ts->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
      const char *argv[32] = {"tstor",         "serve", "--listen", listen,
                              "--secret-file", secret,  "--config", config_path};
      for (int i = 0, at = 8; extra && extra[i] && at < 31; i++) argv[at++] = extra[i];
      execv(REMOTE_TSTOR, (char *const *)argv);
      _exit(127);
    }
    double deadline = mono_s() + 20;
    while (mono_s() < deadline) {
      int status;
      if (waitpid(ts->pid, &status, WNOHANG) == ts->pid) {
        ts->pid = 0;
        break; /* exited: a taken port, or a refusal the caller checks */
      }
      if (file_has(ts->log, "listening on")) {
        rc = 0;
        break;
      }
      usleep(10000);
    }
    if (rc == 0) break;
    if (ts->pid) {
      kill(ts->pid, SIGKILL);
      waitpid(ts->pid, NULL, 0);
      ts->pid = 0;
    }
    if (file_has(ts->log, "secret file")) break; /* a refusal: no retry */
  }
  unlink(config_path); /* read at the start */
  return rc;
}

/* The same with up to two extra arguments (NULL when none). */
static inline int server_start_with(test_server *ts, const char *config, const char *secret,
                                    const char *tag, const char *a1, const char *a2) {
  const char *extra[3] = {a1, a1 ? a2 : NULL, NULL};
  return server_start_argv(ts, config, secret, tag, extra);
}

/* The same with the cpu alone. */
static inline int server_start_args(test_server *ts, const char *secret, const char *tag,
                                    const char *a1, const char *a2) {
  return server_start_with(ts, SERVER_CPU, secret, tag, a1, a2);
}

static inline void server_start(test_server *ts, const char *secret, const char *tag) {
  int rc = server_start_args(ts, secret, tag, NULL, NULL);
  ck_assert_msg(rc == 0, "tstor serve did not start; see %s", ts->log);
}

/* A test process's secret file, under the build tree, and its Unix socket
 * path, under /tmp (sun_path holds 108 bytes: the build tree's path may be
 * longer). Both carry the pid: Check runs each test in a process of its own. */
typedef struct test_files {
  char secret[256];
  char unix_sock[108];
} test_files;

static inline void test_files_make(test_files *tf, const char *tag, const char *secret_text) {
  snprintf(tf->secret, sizeof tf->secret, "%s/remote-%s-secret-%d", TSTOR_TEST_BUILDDIR, tag,
           (int)getpid());
  write_secret(tf->secret, secret_text, 0600);
  snprintf(tf->unix_sock, sizeof tf->unix_sock, "/tmp/tstor-%s-%d.sock", tag, (int)getpid());
  unlink(tf->unix_sock);
}

static inline void test_files_remove(const test_files *tf) {
  unlink(tf->secret);
  unlink(tf->unix_sock);
}

/* A server of cpu:0 and hpu:0 (SERVER_CPU_HPU) on TCP and on tf's socket. */
static inline void server_start_unix(test_server *srv, const test_files *tf, const char *tag) {
  char listen[128];
  snprintf(listen, sizeof listen, "unix:%s", tf->unix_sock);
  int rc = server_start_with(srv, SERVER_CPU_HPU, tf->secret, tag, "--listen", listen);
  ck_assert_msg(rc == 0, "tstor serve did not start; see %s", srv->log);
}

/* SIGTERM, then waits (at most 10 s) for a clean exit; returns its status. */
static inline int server_stop(test_server *ts) {
  if (ts->pid <= 0) return -1;
  kill(ts->pid, SIGTERM);
  int status = -1;
  double deadline = mono_s() + 10;
  while (mono_s() < deadline) {
    if (waitpid(ts->pid, &status, WNOHANG) == ts->pid) {
      ts->pid = 0;
      return status;
    }
    usleep(10000);
  }
  kill(ts->pid, SIGKILL);
  waitpid(ts->pid, &status, 0);
  ts->pid = 0;
  ck_abort_msg("tstor serve did not stop within 10 s of SIGTERM (log %s)", ts->log);
  return status;
}

/* A client config naming the given peers ("127.0.0.1:P, ..."), with cpu and
 * hpu-stub beside it. */
static inline void client_config(char *buf, size_t size, const char *peers, const char *secret,
                                 long timeout_ms, int optional) {
  snprintf(buf, size,
           "[backend cpu]\nlibrary = tstor-cpu.so\n"
           "[backend hpu]\nlibrary = tstor-hpu-stub.so\ndevices = 1\nmemory_mb = 64\n"
           "[backend remote]\nlibrary = tstor-remote.so\noptional = %s\npeers = %s\n"
           "secret_file = %s\ntimeout_ms = %ld\n",
           optional ? "yes" : "no", peers, secret, timeout_ms);
}

#endif
