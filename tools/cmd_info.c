/* tstor info: what this installation and its config provide. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <tstor/typed.h>

#include "commands.h"

static const char *state_name(tstor_backend_state s) {
  switch (s) {
    case TSTOR_BACKEND_LOADED: return "loaded";
    case TSTOR_BACKEND_DECLINED: return "declined";
    case TSTOR_BACKEND_FAILED: return "failed";
    case TSTOR_BACKEND_DISABLED: return "disabled";
  }
  return "?";
}

static const char *path_name(int path) {
  switch (path) {
    case TSTOR_COPY_DIRECT: return "direct";
    case TSTOR_COPY_HOST: return "host";
    case TSTOR_COPY_STAGED: return "staged";
    case TSTOR_COPY_CHECK: return "check";
    case TSTOR_COPY_NONE: return "-";
  }
  return "?";
}

/* "4.0 MiB" */
static const char *mib(uint64_t n, char *buf, size_t len) {
  snprintf(buf, len, "%.1f MiB", (double)n / (1 << 20));
  return buf;
}

/* What the type's backend offers (TSTOR_DEVICE_CAP_*), and what each device
 * reports of itself (backend ABI 1.5). */
static void print_properties(tstor_context *ctx, int type, int count) {
  for (int d = 0; d < count; d++) {
    tstor_device_properties p = TSTOR_DEVICE_PROPERTIES_INIT;
    if (tstor_device_get_properties(ctx, (tstor_device){type, d}, &p) != 0) continue;
    if (d == 0) {
      printf("    offers:");
      int any = 0;
#define INFO_CAP(name, bit, text)                 \
  if (p.capabilities & TSTOR_DEVICE_CAP_##name) { \
    printf("%s %s", any ? "," : "", text);        \
    any = 1;                                      \
  }
      TSTOR_DEVICE_CAP_MAP(INFO_CAP)
#undef INFO_CAP
      printf("%s\n", any ? "" : " nothing optional");
    }
    if (!p.reported) continue;
    char a[32], b[32], c[32];
    printf("    %s:%d:", tstor_device_type_name(ctx, type), d);
    if (p.reported & TSTOR_PROP_TOTAL) printf(" %s total", mib(p.total_bytes, a, sizeof a));
    if (p.reported & TSTOR_PROP_FREE) printf(", %s free", mib(p.free_bytes, b, sizeof b));
    if (p.reported & TSTOR_PROP_MAX_ALLOCATION)
      printf(", largest allocation %s", mib(p.max_allocation, c, sizeof c));
    if (p.reported & TSTOR_PROP_ALIGNMENT)
      printf(", aligned to %llu", (unsigned long long)p.alignment);
    if (p.reported & TSTOR_PROP_ID) printf(", id %s", p.id);
    printf("\n");
  }
}

int tstor_cmd_info(int argc, char **argv) {
  const char *config = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
      config = argv[++i];
    } else if (strcmp(argv[i], "--help") == 0) {
      printf("usage: tstor info [--config FILE]\n\n"
             "Shows the tstor version, the config in use, each configured backend and\n"
             "its state, the devices, and how bytes move between device types.\n");
      return 0;
    } else {
      fprintf(stderr, "tstor info: unknown argument '%s' (try tstor info --help)\n", argv[i]);
      return EXIT_USAGE;
    }
  }
  tstor_context *ctx;
  int rc = tstor_open_for_command(config, &ctx);
  if (rc) return rc;

  printf("tstor %s\n", tstor_version_string());
  printf("config: %s\n", tstor_context_config_name(ctx));
  tstor_device def;
  char name[64];
  if (tstor_device_default(ctx, &def) == 0 && tstor_device_format(ctx, def, name, sizeof name) == 0)
    printf("default device: %s\n", name);
  static const char *const policies[] = {"auto: measured within large calls, the faster kept",
                                         "streaming", "ordinary"};
  printf("host work: %d thread%s; stores for large copies, fills and conversions: %s\n",
         tstor_get_num_threads(), tstor_get_num_threads() == 1 ? "" : "s",
         policies[tstor_get_store_policy()]);

  printf("\nbackends:\n");
  for (int i = 0; i < tstor_backend_count(ctx); i++) {
    tstor_backend_info b = TSTOR_BACKEND_INFO_INIT;
    if (tstor_backend_get(ctx, i, &b) != 0) continue;
    printf("  %-10s %-9s%s %s%s%s\n", b.name, state_name(b.state), b.optional ? " (optional)" : "",
           b.library, b.message[0] ? "\n             reason: " : "", b.message);
  }

  int ntypes = tstor_device_type_count(ctx);
  printf("\ndevices:\n");
  for (int t = 0; t < ntypes; t++) {
    int count = tstor_device_count(ctx, t);
    printf("  %-10s %d device%s", tstor_device_type_name(ctx, t), count, count == 1 ? "" : "s");
    for (int d = 0; d < count && d < 8; d++) printf("%s%s:%d", d ? ", " : "  (", tstor_device_type_name(ctx, t), d);
    printf("%s\n", count > 8 ? ", ...)" : count > 0 ? ")" : "");
    /* What each device stands for, where its backend says (a remote device's
     * peer and the peer's device). */
    for (int d = 0; d < count; d++) {
      char line[320];
      if (tstor_device_describe(ctx, (tstor_device){t, d}, line, sizeof line) == 0 &&
          strstr(line, " -> "))
        printf("    %s\n", line);
    }
    print_properties(ctx, t, count);
  }

  printf("\ncopy table (row: source, column: destination):\n  %-10s", "");
  for (int d = 0; d < ntypes; d++) printf(" %-8s", tstor_device_type_name(ctx, d));
  printf("\n");
  for (int s = 0; s < ntypes; s++) {
    printf("  %-10s", tstor_device_type_name(ctx, s));
    for (int d = 0; d < ntypes; d++) printf(" %-8s", path_name(tstor_copy_path_of(ctx, s, d)));
    printf("\n");
  }
  printf("  (direct: a backend kernel; host: memcpy; staged: through host memory;\n"
         "   check: sizes only, the destination holds no data; -: impossible)\n");
  tstor_context_close(ctx);
  return 0;
}
