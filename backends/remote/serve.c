/* `tstor serve` (server.h): the start, the signals and the stop. The gate
 * (gate.c) and the sessions (session.c) do the serving.
 *
 * Signals. SIGINT and SIGTERM are blocked in every thread from the first
 * line, and one thread waits for them: before the server is ready it ends the
 * process as the signal's default action would (there is nothing to clean up
 * that outlives the process), after it, it starts the clean stop. Nothing in
 * the start can hold a signal off: the secret file is opened without
 * blocking. */
#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "server_state.h"

/* Every device with data: host-memory ones served from their own memory, the
 * others staged through host memory (which needs a host-memory device to
 * wrap it). */
static int find_devices(server *s) {
  int ntypes = tstor_device_type_count(s->ctx), have_host = 0;
  s->host_index = -1;
  for (int t = 0; t < ntypes && !have_host; t++)
    if (tstor_device_type_flags(s->ctx, t) & TSTOR_DEVICE_HOST) {
      s->host = (tstor_device){t, 0};
      have_host = 1;
    }
  for (int t = 0; t < ntypes; t++) {
    unsigned flags = tstor_device_type_flags(s->ctx, t);
    const char *name = tstor_device_type_name(s->ctx, t);
    if (flags & TSTOR_DEVICE_NO_DATA) {
      srv_log(s, "not exporting %s: its devices hold no data", name);
      continue;
    }
    if (!(flags & TSTOR_DEVICE_HOST) && !have_host) {
      srv_log(s, "not exporting %s: staging its bytes needs a host-memory device in the config",
              name);
      continue;
    }
    int n = tstor_device_count(s->ctx, t);
    for (int i = 0; i < n && s->ndevices < TSR_MAX_DEVICES; i++) {
      tstor_device d = {t, i};
      tsr_device_desc *desc = &s->devices[s->ndevices];
      if (tstor_device_format(s->ctx, d, desc->name, sizeof desc->name) != 0) continue;
      /* Its total memory, where its backend reports it (the welcome's
       * capacity, which clients report as their device's total). */
      tstor_device_properties props = TSTOR_DEVICE_PROPERTIES_INIT;
      desc->capacity = 0;
      if (tstor_device_get_properties(s->ctx, d, &props) == 0 && props.reported & TSTOR_PROP_TOTAL)
        desc->capacity = props.total_bytes;
      s->staged[s->ndevices] = !(flags & TSTOR_DEVICE_HOST);
      if (have_host && d.type == s->host.type && d.index == s->host.index)
        s->host_index = (int)s->ndevices;
      s->tdev[s->ndevices++] = d;
    }
  }
  return s->ndevices ? 0 : -1;
}

static int start_listening(server *s) {
  static const char *const fallback = "127.0.0.1:13337";
  int n = s->opt->nlisten > 0 ? s->opt->nlisten : 1;
  for (int i = 0; i < n && i < TSR_MAX_LISTEN; i++) {
    const char *text = s->opt->nlisten > 0 ? s->opt->listen[i] : fallback;
    char why[256];
    if (tsr_addr_parse(text, 1, &s->listen_addr[i], why, sizeof why) != 0 ||
        (s->listen_fd[i] = tsr_listen(&s->listen_addr[i], why, sizeof why)) < 0) {
      srv_log(s, "%s", why);
      return -1;
    }
    s->nlisten = i + 1;
  }
  return 0;
}

static void stop_listening(server *s) {
  for (int i = 0; i < s->nlisten; i++) {
    close(s->listen_fd[i]);
    if (s->listen_addr[i].sa.ss_family == AF_UNIX)
      unlink(((struct sockaddr_un *)&s->listen_addr[i].sa)->sun_path);
  }
  s->nlisten = 0;
}

/* ---------------------------------------------------------------- signals */

enum { PHASE_STARTING, PHASE_SERVING, PHASE_DONE };

typedef struct signals {
  server *s;
  sigset_t set;
  atomic_int phase;
  int received; /* the stop signal, once served */
  sem_t stop;   /* posted when the serving server is to stop */
} signals;

