/* The INI configuration: [tstor] and [backend NAME] sections, parsed with inih.
 *
 * inih does the parsing. We feed it through our own line reader so that every
 * message can name the exact line (inih's handler does not see line numbers
 * in Debian's build), and so that what inih cannot report is still caught:
 * lines longer than its buffer (it would silently split them), NUL bytes,
 * empty or duplicate sections, and indented continuation lines (which would
 * silently append to the previous value). */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* inih reads at most INI_MAX_LINE - 1 bytes per line, newline included. */
#define TSTOR__MAX_LINE (INI_MAX_LINE - 2)
#define TSTOR__MAX_CONFIG (1 << 20) /* bytes of a config, file or text */

/* Keys whose values are not strings, so set_string cannot tell a repeat. */
enum { SEEN_LOG_LEVEL = 1, SEEN_OPTIONAL = 2, SEEN_ENABLED = 4 };

typedef struct parser {
  const char *text, *end, *pos;
  int line;          /* line number of the line last handed to inih */
  int section;       /* -1: none yet, -2: [tstor], >= 0: index into cfg->sections */
  int prev_key;      /* the last significant line was a key (continuations follow keys) */
  int seen_tstor;
  unsigned seen_keys; /* SEEN_* of the current section, for duplicates */
  int err_line;      /* first error */
  char err[TSTOR__ERRBUF];
  tstor__config *cfg;
} parser;

static void fail(parser *p, const char *fmt, ...) TSTOR__PRINTF(2, 3);
static void fail(parser *p, const char *fmt, ...) {
  if (p->err_line) return; /* keep the first */
  p->err_line = p->line;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->err, sizeof p->err, fmt, ap);
  va_end(ap);
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

static int valid_backend_name(const char *s) {
  if (!*s) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
      return 0;
  return 1;
}

/* A [header] line: records the section, or an error. `s` starts at '['. */
static void section_header(parser *p, const char *s, const char *eol) {
  const char *close = memchr(s, ']', (size_t)(eol - s));
  if (!close) {
    fail(p, "unterminated section header (no ']')");
    return;
  }
  for (const char *t = close + 1; t < eol; t++) {
    if (*t == ';' || *t == '#') break;
    if (!is_space(*t)) {
      fail(p, "unexpected text after section header");
      return;
    }
  }
  char name[INI_MAX_LINE];
  const char *a = s + 1, *b = close;
  while (a < b && is_space(*a)) a++;
  while (b > a && is_space(b[-1])) b--;
  size_t n = (size_t)(b - a);
  memcpy(name, a, n);
  name[n] = '\0';

  p->prev_key = 0;
  p->seen_keys = 0;
  if (strcmp(name, "tstor") == 0) {
    if (p->seen_tstor) fail(p, "duplicate section [tstor]");
    p->seen_tstor = 1;
    p->section = -2;
    return;
  }
  if (strncmp(name, "backend", 7) != 0 || !is_space(name[7])) {
    fail(p, "unknown section [%s] (expected [tstor] or [backend NAME])", name);
    p->section = -3;
    return;
  }
  const char *bname = name + 8;
  while (is_space(*bname)) bname++;
  if (!valid_backend_name(bname)) {
    fail(p, "invalid backend name \"%s\" (use a-z, 0-9, '_' and '-')", bname);
    p->section = -3;
    return;
  }
  tstor__config *cfg = p->cfg;
  for (int i = 0; i < cfg->nsections; i++) {
    if (strcmp(cfg->sections[i].name, bname) == 0) {
      fail(p, "duplicate section [backend %s] (first at line %d)", bname, cfg->sections[i].line);
      p->section = -3;
      return;
    }
  }
  if (cfg->nsections == TSTOR__MAX_BACKENDS) {
    fail(p, "too many backend sections (at most %d)", TSTOR__MAX_BACKENDS);
    p->section = -3;
    return;
  }
  tstor__section *sec = tstor__realloc(cfg->sections, sizeof *sec * (size_t)(cfg->nsections + 1));
  if (!sec) {
    fail(p, "out of memory");
    return;
  }
  cfg->sections = sec;
  sec = &cfg->sections[cfg->nsections];
  memset(sec, 0, sizeof *sec);
  sec->name = tstor__strdup(bname);
  if (!sec->name) {
    fail(p, "out of memory");
    return;
  }
  sec->line = p->line;
  sec->enabled = 1;
  p->section = cfg->nsections++;
}

