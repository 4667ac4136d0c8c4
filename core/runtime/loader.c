/* Finding, loading and initialising backend modules, and the registrar they
 * call back into. */
#include "internal.h"

#include "runtime/fault.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

/* The smallest entry table the core accepts: the header and init. */
#define TSTOR__ENTRY_MIN (offsetof(tstor_backend_def, init) + sizeof(void (*)(void)))

static int is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The folder a search entry starting with $ORIGIN (the running program's
 * folder) or $LIBDIR (the folder libtstor itself was loaded from) stands
 * for, so that a program shipped with its own backends finds them wherever
 * it is copied; *len gets the token's length. NULL when the entry starts
 * with neither, and for $ORIGIN in a setuid or setgid program (ld.so ignores
 * it there too: a hard link could move the program next to any module). */
static const char *origin_of(const char *entry, size_t n, size_t *len, char *buf, size_t size) {
  static const char origin[] = "$ORIGIN", libdir[] = "$LIBDIR";
  const char *token = n >= sizeof origin - 1 && !memcmp(entry, origin, sizeof origin - 1) ? origin
                      : n >= sizeof libdir - 1 && !memcmp(entry, libdir, sizeof libdir - 1) ? libdir
                                                                                             : NULL;
  if (!token) return NULL;
  *len = strlen(token);
  if (n > *len && entry[*len] != '/') return NULL; /* $ORIGINAL is no token */
  if (token == origin) {
    if (getauxval(AT_SECURE)) return NULL;
    ssize_t got = readlink("/proc/self/exe", buf, size - 1);
    if (got <= 0) return NULL;
    buf[got] = '\0';
  } else {
    Dl_info info;
    if (!dladdr((void *)origin_of, &info) || !info.dli_fname) return NULL;
    if (!realpath(info.dli_fname, buf)) return NULL;
  }
  char *slash = strrchr(buf, '/');
  if (!slash) return NULL;
  *slash = '\0';
  return buf;
}

/* Tries `dir/lib` for each directory of a colon-separated list; relative
 * directories are taken against the config's folder, and $LIBDIR or
 * $ORIGIN at an entry's start expanded (origin_of). *found is the first
 * path that exists, or NULL; fails only for want of memory. */
static int search_dirs(const tstor__config *cfg, const char *list, const char *lib,
                       char *tried, size_t tried_size, char **found) {
  const char *p = list;
  *found = NULL;
  while (p && *p) {
    const char *colon = strchr(p, ':');
    size_t n = colon ? (size_t)(colon - p) : strlen(p);
    char where[PATH_MAX];
    size_t token = 0;
    const char *origin = n > 0 && p[0] == '$' ? origin_of(p, n, &token, where, sizeof where) : NULL;
    if (n > 0 && p[0] == '$' && !origin) {
      /* an unknown token, or $ORIGIN where it is not honoured: skipped, said
       * among the folders tried */
      size_t used = strlen(tried);
      snprintf(tried + used, tried_size - used, "%s%.*s (not expanded)", used ? ", " : "", (int)n, p);
    } else if (n > 0) {
      char *path;
      if (origin)
        path = tstor__asprintf("%s%.*s/%s", origin, (int)(n - token), p + token, lib);
      else if (p[0] == '/' || !cfg->dir)
        path = tstor__asprintf("%.*s/%s", (int)n, p, lib);
      else
        path = tstor__asprintf("%s/%.*s/%s", cfg->dir, (int)n, p, lib);
      if (!path) return tstor__err(TSTOR_ENOMEM, "out of memory resolving %s", lib);
      if (!origin && p[0] != '/' && !cfg->dir) {
        /* A relative directory with nothing to be relative to: skip it rather
         * than search the working directory. */
        tstor__free(path);
      } else if (is_file(path)) {
        *found = path;
        return 0;
      } else {
        size_t used = strlen(tried);
        snprintf(tried + used, tried_size - used, "%s%s", used ? ", " : "", path);
        tstor__free(path);
      }
    }
    p = colon ? colon + 1 : NULL;
  }
  return 0;
}

/* Whether `st` (of `what` at `path`) could have been put there or changed by
 * someone other than root and the caller; 0 or TSTOR_EACCES saying why, as
 * ssh does for its keys. A folder others may write to is fine when sticky
 * (/tmp): they cannot replace what they do not own, and the module's own
 * owner is checked. */
