/* tstor serve: exports the devices of a context to remote clients
 * (backends/remote/server.h, docs/remote.md). */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "server.h"
#include "wire.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: tstor serve --secret-file FILE [--listen ADDR ...] [--config FILE]\n"
          "                   [--max-client-mb N] [--handshake-timeout-ms N]\n\n"
          "Exports the devices of the context that --config (or the default config)\n"
          "opens to tstor-remote.so clients that hold the secret in --secret-file (a file\n"
          "readable by its owner only), until SIGINT or SIGTERM. Devices of host memory\n"
          "are served from it; the others (hpu, cuda) through host memory.\n\n"
          "  --listen ADDR  HOST:PORT (numeric; default 127.0.0.1:13337, this machine only),\n"
          "                 [V6]:PORT, or unix:PATH; up to %d of them\n"
          "  --max-client-mb N         what one client may hold (default 4096)\n"
          "  --handshake-timeout-ms N  how long a connection may take to authenticate\n"
          "                            (default 10000)\n\n"
          "Traffic is not encrypted: across networks you do not control, use a VPN or a\n"
          "tunnel (docs/remote.md).\n",
          TSR_MAX_LISTEN);
}

/* A number from 1 to max, or -1. */
static long long positive(const char *v, unsigned long long max) {
  char *end;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  if (*end || !*v || *v == '-' || errno || n == 0 || n > max) return -1;
  return (long long)n;
}

int tstor_cmd_serve(int argc, char **argv) {
  tsr_server_options opt = {.log = stderr, .max_client_bytes = (uint64_t)4096 << 20};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    }
    if (!v) {
      fprintf(stderr, "tstor serve: %s needs a value\n", a);
      return EXIT_USAGE;
    }
    if (strcmp(a, "--listen") == 0) {
      tsr_addr addr;
      char why[256];
      if (opt.nlisten == TSR_MAX_LISTEN) {
        fprintf(stderr, "tstor serve: at most %d --listen addresses\n", TSR_MAX_LISTEN);
        return EXIT_USAGE;
      }
      if (tsr_addr_parse(v, 1, &addr, why, sizeof why) != 0) {
        fprintf(stderr, "tstor serve: --listen %s\n", why);
        return EXIT_USAGE;
      }
      opt.listen[opt.nlisten++] = v;
    } else if (strcmp(a, "--secret-file") == 0) {
      opt.secret_file = v;
    } else if (strcmp(a, "--config") == 0) {
      opt.config = v;
    } else if (strcmp(a, "--max-client-mb") == 0) {
      long long mb = positive(v, (uint64_t)1 << 40);
      if (mb < 0) {
        fprintf(stderr, "tstor serve: --max-client-mb %s: a number of MiB, 1 or more\n", v);
        return EXIT_USAGE;
      }
      opt.max_client_bytes = (uint64_t)mb << 20;
    } else if (strcmp(a, "--handshake-timeout-ms") == 0) {
      long long ms = positive(v, 3600000);
      if (ms < 0) {
        fprintf(stderr, "tstor serve: --handshake-timeout-ms %s: 1 to 3600000\n", v);
        return EXIT_USAGE;
      }
      opt.handshake_ms = (unsigned)ms;
    } else {
      fprintf(stderr, "tstor serve: unknown option %s\n\n", a);
      usage(stderr);
      return EXIT_USAGE;
    }
    i++;
  }
  if (!opt.secret_file) {
    fprintf(stderr, "tstor serve: --secret-file is required\n\n");
    usage(stderr);
    return EXIT_USAGE;
  }
  return tsr_serve(&opt) == 0 ? 0 : EXIT_FAILED;
}