/* inih's line reader, over memory: one line per call, with our checks. */
static char *reader(char *buf, int size, void *stream) {
  parser *p = stream;
  if (p->pos >= p->end || p->err_line) return NULL;
  const char *s = p->pos;
  const char *nl = memchr(s, '\n', (size_t)(p->end - s));
  const char *eol = nl ? nl : p->end;
  p->pos = nl ? nl + 1 : p->end;
  p->line++;

  size_t len = (size_t)(eol - s);
  if (memchr(s, '\0', len)) {
    fail(p, "NUL byte in line");
    return NULL;
  }
  if (len > TSTOR__MAX_LINE || (int)len + 2 > size) {
    fail(p, "line too long (%zu bytes; at most %d)", len, TSTOR__MAX_LINE);
    return NULL;
  }

  const char *t = s;
  if (p->line == 1 && len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) t += 3; /* inih skips a BOM */
  while (t < eol && is_space(*t)) t++;
  if (t < eol && *t != ';' && *t != '#') {
    if (t > s && is_space(t[-1]) && p->prev_key) {
      fail(p, "indented line after a key (continuation lines are not supported)");
      return NULL;
    }
    if (*t == '[') {
      section_header(p, t, eol);
      if (p->err_line) return NULL;
    } else {
      p->prev_key = 1;
    }
  }
  memcpy(buf, s, len);
  buf[len] = '\n';
  buf[len + 1] = '\0';
  return buf;
}

int tstor__parse_bool(const char *s, int *out) {
  static const char *yes[] = {"yes", "true", "on", "1"};
  static const char *no[] = {"no", "false", "off", "0"};
  for (size_t i = 0; i < 4; i++) {
    if (strcasecmp(s, yes[i]) == 0) return *out = 1, 0;
    if (strcasecmp(s, no[i]) == 0) return *out = 0, 0;
  }
  return TSTOR_EINVAL;
}

int tstor__parse_int(const char *s, long long *out) {
  /* Decimal only: strtoll with base 0 would read "010" as 8 and "0x10" as 16,
   * which no config file means. A sign, then digits, nothing else. */
  const char *d = s + (*s == '+' || *s == '-');
  if (*d < '0' || *d > '9') return TSTOR_EINVAL;
  for (const char *t = d; *t; t++)
    if (*t < '0' || *t > '9') return TSTOR_EINVAL;
  errno = 0;
  long long x = strtoll(s, NULL, 10);
  if (errno == ERANGE) return TSTOR_ERANGE;
  *out = x;
  return 0;
}

int tstor__parse_log_level(const char *s, int *out) {
  static const char *names[] = {"error", "warn", "info", "debug"};
  for (int i = 0; i < 4; i++) {
    if (strcasecmp(s, names[i]) == 0 || (s[0] == '0' + i && s[1] == '\0')) {
      *out = i;
      return 0;
    }
  }
  return TSTOR_EINVAL;
}

static int set_string(parser *p, char **field, const char *key, const char *value) {
  if (*field) {
    fail(p, "duplicate key '%s'", key);
    return 0;
  }
  *field = tstor__strdup(value);
  if (!*field) fail(p, "out of memory");
  return 1;
}

static int first_time(parser *p, unsigned bit, const char *key) {
  if (p->seen_keys & bit) {
    fail(p, "duplicate key '%s'", key);
    return 0;
  }
  p->seen_keys |= bit;
  return 1;
}