static int check_owner_and_mode(const char *library, const char *what, const char *path,
                                const struct stat *st) {
  uid_t me = geteuid();
  if (st->st_uid != 0 && st->st_uid != me)
    return tstor__err(TSTOR_EACCES,
                      "refusing to load %s: %s %s is owned by uid %u, neither root nor the "
                      "caller (uid %u)",
                      library, what, path, (unsigned)st->st_uid, (unsigned)me);
  int sticky_dir = S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX);
  if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !sticky_dir)
    return tstor__err(TSTOR_EACCES,
                      "refusing to load %s: %s %s is writable by %s (mode %04o); "
                      "chmod go-w it",
                      library, what, path,
                      (st->st_mode & S_IWOTH) ? "others" : "its group",
                      (unsigned)(st->st_mode & 07777));
  return 0;
}

/* The module file at `path` (after symbolic links), the folder it was found
 * in and the folder it really lies in must be writable by root or the caller
 * only: otherwise any user could have planted the code the caller is about to
 * run, perhaps as root (a config in a world-writable folder). */
static int check_trusted(const char *path) {
  char real[PATH_MAX], dir[PATH_MAX];
  struct stat st;
  if (!realpath(path, real))
    return tstor__err(TSTOR_ELOAD, "cannot load %s: %s", path, strerror(errno));
  if (stat(real, &st) != 0)
    return tstor__err(TSTOR_ELOAD, "cannot load %s: %s", path, strerror(errno));
  int rc = check_owner_and_mode(path, "the module file", real, &st);
  for (int i = 0; i < 2 && rc == 0; i++) {
    /* i = 0: the folder the path names; 1: the one the real file is in */
    const char *of = i == 0 ? path : real;
    const char *slash = strrchr(of, '/');
    if (!slash) continue;
    int n = slash == of ? 1 : (int)(slash - of);
    snprintf(dir, sizeof dir, "%.*s", n, of);
    if (stat(dir, &st) != 0)
      return tstor__err(TSTOR_ELOAD, "cannot load %s: %s: %s", path, dir, strerror(errno));
    rc = check_owner_and_mode(path, "its folder", dir, &st);
  }
  return rc;
}

/* Resolves a section's library to a path: absolute as given; relative against
 * $TSTOR_BACKEND_DIR, backend_dir, then the config file's folder and, where
 * the config sets no backend_dir, the folder the backends are installed in;
 * never the working directory. */
static int resolve_library(tstor_context *ctx, const tstor__section *sec, char **out) {
  const tstor__config *cfg = ctx->config;
  const char *lib = sec->library;
  *out = NULL;
  if (lib[0] == '/') {
    /* dlopen would wait forever on a FIFO and read a device to its end. */
    struct stat st;
    if (stat(lib, &st) != 0)
      return tstor__err(TSTOR_ELOAD, "cannot load %s: %s", lib, strerror(errno));
    if (!S_ISREG(st.st_mode))
      return tstor__err(TSTOR_ELOAD, "cannot load %s: not a regular file", lib);
    *out = tstor__strdup(lib);
    return *out ? 0 : tstor__err(TSTOR_ENOMEM, "out of memory");
  }
  char tried[TSTOR__ERRBUF / 2] = "";
  const char *lists[4] = {secure_getenv("TSTOR_BACKEND_DIR"), cfg->backend_dir, cfg->dir,
                          cfg->backend_dir ? NULL : TSTOR_PKGLIBDIR};
  for (int i = 0; i < 4; i++) {
    if (!lists[i] || !*lists[i]) continue;
    int rc = search_dirs(cfg, lists[i], lib, tried, sizeof tried, out);
    if (rc || *out) return rc;
  }
  return tstor__err(TSTOR_ELOAD,
                    "library %s not found (tried: %s); name the folder with backend_dir in "
                    "[tstor] or $TSTOR_BACKEND_DIR",
                    lib, tried);
}

/* The loader lock: held around every init and fini, so that no two of them
 * run at once in the process (backend.h promises it: a module's init and
 * fini share its static state across contexts). Recursive, because a fini
 * may release the last reference to another context and so run another
 * fini on the same thread. */
static pthread_once_t loader_lock_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t loader_lock;