static void *signal_thread(void *arg) {
  signals *g = arg;
  for (;;) {
    int sig = 0;
    if (sigwait(&g->set, &sig) != 0) continue;
    int phase = atomic_load(&g->phase);
    if (phase == PHASE_DONE) return NULL;
    if (phase == PHASE_STARTING) {
      srv_log(g->s, "%s before the server was ready: exiting",
              sig == SIGINT ? "SIGINT" : "SIGTERM");
      signal(sig, SIG_DFL);
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, sig);
      pthread_sigmask(SIG_UNBLOCK, &one, NULL);
      raise(sig); /* the default action: the process ends, as with no server */
      continue;
    }
    g->received = sig;
    sem_post(&g->stop);
    return NULL;
  }
}

/* ------------------------------------------------------------------ serve */

static int start(server *s) {
  char why[512];
  if (tsr_secret_read(s->opt->secret_file, &s->secret, &s->secret_len, why, sizeof why) != 0) {
    srv_log(s, "%s", why);
    return -1;
  }
  int rc = tstor_context_open(s->opt->config, &s->ctx);
  if (rc) {
    srv_log(s, "cannot open %s: %s: %s", s->opt->config ? s->opt->config : "the default config",
            tstor_strerror(rc), tstor_last_error());
    return -1;
  }
  if (find_devices(s) != 0) {
    srv_log(s, "the config has no device with data to export");
    return -1;
  }
  if ((s->wake_fd = eventfd(0, EFD_CLOEXEC)) < 0) {
    srv_log(s, "eventfd: %s", strerror(errno));
    return -1;
  }
  return start_listening(s);
}

int tsr_serve(const tsr_server_options *opt) {
  server *s = calloc(1, sizeof *s);
  signals *g = calloc(1, sizeof *g);
  if (!s || !g) {
    free(s);
    free(g);
    return 1;
  }
  tsr_server_options defaults = *opt;
  if (!defaults.handshake_ms) defaults.handshake_ms = 10000;
  s->opt = &defaults;
  s->log = opt->log ? opt->log : stderr;
  s->wake_fd = -1;
  atomic_init(&s->stop, 0);
  atomic_init(&s->total_held, 0);
  pthread_mutex_init(&s->mu, NULL);

  g->s = s;
  sigemptyset(&g->set);
  sigaddset(&g->set, SIGINT);
  sigaddset(&g->set, SIGTERM);
  atomic_init(&g->phase, PHASE_STARTING);
  sem_init(&g->stop, 0, 0);
  sigset_t old_mask;
  pthread_sigmask(SIG_BLOCK, &g->set, &old_mask); /* every later thread inherits it */
  signal(SIGPIPE, SIG_IGN);
  pthread_t sig_thread, gate_thread;
  int have_signals = pthread_create(&sig_thread, NULL, signal_thread, g) == 0;
  int have_gate = 0, status = 1;

  if (!have_signals) {
    srv_log(s, "cannot start the signal thread");
  } else if (start(s) == 0) {
    if (pthread_create(&gate_thread, NULL, srv_gate, s) != 0) {
      srv_log(s, "cannot start the gate thread");
    } else {
      have_gate = 1;
      atomic_store(&g->phase, PHASE_SERVING);
      for (int i = 0; i < s->nlisten; i++)
        srv_log(s, "listening on %s; %u device(s); at most %llu MiB per client",
                s->listen_addr[i].text, s->ndevices,
                (unsigned long long)(s->opt->max_client_bytes >> 20));
      while (sem_wait(&g->stop) != 0 && errno == EINTR) {
      }
      srv_log(s, "%s: stopping", g->received == SIGINT ? "SIGINT" : "SIGTERM");
      status = 0;
    }
  }

  atomic_store(&s->stop, 1);
  if (have_gate) {
    uint64_t one = 1;
    if (write(s->wake_fd, &one, sizeof one) < 0) srv_log(s, "eventfd: %s", strerror(errno));
    pthread_join(gate_thread, NULL);
  }
  srv_sessions_reap(s, 1);
  stop_listening(s);
  if (have_signals) {
    /* Serving, it has posted the stop and returned; otherwise it still waits. */
    if (atomic_exchange(&g->phase, PHASE_DONE) != PHASE_SERVING) pthread_kill(sig_thread, SIGTERM);
    pthread_join(sig_thread, NULL);
  }
  if (s->wake_fd >= 0) close(s->wake_fd);
  if (s->ctx) tstor_context_close(s->ctx);
  tsr_secret_free(s->secret, s->secret_len);
  if (status == 0) srv_log(s, "stopped");
  pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
  sem_destroy(&g->stop);
  pthread_mutex_destroy(&s->mu);
  free(g);
  free(s);
  return status;
}
