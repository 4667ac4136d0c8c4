/* `tstor serve`: exports the host-memory devices of a tstor context to
 * tstor-remote.so clients over UCX (protocol.h). The tstor program links it
 * (tools/cmd_serve.c); it is here beside the client so that the two share one
 * protocol header.
 *
 * One progress thread owns the UCX worker and every client record: it accepts
 * connections, decodes and answers requests, and frees a client's blocks when
 * it says bye or its connection fails. The calling thread only waits for the
 * stop signal. */
#ifndef TSTOR_REMOTE_SERVER_H
#define TSTOR_REMOTE_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct tsr_server_options {
  const char *listen_host;   /* numeric address to bind; NULL: "127.0.0.1" */
  unsigned port;             /* 1..65535 */
  const char *secret_file;   /* required; see tsr_secret_read */
  const char *config;        /* tstor config of the exported context; NULL: the default rules */
  uint64_t max_client_bytes; /* what one client may hold at once, all devices together */
  FILE *log;                 /* one line per client event and refused message; borrowed */
} tsr_server_options;

/* Serves until SIGINT or SIGTERM (which it blocks in the calling thread and
 * every thread it starts), then frees every client's blocks and everything
 * else. Prints "listening on HOST:PORT" to opt->log once ready. Returns 0
 * after a clean stop, 1 when it cannot start (the reason printed to log). */
int tsr_serve(const tsr_server_options *opt);

#endif