static void loader_lock_init(void) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&loader_lock, &attr);
  pthread_mutexattr_destroy(&attr);
}

static void lock_loader(void) {
  pthread_once(&loader_lock_once, loader_lock_init);
  pthread_mutex_lock(&loader_lock);
}

static void unlock_loader(void) { pthread_mutex_unlock(&loader_lock); }

/* fini is optional, and absent from an entry table too small to hold it. */
static void call_fini(tstor_module *m) {
  if (TSTOR_BACKEND_DEF_HAS(m->entry, fini) && m->entry->fini) {
    lock_loader();
    m->entry->fini(m->state);
    unlock_loader();
  }
}

/* dlsym on a module's handle also finds the symbols of the libraries it
 * links: `entry = rand` would hand back libc's code, which the core would
 * then read as an entry table and call. Accept only a symbol that the module
 * itself defines: the object dladdr finds it in must be the module. */
static int check_own_symbol(void *dl, const void *sym, const char *library, const char *symbol) {
  struct link_map *module = NULL, *owner = NULL;
  Dl_info info;
  if (dlinfo(dl, RTLD_DI_LINKMAP, &module) != 0 || !module)
    return tstor__err(TSTOR_ELOAD, "cannot load %s: dlinfo: %s", library, dlerror());
  if (!dladdr1(sym, &info, (void **)&owner, RTLD_DL_LINKMAP) || !owner)
    return tstor__err(TSTOR_ELOAD, "%s: entry point '%s' lies in no loaded object", library,
                      symbol);
  if (owner != module)
    return tstor__err(TSTOR_ELOAD,
                      "%s: entry point '%s' is defined by %s, not by the module itself",
                      library, symbol, info.dli_fname ? info.dli_fname : "another object");
  return 0;
}

static int load_module(tstor_context *ctx, tstor__backend *b, tstor__section *sec) {
  char msg[TSTOR__ERRBUF / 2] = "";
  tstor_module *m = tstor__calloc(1, sizeof *m);
  if (!m) return tstor__err(TSTOR_ENOMEM, "out of memory");
  m->ctx = ctx;
  m->section = sec;
  m->path = b->library;

  dlerror();
  int injected = tstor__fault_check(TSTOR_FAULT_DLOPEN);
  m->dl = injected ? NULL : dlopen(m->path, RTLD_NOW | RTLD_LOCAL);
  if (!m->dl) {
    const char *why = injected ? "injected fault" : dlerror();
    tstor__free(m);
    return tstor__err(TSTOR_ELOAD, "cannot load %s: %s", b->library, why ? why : "unknown");
  }
  const char *symbol = sec->entry ? sec->entry : TSTOR_BACKEND_ENTRY_SYMBOL;
  m->entry = dlsym(m->dl, symbol);
  int rc = 0;
  if (!m->entry) {
    rc = tstor__err(TSTOR_ELOAD, "%s has no entry point '%s'", b->library, symbol);
  } else if ((rc = check_own_symbol(m->dl, m->entry, b->library, symbol)) != 0) {
    m->entry = NULL;
  } else if (TSTOR_ABI_MAJOR_OF(m->entry->abi_version) != TSTOR_ABI_MAJOR) {
    rc = tstor__err(TSTOR_EABI,
                    "%s was built for backend ABI %u.%u; this tstor speaks ABI %u.%u",
                    b->library, TSTOR_ABI_MAJOR_OF(m->entry->abi_version),
                    TSTOR_ABI_MINOR_OF(m->entry->abi_version), TSTOR_ABI_MAJOR, TSTOR_ABI_MINOR);
  } else if (m->entry->struct_size < TSTOR__ENTRY_MIN || !m->entry->init) {
    rc = tstor__err(TSTOR_EABI, "%s: entry table too small (%u bytes) or without init",
                    b->library, m->entry->struct_size);
  }
  if (rc == 0) {
    lock_loader();
    m->registering = 1;
    rc = m->entry->init(&tstor__registrar, m, &m->state, msg, sizeof msg);
    m->registering = 0;
    unlock_loader();
    msg[sizeof msg - 1] = '\0';
    if (rc == 0) {
      m->initialized = 1;
      for (int i = 0; i < sec->nkeys && rc == 0; i++) {
        if (!sec->keys[i].used)
          rc = tstor__err(TSTOR_ECONFIG, "%s:%d: unknown key '%s' in [backend %s]",
                          ctx->config->name, sec->keys[i].line, sec->keys[i].key, sec->name);
      }
    } else if (rc == TSTOR_EDECLINED) {
      /* A backend may decline before reading its keys, so an unread key is
       * only suspicious here; backends should read their keys first. */
      for (int i = 0; i < sec->nkeys; i++)
        if (!sec->keys[i].used)
          tstor__log(ctx, TSTOR_LOG_WARN, "%s:%d: [backend %s] key '%s' was not read before the backend declined",
                     ctx->config->name, sec->keys[i].line, sec->name, sec->keys[i].key);
      tstor__err(TSTOR_EDECLINED, "%s", msg[0] ? msg : "declined");
    } else if (rc == TSTOR_ECONFIG && !msg[0]) {
      /* a bad key read through the registrar: its detail is already set */
    } else {
      if (rc >= 0 || rc <= TSTOR__ERR_LAST) rc = TSTOR_EBACKEND; /* not one of ours */
      if (m->reg_error[0])
        /* The registrar's reason ("invalid device type name ...", "already
         * registered by backend cpu") says more than the module's summary. */
        tstor__err(rc, "init failed: %s%s%s", msg, msg[0] ? ": " : "", m->reg_error);
      else
        tstor__err(rc, "init failed: %s", msg[0] ? msg : tstor_strerror(rc));
    }
  }
  if (rc != 0) {
    tstor__registry_drop_module(ctx, m);
    if (m->initialized) call_fini(m);
    dlclose(m->dl);
    tstor__free(m);
    return rc;
  }
  b->module = m;
  return 0;
}

