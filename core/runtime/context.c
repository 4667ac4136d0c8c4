/* Contexts: a configuration, the modules it loaded, their registry.
 *
 * A context is refcounted: the opener holds one reference, and every storage,
 * stream and event holds another. Closing drops the opener's; the modules are
 * unloaded when the last reference goes, so a storage outliving its context
 * keeps working and its backend stays mapped. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void destroy(tstor_context *ctx) {
  tstor__unload_backends(ctx);
  tstor__registry_free(ctx);
  tstor__config_free(ctx->config);
  tstor__free(ctx);
}

void tstor__ctx_release(tstor_context *ctx) {
  /* acq_rel rather than release + an acquire fence: the same ordering, and
   * one ThreadSanitizer understands (it ignores standalone fences). */
  long before = atomic_fetch_sub_explicit(&ctx->refs, 1, memory_order_acq_rel);
  if (before > 1) return;
  if (before < 1) tstor__misuse("context", ctx, "released more times than retained");
  destroy(ctx);
}

static int resolve_default_device(tstor_context *ctx) {
  const tstor__config *cfg = ctx->config;
  const char *env = secure_getenv("TSTOR_DEFAULT_DEVICE");
  const char *name = env && *env ? env : cfg->default_device ? cfg->default_device : "cpu";
  int rc = tstor__device_lookup(ctx, name, &ctx->default_device);
  if (rc == 0) return 0;
  if (env && *env) {
    tstor__err_prefix("TSTOR_DEFAULT_DEVICE=%s", env);
  } else if (cfg->default_device) {
    tstor__err_prefix("%s:%d: default_device", cfg->name, cfg->default_device_line);
  } else {
    tstor__err_prefix("%s: no default_device set and no cpu device", cfg->name);
  }
  return TSTOR_ECONFIG;
}

/* Takes ownership of cfg in every case. */
static int open_with_config(tstor__config *cfg, tstor_context **out) {
  tstor_context *ctx = tstor__calloc(1, sizeof *ctx);
  if (!ctx) {
    tstor__config_free(cfg);
    return tstor__err(TSTOR_ENOMEM, "out of memory opening a context");
  }
  atomic_init(&ctx->refs, 1);
  ctx->config = cfg;
  ctx->log_level = cfg->log_level;
  ctx->host_type = -1;
  const char *log = secure_getenv("TSTOR_LOG");
  int rc = 0;
  if (log && *log && tstor__parse_log_level(log, &ctx->log_level) != 0)
    rc = tstor__err(TSTOR_ECONFIG, "TSTOR_LOG=%s: expected error, warn, info or debug", log);
  if (rc == 0) rc = tstor__load_backends(ctx);
  if (rc == 0) {
    tstor__registry_finish(ctx);
    rc = resolve_default_device(ctx);
  }
  if (rc == 0) rc = tstor__handle_add(ctx);
  if (rc != 0) {
    destroy(ctx);
    return rc;
  }
  tstor__err_clear();
  *out = ctx;
  return 0;
}

/* The installed configuration (make install writes it), unless
 * $TSTOR_SYSTEM_CONFIG names another file, or none when empty; NULL when
 * there is none to read. */
static const char *system_config(void) {
  const char *env = secure_getenv("TSTOR_SYSTEM_CONFIG");
  const char *path = env ? env : TSTOR_SYSTEM_CONFIG;
  return *path && access(path, F_OK) == 0 ? path : NULL;
}

int tstor_context_open(const char *path, tstor_context **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "context_open: NULL out");
  *out = NULL;
  if (!path) {
    const char *env = secure_getenv("TSTOR_CONFIG");
    path = env && *env ? env : system_config();
  }
  tstor__config *cfg;
  int rc = path ? tstor__config_load(path, &cfg)
                : tstor__config_parse(tstor__default_config,
                                      tstor__config_text_len(tstor__default_config),
                                      "embedded default", NULL, &cfg);
  if (rc) return rc;
  return open_with_config(cfg, out);
}

int tstor_context_open_string(const char *ini_text, const char *name, tstor_context **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "context_open_string: NULL out");
  *out = NULL;
  if (!ini_text) return tstor__err(TSTOR_EINVAL, "context_open_string: NULL text");
  tstor__config *cfg;
  int rc = tstor__config_parse(ini_text, tstor__config_text_len(ini_text), name ? name : "<string>",
                               NULL, &cfg);
  if (rc) return rc;
  return open_with_config(cfg, out);
}

/* ------------------------------------------------------ default context */

static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(tstor_context *) default_ctx;

int tstor_context_default(tstor_context **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "context_default: NULL out");
  tstor_context *ctx = atomic_load_explicit(&default_ctx, memory_order_acquire);
  if (TSTOR__LIKELY(ctx != NULL)) {
    *out = ctx;
    return 0;
  }
  pthread_mutex_lock(&default_lock);
  ctx = atomic_load_explicit(&default_ctx, memory_order_relaxed);
  int rc = 0;
  if (!ctx) {
    rc = tstor_context_open(NULL, &ctx);
    if (rc == 0) atomic_store_explicit(&default_ctx, ctx, memory_order_release);
  }
  pthread_mutex_unlock(&default_lock);
  *out = ctx;
  return rc;
}


/* Drops the default context at exit so that leak checkers see a clean process;
 * storages still alive keep it (and their modules) until they go. */
__attribute__((destructor)) static void close_default(void) {
  tstor_context *ctx = atomic_exchange(&default_ctx, NULL);
  if (ctx) tstor__ctx_release(ctx);
}

void tstor_context_close(tstor_context *ctx) {
  if (!ctx) return;
  if (ctx == atomic_load(&default_ctx)) return; /* the process owns that one */
  /* A second close would drop a reference some storage holds (or free the
   * context again): caught by the set of open handles, alive or freed. */
  if (TSTOR__UNLIKELY(!tstor__handle_remove(ctx)))
    tstor__misuse("context", ctx, "closed twice, or never opened");
  tstor__ctx_release(ctx);
}

const char *tstor_context_config_name(tstor_context *ctx) {
  if (tstor__ctx(&ctx) != 0) return NULL;
  return ctx->config->name;
}

int tstor_backend_count(tstor_context *ctx) {
  int rc = tstor__ctx(&ctx);
  return rc ? rc : ctx->nbackends;
}

int tstor_backend_get(tstor_context *ctx, int i, tstor_backend_info *out) {
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "backend_get: NULL out");
  const size_t first = offsetof(tstor_backend_info, optional) + sizeof out->optional;
  size_t n = tstor__out_struct_size(out->struct_size, first, sizeof *out, "backend_get",
                                    "tstor_backend_info");
  if (n == 0) return TSTOR_EINVAL;
  if (i < 0 || i >= ctx->nbackends)
    return tstor__err(TSTOR_ERANGE, "backend index %d out of range (%d backends)", i,
                      ctx->nbackends);
  tstor_backend_info info = ctx->backends[i].info;
  info.struct_size = (uint32_t)n;
  memcpy(out, &info, n);
  return 0;
}