static int handle_tstor_key(parser *p, const char *key, const char *value) {
  tstor__config *cfg = p->cfg;
  if (strcmp(key, "default_device") == 0) {
    if (!*value) return fail(p, "default_device is empty"), 1;
    cfg->default_device_line = p->line;
    return set_string(p, &cfg->default_device, key, value);
  }
  if (strcmp(key, "backend_dir") == 0) {
    if (!*value) return fail(p, "backend_dir is empty"), 1;
    return set_string(p, &cfg->backend_dir, key, value);
  }
  if (strcmp(key, "log_level") == 0) {
    if (!first_time(p, SEEN_LOG_LEVEL, key)) return 1;
    if (tstor__parse_log_level(value, &cfg->log_level) != 0)
      fail(p, "bad log_level '%s' (expected error, warn, info or debug)", value);
    return 1;
  }
  fail(p, "unknown key '%s' in [tstor] (expected default_device, backend_dir or log_level)", key);
  return 1;
}

static int handle_backend_key(parser *p, tstor__section *sec, const char *key, const char *value) {
  if (strcmp(key, "library") == 0) {
    if (!*value) return fail(p, "library is empty"), 1;
    return set_string(p, &sec->library, key, value);
  }
  if (strcmp(key, "entry") == 0) {
    if (!*value) return fail(p, "entry is empty"), 1;
    return set_string(p, &sec->entry, key, value);
  }
  if (strcmp(key, "optional") == 0 || strcmp(key, "enabled") == 0) {
    int *field = key[0] == 'o' ? &sec->optional : &sec->enabled;
    if (!first_time(p, key[0] == 'o' ? SEEN_OPTIONAL : SEEN_ENABLED, key)) return 1;
    if (tstor__parse_bool(value, field) != 0)
      fail(p, "bad value '%s' for %s (expected yes or no)", value, key);
    return 1;
  }
  for (int i = 0; i < sec->nkeys; i++) {
    if (strcmp(sec->keys[i].key, key) == 0) {
      fail(p, "duplicate key '%s' (first at line %d)", key, sec->keys[i].line);
      return 1;
    }
  }
  tstor__kv *kv = tstor__realloc(sec->keys, sizeof *kv * (size_t)(sec->nkeys + 1));
  if (!kv) return fail(p, "out of memory"), 1;
  sec->keys = kv;
  kv = &sec->keys[sec->nkeys];
  kv->key = tstor__strdup(key);
  kv->value = tstor__strdup(value);
  kv->line = p->line;
  kv->used = 0;
  if (!kv->key || !kv->value) {
    tstor__free(kv->key);
    tstor__free(kv->value);
    return fail(p, "out of memory"), 1;
  }
  sec->nkeys++;
  return 1;
}

static int handler(void *user, const char *section, const char *key, const char *value) {
  parser *p = user;
  (void)section; /* the reader tracked it, with its line */
  if (p->err_line) return 1;
  if (!*key) { /* a line that starts with '=' or ':' */
    fail(p, "missing key name before '=' or ':'");
    return 1;
  }
  if (p->section == -1) {
    fail(p, "key '%s' outside any section", key);
    return 1;
  }
  if (p->section == -2) return handle_tstor_key(p, key, value);
  if (p->section >= 0) return handle_backend_key(p, &p->cfg->sections[p->section], key, value);
  return 1;
}

void tstor__config_free(tstor__config *cfg) {
  if (!cfg) return;
  for (int i = 0; i < cfg->nsections; i++) {
    tstor__section *sec = &cfg->sections[i];
    tstor__free(sec->name);
    tstor__free(sec->library);
    tstor__free(sec->entry);
    for (int k = 0; k < sec->nkeys; k++) {
      tstor__free(sec->keys[k].key);
      tstor__free(sec->keys[k].value);
    }
    tstor__free(sec->keys);
  }
  tstor__free(cfg->sections);
  tstor__free(cfg->name);
  tstor__free(cfg->dir);
  tstor__free(cfg->default_device);
  tstor__free(cfg->backend_dir);
  tstor__free(cfg);
}

size_t tstor__config_text_len(const char *text) {
  return strnlen(text, (size_t)TSTOR__MAX_CONFIG + 1);
}