int tstor__load_backends(tstor_context *ctx) {
  tstor__config *cfg = ctx->config;
  for (int i = 0; i < cfg->nsections; i++) {
    tstor__section *sec = &cfg->sections[i];
    tstor__backend *b = &ctx->backends[ctx->nbackends++];
    b->info.name = sec->name;
    b->info.optional = sec->optional;
    b->info.library = sec->library;
    b->info.message = "";
    if (!sec->enabled) {
      b->info.state = TSTOR_BACKEND_DISABLED;
      continue;
    }
    int rc = resolve_library(ctx, sec, &b->library);
    if (rc == 0) rc = check_trusted(b->library);
    if (rc == 0) {
      b->info.library = b->library;
      rc = load_module(ctx, b, sec);
    }
    if (rc == 0) {
      b->info.state = TSTOR_BACKEND_LOADED;
      tstor__log(ctx, TSTOR_LOG_INFO, "backend %s loaded from %s", sec->name, b->info.library);
      continue;
    }
    /* A config error is the user's to fix, optional backend or not; its
     * detail names the file and line already. */
    if (rc == TSTOR_ECONFIG) return rc;
    if (rc != TSTOR_EDECLINED) {
      tstor__err_prefix("%s:%d: backend %s", cfg->name, sec->line, sec->name);
      /* Any other failure of an optional backend, lack of memory included
       * (a module that cannot map its arena under ulimit -v), leaves the
       * others usable: config.md promises so. */
      if (!sec->optional) return rc;
    }
    b->message = tstor__strdup(tstor_last_error());
    if (!b->message) return tstor__err(TSTOR_ENOMEM, "out of memory");
    b->info.message = b->message;
    if (rc == TSTOR_EDECLINED) {
      b->info.state = TSTOR_BACKEND_DECLINED;
      tstor__log(ctx, TSTOR_LOG_INFO, "backend %s declined: %s", sec->name, b->message);
      continue;
    }
    b->info.state = TSTOR_BACKEND_FAILED;
    tstor__log(ctx, TSTOR_LOG_INFO, "optional backend not loaded: %s", b->message);
  }
  return 0;
}

void tstor__unload_backends(tstor_context *ctx) {
  for (int i = ctx->nbackends - 1; i >= 0; i--) {
    tstor__backend *b = &ctx->backends[i];
    tstor_module *m = b->module;
    if (m) {
      call_fini(m);
      dlclose(m->dl);
      tstor__free(m);
    }
    tstor__free(b->message);
    tstor__free(b->library);
  }
  ctx->nbackends = 0;
}

