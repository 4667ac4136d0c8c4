/* `tstor serve`: exports the devices of a tstor context to tstor-remote.so
 * clients (protocol.h, docs/remote.md). The tstor program links it
 * (tools/cmd_serve.c); it is here beside the client so that the two share one
 * protocol header.
 *
 * Threads: the gate (gate.c) accepts connections and runs every handshake,
 * under limits that a flood of connections cannot exhaust; each authenticated
 * client then has a thread of its own (session.c), which owns its blocks; the
 * calling thread starts both and waits for the stop signal (serve.c). */
#ifndef TSTOR_REMOTE_SERVER_H
#define TSTOR_REMOTE_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TSR_MAX_LISTEN 4

typedef struct tsr_server_options {
  /* "HOST:PORT" (numeric), "[V6]:PORT" or "unix:PATH", 1 to TSR_MAX_LISTEN
   * of them; none: "127.0.0.1:13337". */
  const char *listen[TSR_MAX_LISTEN];
  int nlisten;
  const char *secret_file;   /* required; see tsr_secret_read */
  const char *config;        /* tstor config of the exported context; NULL: the default rules */
  uint64_t max_client_bytes; /* what one client may hold at once, all devices together */
  unsigned handshake_ms;     /* how long a connection may take to authenticate; 0: 10000 */
  FILE *log;                 /* one line per client event and refused message; borrowed */
} tsr_server_options;

/* Serves until SIGINT or SIGTERM (which it blocks in the calling thread and
 * every thread it starts; one that comes before the server is ready ends the
 * process as it would have without a server), then frees every client's
 * blocks and everything else. Prints "listening on ADDR" to opt->log once per
 * address when ready. Returns 0 after a clean stop, 1 when it cannot start
 * (the reason printed to log). */
int tsr_serve(const tsr_server_options *opt);

#endif
