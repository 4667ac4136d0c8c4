/* libFuzzer target: the config loader.
 *
 * Each input is parsed as a config file (tstor__config_parse, NUL bytes and
 * all). A parse either fails with TSTOR_ECONFIG and a detail that names the
 * file and a line, or gives a config whose invariants hold; that config is
 * then written back out as INI text, which must parse to the same config
 * (the round trip catches a parser that accepts what it cannot read back).
 * Inputs without NUL bytes also go through tstor_context_open_string with
 * every dlopen failed by fault injection (core/runtime/fault.h), so that the loader's
 * resolution and error paths run without ever loading whatever library an
 * input names. */
#include "runtime/fault.h"
#include "internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TEXT (64 << 10)

static void require(int cond, const char *what, const uint8_t *data, size_t size) {
  if (cond) return;
  fprintf(stderr, "fuzz_config: %s (detail: %s)\n", what, tstor_last_error());
  fwrite(data, 1, size, stderr);
  abort();
}

static int valid_name(const char *s) {
  if (!*s) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
      return 0;
  return 1;
}

/* Appends to a growing string; aborts on overflow of the fixed buffer. */
typedef struct out {
  char buf[MAX_TEXT * 2];
  size_t len;
} out;

static void put(out *o, const char *a, const char *b, const char *c) {
  const char *parts[3] = {a, b, c};
  for (int i = 0; i < 3; i++) {
    if (!parts[i]) continue;
    size_t n = strlen(parts[i]);
    if (o->len + n + 1 > sizeof o->buf) abort();
    memcpy(o->buf + o->len, parts[i], n);
    o->len += n;
  }
  o->buf[o->len] = '\0';
}

static const char *levels[] = {"error", "warn", "info", "debug"};

/* The config as INI text, without comments or spacing: never longer per line
 * than the line it came from. */
static void write_ini(const tstor__config *cfg, out *o) {
  o->len = 0;
  put(o, "[tstor]\n", NULL, NULL);
  if (cfg->default_device) put(o, "default_device=", cfg->default_device, "\n");
  if (cfg->backend_dir) put(o, "backend_dir=", cfg->backend_dir, "\n");
  put(o, "log_level=", levels[cfg->log_level], "\n");
  for (int i = 0; i < cfg->nsections; i++) {
    const tstor__section *sec = &cfg->sections[i];
    put(o, "[backend ", sec->name, "]\n");
    put(o, "library=", sec->library, "\n");
    if (sec->entry) put(o, "entry=", sec->entry, "\n");
    put(o, "optional=", sec->optional ? "1" : "0", "\n");
    put(o, "enabled=", sec->enabled ? "1" : "0", "\n");
    for (int k = 0; k < sec->nkeys; k++) put(o, sec->keys[k].key, "=", sec->keys[k].value), put(o, "\n", NULL, NULL);
  }
}

static int same_str(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static int same_config(const tstor__config *a, const tstor__config *b) {
  if (!same_str(a->default_device, b->default_device) || !same_str(a->backend_dir, b->backend_dir) ||
      a->log_level != b->log_level || a->nsections != b->nsections)
    return 0;
  for (int i = 0; i < a->nsections; i++) {
    const tstor__section *x = &a->sections[i], *y = &b->sections[i];
    if (strcmp(x->name, y->name) || strcmp(x->library, y->library) ||
        !same_str(x->entry, y->entry) || x->optional != y->optional ||
        x->enabled != y->enabled || x->nkeys != y->nkeys)
      return 0;
    for (int k = 0; k < x->nkeys; k++)
      if (strcmp(x->keys[k].key, y->keys[k].key) || strcmp(x->keys[k].value, y->keys[k].value))
        return 0;
  }
  return 1;
}

static void check_config(const tstor__config *cfg, const uint8_t *data, size_t size) {
  require(cfg->log_level >= 0 && cfg->log_level <= 3, "log level out of range", data, size);
  require(cfg->nsections <= TSTOR__MAX_BACKENDS, "too many sections", data, size);
  require(!cfg->default_device || cfg->default_device[0], "empty default_device", data, size);
  for (int i = 0; i < cfg->nsections; i++) {
    const tstor__section *sec = &cfg->sections[i];
    require(valid_name(sec->name), "invalid backend name accepted", data, size);
    require(sec->library && sec->library[0], "section without a library", data, size);
    require(sec->line >= 1, "section without a line", data, size);
    for (int j = 0; j < i; j++)
      require(strcmp(sec->name, cfg->sections[j].name) != 0, "duplicate section", data, size);
    for (int k = 0; k < sec->nkeys; k++) {
      require(sec->keys[k].key[0] != '\0', "empty key", data, size);
      for (int j = 0; j < k; j++)
        require(strcmp(sec->keys[k].key, sec->keys[j].key) != 0, "duplicate key", data, size);
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > MAX_TEXT) return 0;
  tstor__config *cfg = NULL;
  int rc = tstor__config_parse((const char *)data, size, "fuzz.ini", "/nonexistent", &cfg);
  if (rc != 0) {
    require(rc == TSTOR_ECONFIG, "parse failed with a code other than ECONFIG", data, size);
    require(cfg == NULL, "failed parse handed out a config", data, size);
    require(strncmp(tstor_last_error(), "fuzz.ini:", 9) == 0, "detail does not name the file",
            data, size);
  } else {
    check_config(cfg, data, size);
    static out o;
    write_ini(cfg, &o);
    tstor__config *again = NULL;
    rc = tstor__config_parse(o.buf, o.len, "again.ini", NULL, &again);
    if (rc != 0) {
      fprintf(stderr, "written back:\n%s\n", o.buf);
      require(0, "the config written back does not parse", data, size);
    }
    if (!same_config(cfg, again)) {
      fprintf(stderr, "written back:\n%s\n", o.buf);
      require(0, "the config written back parses differently", data, size);
    }
    tstor__config_free(again);
    tstor__config_free(cfg);
  }

  /* The whole open, with module loading stubbed out. */
  if (memchr(data, '\0', size) == NULL) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    tstor_context *ctx = (tstor_context *)&ctx;
    tstor__fault_arm(TSTOR_FAULT_DLOPEN, 1, 1);
    rc = tstor_context_open_string(text, "fuzz.ini", &ctx);
    tstor__fault_disarm();
    require(rc == 0 || ctx == NULL, "failed open handed out a context", data, size);
    require(rc == 0 || rc == TSTOR_ECONFIG || rc == TSTOR_ELOAD, "unexpected open failure code",
            data, size);
    require(rc == 0 || tstor_last_error()[0], "failed open without a detail", data, size);
    if (rc == 0) tstor_context_close(ctx);
    free(text);
  }
  return 0;
}