int tstor__config_parse(const char *text, size_t len, const char *name, const char *dir,
                        tstor__config **out) {
  *out = NULL;
  /* The same bound for a file and for text in memory. It also bounds the line
   * numbers, ours and inih's, which are ints: text of 2^31 lines would
   * overflow both. */
  if (len > TSTOR__MAX_CONFIG)
    return tstor__err(TSTOR_ECONFIG, "%s: config text too large (more than %d bytes)", name,
                      TSTOR__MAX_CONFIG);
  tstor__config *cfg = tstor__calloc(1, sizeof *cfg);
  if (!cfg) return tstor__err(TSTOR_ENOMEM, "%s: out of memory", name);
  cfg->log_level = TSTOR_LOG_WARN;
  cfg->name = tstor__strdup(name);
  cfg->dir = dir ? tstor__strdup(dir) : NULL;
  if (!cfg->name || (dir && !cfg->dir)) {
    tstor__config_free(cfg);
    return tstor__err(TSTOR_ENOMEM, "%s: out of memory", name);
  }

  parser p;
  memset(&p, 0, sizeof p);
  p.text = p.pos = text;
  p.end = text + len;
  p.section = -1;
  p.cfg = cfg;
  int rc = ini_parse_stream(reader, &p, handler, &p);
  if (!p.err_line && rc != 0) {
    /* inih found something we let through: a line without '=' or ':'. */
    p.line = rc > 0 ? rc : p.line;
    fail(&p, rc > 0 ? "malformed line (expected key = value)" : "cannot parse");
  }
  if (!p.err_line) {
    for (int i = 0; i < cfg->nsections; i++) {
      if (!cfg->sections[i].library) {
        p.line = cfg->sections[i].line;
        fail(&p, "[backend %s] has no 'library' key", cfg->sections[i].name);
        break;
      }
    }
  }
  if (p.err_line) {
    int code = strcmp(p.err, "out of memory") == 0 ? TSTOR_ENOMEM : TSTOR_ECONFIG;
    tstor__err(code, "%s:%d: %s", name, p.err_line, p.err);
    tstor__config_free(cfg);
    return code;
  }
  *out = cfg;
  return 0;
}

/* The whole of the config file at path, NUL-terminated, in *text. */
static int read_config_file(const char *path, char **text, size_t *size) {
  *text = NULL;
  /* Non-blocking, so that a FIFO is refused below instead of waited on. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return tstor__err(tstor_errno_code(e), "cannot open config %s: %s", path, strerror(e));
  }
  int rc = 0;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    rc = tstor__err(TSTOR_ECONFIG, "config %s is not a regular file", path);
  } else if (st.st_size > TSTOR__MAX_CONFIG) {
    rc = tstor__err(TSTOR_ECONFIG, "config %s is too large (%lld bytes; at most %d)", path,
                    (long long)st.st_size, TSTOR__MAX_CONFIG);
  } else if (!(*text = tstor__malloc((size_t)st.st_size + 1))) {
    rc = tstor__err(TSTOR_ENOMEM, "config %s: out of memory", path);
  } else {
    *size = (size_t)st.st_size;
    size_t got = 0;
    while (got < *size) {
      ssize_t n = read(fd, *text + got, *size - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += (size_t)n;
    }
    if (got != *size) {
      tstor__free(*text);
      *text = NULL;
      rc = tstor__err(TSTOR_EIO, "cannot read config %s", path);
    } else {
      (*text)[got] = '\0';
    }
  }
  close(fd);
  return rc;
}

int tstor__config_load(const char *path, tstor__config **out) {
  *out = NULL;
  char *text;
  size_t size = 0;
  int rc = read_config_file(path, &text, &size);
  if (rc) return rc;
  /* The folder that relative library paths in the file are taken from. */
  char *dir = tstor__strdup(path);
  if (!dir) {
    rc = tstor__err(TSTOR_ENOMEM, "config %s: out of memory", path);
  } else {
    char *slash = strrchr(dir, '/');
    if (slash)
      slash[slash == dir ? 1 : 0] = '\0';
    else
      strcpy(dir, ".");
    rc = tstor__config_parse(text, size, path, dir, out);
  }
  tstor__free(dir);
  tstor__free(text);
  return rc;
}
