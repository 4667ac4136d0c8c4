/* tstor serve: exports the host-memory devices of a context to remote
 * clients (backends/remote/server.h, docs/remote.md). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "server.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: tstor serve --secret-file FILE [--listen ADDR:PORT] [--config FILE]\n"
          "                   [--max-client-mb N]\n\n"
          "Exports the host-memory devices of the context that FILE (or the default\n"
          "config) opens to tstor-remote.so clients that hold the secret, until SIGINT or\n"
          "SIGTERM. ADDR is numeric and defaults to 127.0.0.1 (this machine only); PORT\n"
          "defaults to 13337. --max-client-mb caps what one client may hold (default 4096).\n"
          "The secret file must be readable by its owner only. UCX traffic is not encrypted.\n");
}

/* "ADDR:PORT", "[V6]:PORT" or ":PORT"; addr is written into host. */
static int parse_listen(const char *text, char *host, size_t host_size, unsigned *port) {
  const char *colon = strrchr(text, ':');
  if (!colon) return -1;
  size_t n = (size_t)(colon - text);
  const char *h = text;
  if (n >= 2 && text[0] == '[' && colon[-1] == ']') {
    h = text + 1;
    n -= 2;
  }
  if (n >= host_size) return -1;
  memcpy(host, h, n);
  host[n] = '\0';
  if (n == 0) snprintf(host, host_size, "127.0.0.1");
  char *end;
  unsigned long p = strtoul(colon + 1, &end, 10);
  if (*end || colon[1] == '\0' || p == 0 || p > 65535) return -1;
  *port = (unsigned)p;
  return 0;
}

int tstor_cmd_serve(int argc, char **argv) {
  char host[128] = "127.0.0.1";
  tsr_server_options opt = {.listen_host = host, .port = 13337, .log = stderr,
                            .max_client_bytes = (uint64_t)4096 << 20};
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
      if (parse_listen(v, host, sizeof host, &opt.port) != 0) {
        fprintf(stderr, "tstor serve: --listen %s: not ADDR:PORT\n", v);
        return EXIT_USAGE;
      }
    } else if (strcmp(a, "--secret-file") == 0) {
      opt.secret_file = v;
    } else if (strcmp(a, "--config") == 0) {
      opt.config = v;
    } else if (strcmp(a, "--max-client-mb") == 0) {
      char *end;
      unsigned long long mb = strtoull(v, &end, 10);
      if (*end || !*v || mb == 0 || mb > ((uint64_t)1 << 40)) {
        fprintf(stderr, "tstor serve: --max-client-mb %s: a number of MiB, 1 or more\n", v);
        return EXIT_USAGE;
      }
      opt.max_client_bytes = (uint64_t)mb << 20;
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