/* ------------------------------------------------------------- registrar */

static tstor__kv *find_key(tstor_module *m, const char *key) {
  for (int i = 0; i < m->section->nkeys; i++)
    if (strcmp(m->section->keys[i].key, key) == 0) return &m->section->keys[i];
  return NULL;
}

static const char *reg_config_get(tstor_module *m, const char *key) {
  if (!m || !key) return NULL;
  tstor__kv *kv = find_key(m, key);
  if (!kv) return NULL;
  kv->used = 1;
  return kv->value;
}

/* "FILE:LINE: [backend NAME] key = 'value': reason", the line being the key's
 * (or the section's, for a key that is absent). */
static int reg_config_error(tstor_module *m, const char *key, const char *fmt, ...)
    TSTOR__PRINTF(3, 4);
static int reg_config_error(tstor_module *m, const char *key, const char *fmt, ...) {
  if (!m || !key || !fmt) return tstor__err(TSTOR_EINVAL, "config_error: NULL argument");
  const tstor__kv *kv = find_key(m, key);
  char reason[TSTOR__ERRBUF / 2];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof reason, fmt, ap);
  va_end(ap);
  return tstor__err(TSTOR_ECONFIG, "%s:%d: [backend %s] %s = '%s': %s", m->ctx->config->name,
                    kv ? kv->line : m->section->line, m->section->name, key,
                    kv ? kv->value : "", reason);
}

static int reg_config_int(tstor_module *m, const char *key, long long def, long long min,
                          long long max, long long *out) {
  const char *v = reg_config_get(m, key);
  *out = def;
  if (!v) return 0;
  long long x;
  if (tstor__parse_int(v, &x) != 0 || x < min || x > max)
    return reg_config_error(m, key, "expected an integer from %lld to %lld", min, max);
  *out = x;
  return 0;
}

static int reg_config_bool(tstor_module *m, const char *key, int def, int *out) {
  const char *v = reg_config_get(m, key);
  *out = def;
  if (!v) return 0;
  if (tstor__parse_bool(v, out) != 0) return reg_config_error(m, key, "expected yes or no");
  return 0;
}

static void reg_log(tstor_module *m, int level, const char *fmt, ...) {
  if (!m || level > m->ctx->log_level) return;
  char buf[TSTOR__ERRBUF];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fprintf(stderr, "tstor: %s: %s\n", m->section->name, buf);
}

static int reg_set_error(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tstor__verr(code, fmt, ap);
  va_end(ap);
  return code;
}

/* The registration calls, keeping the first failure's detail for the
 * message of a failed init (load_module). */
static int registered(tstor_module *m, int rc) {
  if (rc != 0 && m && !m->reg_error[0])
    snprintf(m->reg_error, sizeof m->reg_error, "%s", tstor_last_error());
  return rc;
}

static int reg_register_device_type(tstor_module *m, const tstor_device_ops *ops, void *state) {
  return registered(m, tstor__registry_register_device_type(m, ops, state));
}

static int reg_register_allocator(tstor_module *m, const char *type,
                                  const tstor_allocator_ops *ops, void *state) {
  return registered(m, tstor__registry_register_allocator(m, type, ops, state));
}

static int reg_register_copy(tstor_module *m, const char *src, const char *dst,
                             tstor_copy_fn fn, void *state) {
  return registered(m, tstor__registry_register_copy(m, src, dst, fn, state));
}

static int reg_register_copy_batch(tstor_module *m, const char *src, const char *dst,
                                   tstor_copy_batch_fn fn, void *state) {
  return registered(m, tstor__registry_register_copy_batch(m, src, dst, fn, state));
}

const tstor_registrar tstor__registrar = {
    .struct_size = sizeof(tstor_registrar),
    .abi_version = TSTOR_ABI_VERSION,
    .register_device_type = reg_register_device_type,
    .register_allocator = reg_register_allocator,
    .register_copy = reg_register_copy,
    .config_get = reg_config_get,
    .config_int = reg_config_int,
    .config_bool = reg_config_bool,
    .log = reg_log,
    .set_error = reg_set_error,
    .should_fail = tstor__fault_should_fail,
    .config_error = reg_config_error,
    .register_copy_batch = reg_register_copy_batch, /* since 1.4 */
};
