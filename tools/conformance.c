/* tstor conformance: runs the checks of conformance/NAME.c against one
 * backend module and prints a table of results with reasons.
 *
 * Each section runs in a child process of its own, with its own context, so
 * that a backend that crashes or hangs costs one row ("crashed in check X"),
 * not the run; --no-fork runs everything in-process for debuggers. The module
 * is loaded from an in-memory config next to the cpu backend, which the checks
 * use for host memory (unless the module under test is the cpu backend). */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "conformance.h"

#define CPU_LIBRARY "tstor-cpu.so"
/* In-memory configs have no folder: relative libraries resolve against
 * $TSTOR_BACKEND_DIR, then this. */
#define BACKEND_DIR_LINE "backend_dir = " TSTOR_PKGLIBDIR "\n"

/* The alloc section asks for impossible sizes on purpose; under a sanitizer
 * the allocators must say no (NULL) rather than abort. $ASAN_OPTIONS and
 * $TSAN_OPTIONS still win. */
#if defined(__SANITIZE_ADDRESS__)
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
#endif
#if defined(__SANITIZE_THREAD__)
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "allocator_may_return_null=1"; }
#endif

/* ----------------------------------------------------------- the results */

typedef struct result {
  char *section, *check, *device, *reason;
  conf_status status;
} result;

static result *results;
static int nresults, cap_results;

static char *xstrdup(const char *s) {
  char *d = strdup(s ? s : "");
  if (!d) {
    fprintf(stderr, "tstor conformance: out of memory\n");
    exit(EXIT_FAILED);
  }
  return d;
}

/* --strict: a skipped check is a failed one. */
static int strict;

static void add_result(const char *section, const char *check, const char *device,
                       conf_status status, const char *reason) {
  char strict_reason[CONF_REASON + 32];
  if (strict && status == CONF_SKIP) {
    snprintf(strict_reason, sizeof strict_reason, "skipped, and --strict skips nothing: %s",
             reason && reason[0] ? reason : "(no reason given)");
    status = CONF_FAIL;
    reason = strict_reason;
  }
  if (nresults == cap_results) {
    cap_results = cap_results ? 2 * cap_results : 64;
    results = realloc(results, (size_t)cap_results * sizeof *results);
    if (!results) {
      fprintf(stderr, "tstor conformance: out of memory\n");
      exit(EXIT_FAILED);
    }
  }
  result *x = &results[nresults++];
  x->section = xstrdup(section);
  x->check = xstrdup(check);
  x->device = xstrdup(device);
  x->reason = xstrdup(reason);
  x->status = status;
}

static void free_results(void) {
  for (int i = 0; i < nresults; i++) {
    free(results[i].section);
    free(results[i].check);
    free(results[i].device);
    free(results[i].reason);
  }
  free(results);
  results = NULL;
  nresults = cap_results = 0;
}

/* One line per record on the pipe, so fields lose their tabs and newlines. */
static void put_field(FILE *f, const char *s) {
  for (; *s; s++) fputc(*s == '\t' || *s == '\n' || *s == '\r' ? ' ' : *s, f);
}

static void pipe_record(conf_run *r, char kind, const char *check, const char *device,
                        int status, const char *reason) {
  static FILE *out;
  if (!out) out = fdopen(r->fd, "w");
  if (!out) return;
  fprintf(out, "%c\t%d\t", kind, status);
  put_field(out, check);
  fputc('\t', out);
  put_field(out, device);
  fputc('\t', out);
  put_field(out, reason);
  fputc('\n', out);
  fflush(out); /* the parent must see it before a crash */
}

void conf_emit(conf_run *r, const char *check, const char *device, conf_status status,
               const char *reason) {
  if (r->fd >= 0)
    pipe_record(r, 'R', check, device, (int)status, reason);
  else
    add_result(r->section, check, device, status, reason);
}

void conf_emit_begin(conf_run *r, const char *check, const char *device) {
  if (r->fd >= 0) pipe_record(r, 'B', check, device, 0, "");
}

/* ------------------------------------------------------------ the config */

/* Whether KEY=... in `item` is given again in list[from..n). */
static int key_given(const char *item, const char *const *list, int from, int n) {
  size_t klen = strcspn(item, "=");
  for (int j = from; j < n; j++)
    if (strncmp(list[j], item, klen) == 0 && list[j][klen] == '=') return 1;
  return 0;
}

char *conf_config_text(const conf_options *opt, const char *const *extra, int nextra) {
  size_t n = 256 + strlen(BACKEND_DIR_LINE) + strlen(opt->library) + strlen(opt->name);
  for (int i = 0; i < opt->nkeys; i++) n += strlen(opt->keys[i]) + 8;
  for (int i = 0; i < nextra; i++) n += strlen(extra[i]) + 8;
  char *text = malloc(n), *p = text;
  if (!text) {
    fprintf(stderr, "tstor conformance: out of memory\n");
    exit(EXIT_FAILED);
  }
  p += sprintf(p, "[tstor]\nlog_level = warn\n" BACKEND_DIR_LINE);
  if (opt->add_cpu) p += sprintf(p, "[backend cpu]\nlibrary = " CPU_LIBRARY "\n");
  p += sprintf(p, "[backend %s]\nlibrary = %s\noptional = yes\n", opt->name, opt->library);
  /* KEY=VALUE becomes "KEY = VALUE"; the last value of a key wins, and `extra`
   * comes after --set. */
  for (int i = 0; i < opt->nkeys; i++) {
    const char *k = opt->keys[i];
    if (key_given(k, opt->keys, i + 1, opt->nkeys) || key_given(k, extra, 0, nextra)) continue;
    p += sprintf(p, "%.*s = %s\n", (int)strcspn(k, "="), k, strchr(k, '=') + 1);
  }
  for (int i = 0; i < nextra; i++) {
    const char *k = extra[i];
    if (key_given(k, extra, i + 1, nextra)) continue;
    p += sprintf(p, "%.*s = %s\n", (int)strcspn(k, "="), k, strchr(k, '=') + 1);
  }
  return text;
}

/* ----------------------------------------------------- running a section */

/* Per section. Long enough for every section on a real device (the slowest,
 * threads and async, take seconds), short enough that a kernel that never
 * returns costs a minute of the run, not half an hour. */
#define DEFAULT_TIMEOUT_S 60
static int timeout_s = DEFAULT_TIMEOUT_S;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* What a section's child has told the parent so far: records are complete
 * lines; `partial` holds the start of one not yet ended. */
typedef struct child_reader {
  const char *section;
  char open_check[128], open_device[64]; /* begun, no result yet */
  char *partial;
  size_t len, cap;
} child_reader;

static void child_record(child_reader *cr, char *line) {
  char *fields[5];
  char *p = line;
  int nf = 0;
  while (nf < 5) {
    fields[nf++] = p;
    p = strchr(p, '\t');
    if (!p) break;
    *p++ = '\0';
  }
  if (nf < 5) return;
  if (fields[0][0] == 'B') {
    snprintf(cr->open_check, sizeof cr->open_check, "%s", fields[2]);
    snprintf(cr->open_device, sizeof cr->open_device, "%s", fields[3]);
  } else {
    add_result(cr->section, fields[2], fields[3], (conf_status)atoi(fields[1]), fields[4]);
    cr->open_check[0] = '\0';
  }
}

/* Takes in n bytes from the pipe and handles every line they complete. */
static void child_bytes(child_reader *cr, const char *buf, size_t n) {
  if (cr->len + n + 1 > cr->cap) {
    size_t cap = (cr->len + n + 1) * 2;
    char *p = realloc(cr->partial, cap);
    if (!p) {
      fprintf(stderr, "tstor conformance: out of memory\n");
      exit(EXIT_FAILED);
    }
    cr->partial = p;
    cr->cap = cap;
  }
  memcpy(cr->partial + cr->len, buf, n);
  cr->len += n;
  cr->partial[cr->len] = '\0';
  char *start = cr->partial, *nl;
  while ((nl = memchr(start, '\n', cr->len - (size_t)(start - cr->partial))) != NULL) {
    *nl = '\0';
    child_record(cr, start);
    start = nl + 1;
  }
  cr->len -= (size_t)(start - cr->partial);
  memmove(cr->partial, start, cr->len);
}

/* Reads the child's records until it has exited and the pipe is drained, or
 * until the deadline. The parent keeps the time: a module may block or
 * ignore any signal in the child, and a process the module forked may hold
 * the pipe open after the child is gone, so neither the child's own alarm
 * nor the end of the pipe can be waited for. Returns 1 on a timeout, after
 * killing the child's whole process group; *status gets the child's wait
 * status. */
static int watch_child(pid_t pid, int fd, child_reader *cr, int *status) {
  double deadline = now_s() + timeout_s;
  int exited = 0, open = 1;
  while (open) {
    if (!exited) {
      pid_t w = waitpid(pid, status, WNOHANG);
      if (w == pid) exited = 1;
    }
    double left = deadline - now_s();
    if (left <= 0 && !exited) {
      kill(-pid, SIGKILL); /* the child and whatever it started in its group */
      kill(pid, SIGKILL);
      while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
      }
      return 1;
    }
    /* Once the child is gone, only what is already in the pipe counts. */
    int wait_ms = exited ? 0 : left > 0.1 ? 100 : (int)(left * 1000) + 1;
    struct pollfd pfd = {fd, POLLIN, 0};
    int n = poll(&pfd, 1, wait_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (exited) break; /* drained; a grandchild may hold the pipe: stop */
      continue;
    }
    char buf[4096];
    ssize_t got = read(fd, buf, sizeof buf);
    if (got > 0)
      child_bytes(cr, buf, (size_t)got);
    else if (got == 0 || errno != EINTR)
      open = 0;
  }
  if (!exited)
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
    }
  /* Leftovers of the section (a helper the module forked) go with it. */
  kill(-pid, SIGKILL);
  return 0;
}

static void run_forked(const conf_options *opt, const conf_section *sec) {
  int fds[2];
  if (pipe(fds) != 0) {
    add_result(sec->name, "setup", "-", CONF_FAIL, strerror(errno));
    return;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    add_result(sec->name, "setup", "-", CONF_FAIL, strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return;
  }
  if (pid == 0) {
    /* A process group of its own, so that a timeout kills everything the
     * section started. */
    setpgid(0, 0);
#ifdef __linux__
    /* Out of the terminal's process group, Ctrl-C reaches only the parent:
     * the section must not outlive it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) _exit(1);
#endif
    close(fds[0]);
    conf_run r;
    memset(&r, 0, sizeof r);
    r.opt = opt;
    r.section = sec->name;
    r.fd = fds[1];
    sec->run(&r);
    exit(0); /* through exit(), so that leak checkers look at the child too */
  }
  setpgid(pid, pid); /* also here: whichever runs first */
  close(fds[1]);
  child_reader cr;
  memset(&cr, 0, sizeof cr);
  cr.section = sec->name;
  int status = 0;
  int timed_out = watch_child(pid, fds[0], &cr, &status);
  close(fds[0]);
  free(cr.partial);
  const char *check = cr.open_check, *device = cr.open_device;
  char why[256];
  if (timed_out) {
    snprintf(why, sizeof why, "timed out after %d s (--timeout)", timeout_s);
  } else if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    snprintf(why, sizeof why, "crashed: signal %d (%s)", sig, strsignal(sig));
  } else if (WEXITSTATUS(status) != 0) {
    snprintf(why, sizeof why, "exited with status %d (see the messages above)",
             WEXITSTATUS(status));
  } else {
    if (check[0]) add_result(sec->name, check, device, CONF_FAIL, "ended without a result");
    return;
  }
  add_result(sec->name, check[0] ? check : "(between checks)", check[0] ? device : "-",
             CONF_FAIL, why);
}

static void run_in_process(const conf_options *opt, const conf_section *sec) {
  conf_run r;
  memset(&r, 0, sizeof r);
  r.opt = opt;
  r.section = sec->name;
  r.fd = -1;
  sec->run(&r);
}

/* ---------------------------------------------------------- the sections */

const conf_section conf_sections[] = {
#define CONF_SECTION_ROW(name, summary) {#name, summary, conf_section_##name},
    CONF_SECTION_MAP(CONF_SECTION_ROW)
#undef CONF_SECTION_ROW
};
const int conf_nsections = (int)(sizeof conf_sections / sizeof conf_sections[0]);

/* ------------------------------------------------------------- the table */

static int width(const char *header, size_t offset) {
  size_t w = strlen(header);
  for (int i = 0; i < nresults; i++) {
    const char *s = *(char *const *)((const char *)&results[i] + offset);
    if (strlen(s) > w) w = strlen(s);
  }
  return (int)w;
}

static int print_table(void) {
  static const char *status_name[] = {"pass", "FAIL", "skip"};
  int ws = width("section", offsetof(result, section));
  int wc = width("check", offsetof(result, check));
  int wd = width("device", offsetof(result, device));
  int counts[3] = {0, 0, 0};
  printf("%-*s  %-*s  %-*s  %-6s  %s\n", ws, "section", wc, "check", wd, "device", "result",
         "reason");
  for (int i = 0; i < nresults; i++) {
    const result *x = &results[i];
    counts[x->status]++;
    printf("%-*s  %-*s  %-*s  %-6s  %s\n", ws, x->section, wc, x->check, wd, x->device,
           status_name[x->status], x->reason);
  }
  printf("\n%d checks: %d passed, %d failed, %d skipped\n", nresults, counts[CONF_PASS],
         counts[CONF_FAIL], counts[CONF_SKIP]);
  return counts[CONF_FAIL] ? EXIT_FAILED : 0;
}

/* ------------------------------------------------------------ the command */

static void usage(FILE *out) {
  fprintf(out,
          "usage: tstor conformance PATH/TO/backend.so [OPTIONS]\n\n"
          "Loads the backend module from an in-memory config (beside the cpu backend,\n"
          "which provides host memory) and checks it through the public API. Prints\n"
          "one row per check and exits 0 when none failed, 1 when some did.\n\n"
          "options:\n"
          "  --section NAME        run only this section (repeatable, or NAME,NAME)\n"
          "  --name NAME           the module's [backend NAME] (default: from the file name)\n"
          "  --set KEY=VALUE       a key for the module's section (repeatable)\n"
          "  --no-hardware KEY=VALUE\n"
          "                        keys that make the module find no hardware, for the\n"
          "                        decline section (repeatable), e.g. devices=0 for hpu-stub\n"
          "  --large-mb N          size of the large allocation (default 64)\n"
          "  --align N             alignment required of device addresses (default 16)\n"
          "  --threads N           threads for the threads section (default 4)\n"
          "  --timeout SEC         per section (default 60); the whole section is killed\n"
          "  --strict              what a release should pass: skips fail, every counter\n"
          "                        and peak must be kept, messages must be the backend's own\n"
          "  --no-fork             run in this process (for debuggers); a crash ends the run\n"
          "  --list                list the sections\n\n"
          "sections:\n");
  for (int i = 0; i < conf_nsections; i++)
    fprintf(out, "  %-9s %s\n", conf_sections[i].name, conf_sections[i].summary);
}

static int parse_long(const char *opt, const char *s, long min, long max, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end || errno || v < min || v > max) {
    fprintf(stderr, "tstor conformance: %s %s: expected a number from %ld to %ld\n", opt, s, min,
            max);
    return -1;
  }
  *out = v;
  return 0;
}

static int select_sections(const char *list, int *selected) {
  char *copy = xstrdup(list), *save = NULL;
  int rc = 0;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int found = 0;
    for (int i = 0; i < conf_nsections; i++)
      if (strcmp(conf_sections[i].name, tok) == 0) selected[i] = found = 1;
    if (!found) {
      fprintf(stderr, "tstor conformance: no section '%s' (try --list)\n", tok);
      rc = -1;
    }
  }
  free(copy);
  return rc;
}

/* "libtstor-hpu-stub.so" -> "hpu-stub" */
static char *default_name(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (strncmp(base, "lib", 3) == 0) base += 3;
  if (strncmp(base, "tstor-", 6) == 0) base += 6;
  char *name = xstrdup(base);
  char *dot = strchr(name, '.');
  if (dot) *dot = '\0';
  for (char *p = name; *p; p++)
    if (*p == ' ' || *p == ']' || *p == '[') *p = '_';
  if (!name[0]) {
    free(name);
    name = xstrdup("under-test");
  }
  return name;
}

/* Whether the module under test is the cpu backend, which then provides the
 * host memory itself. Fails when there is no cpu backend to be found. */
static int find_cpu_backend(const char *library, int *is_cpu) {
  tstor_context *ctx;
  int rc = tstor_context_open_string(
      "[tstor]\n" BACKEND_DIR_LINE "[backend cpu]\nlibrary = " CPU_LIBRARY "\n",
      "conformance.ini", &ctx);
  const char *base = strrchr(library, '/');
  if (rc != 0) {
    if (strcmp(base ? base + 1 : library, CPU_LIBRARY) == 0) {
      *is_cpu = 1;
      return 0;
    }
    fprintf(stderr,
            "tstor conformance: the checks need the cpu backend for host memory, but it does "
            "not load:\n  %s\n  (TSTOR_BACKEND_DIR names the folder to look in)\n",
            tstor_last_error());
    return -1;
  }
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  char cpu_path[PATH_MAX], lib_path[PATH_MAX];
  *is_cpu = tstor_backend_get(ctx, 0, &info) == 0 && realpath(info.library, cpu_path) &&
            realpath(library, lib_path) && strcmp(cpu_path, lib_path) == 0;
  tstor_context_close(ctx);
  return 0;
}

/* What the command line selects besides the options the sections read. */
typedef struct {
  int selected[64], any_selected, fork_sections;
  const char *library, *name;
} conf_choice;

/* One --OPTION VALUE pair: -1 when taken, else the command's exit status. */
static int take_option(const char *a, const char *val, conf_options *opt, conf_choice *c) {
  long v;
  if (strcmp(a, "--section") == 0) {
    if (select_sections(val, c->selected)) return EXIT_USAGE;
    c->any_selected = 1;
  } else if (strcmp(a, "--name") == 0) {
    c->name = val;
  } else if (strcmp(a, "--set") == 0 || strcmp(a, "--no-hardware") == 0) {
    int hw = strcmp(a, "--no-hardware") == 0;
    int *n = hw ? &opt->nno_hw_keys : &opt->nkeys;
    const char **list = hw ? opt->no_hw_keys : opt->keys;
    if (!strchr(val, '=') || val[0] == '=' || strchr(val, '\n')) {
      fprintf(stderr, "tstor conformance: %s %s: expected KEY=VALUE\n", a, val);
      return EXIT_USAGE;
    }
    if (*n == CONF_MAX_KEYS) {
      fprintf(stderr, "tstor conformance: more than %d %s options\n", CONF_MAX_KEYS, a);
      return EXIT_USAGE;
    }
    list[(*n)++] = val;
  } else if (strcmp(a, "--large-mb") == 0) {
    if (parse_long(a, val, 1, 1 << 20, &v)) return EXIT_USAGE;
    opt->large_bytes = (size_t)v << 20;
  } else if (strcmp(a, "--align") == 0) {
    if (parse_long(a, val, 1, 1 << 16, &v) || (v & (v - 1))) {
      fprintf(stderr, "tstor conformance: --align takes a power of two\n");
      return EXIT_USAGE;
    }
    opt->min_align = (size_t)v;
  } else if (strcmp(a, "--threads") == 0) {
    if (parse_long(a, val, 1, 256, &v)) return EXIT_USAGE;
    opt->threads = (int)v;
  } else if (strcmp(a, "--timeout") == 0) {
    if (parse_long(a, val, 1, 86400, &v)) return EXIT_USAGE;
    timeout_s = (int)v;
  } else {
    fprintf(stderr, "tstor conformance: unknown option '%s' (try --help)\n", a);
    return EXIT_USAGE;
  }
  return -1;
}

/* -1 to go on, else the command's exit status. */
static int parse_args(int argc, char **argv, conf_options *opt, conf_choice *c) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(a, "--list") == 0) {
      for (int k = 0; k < conf_nsections; k++)
        printf("%-9s %s\n", conf_sections[k].name, conf_sections[k].summary);
      return 0;
    } else if (strcmp(a, "--no-fork") == 0) {
      c->fork_sections = 0;
    } else if (strcmp(a, "--strict") == 0) {
      strict = opt->strict = 1;
    } else if (a[0] == '-' && a[1] == '-') {
      if (i + 1 == argc) {
        fprintf(stderr, "tstor conformance: %s needs a value\n", a);
        return EXIT_USAGE;
      }
      int rc = take_option(a, argv[++i], opt, c);
      if (rc >= 0) return rc;
    } else if (!c->library) {
      c->library = a;
    } else {
      fprintf(stderr, "tstor conformance: one module at a time ('%s' is extra)\n", a);
      return EXIT_USAGE;
    }
  }
  if (!c->library) {
    usage(stderr);
    return EXIT_USAGE;
  }
  return -1;
}

int tstor_cmd_conformance(int argc, char **argv) {
  conf_options opt;
  memset(&opt, 0, sizeof opt);
  opt.large_bytes = (size_t)64 << 20;
  opt.min_align = 16;
  opt.threads = 4;
  conf_choice c = {.fork_sections = 1};
  int rc = parse_args(argc, argv, &opt, &c);
  if (rc >= 0) return rc;
  char path[PATH_MAX];
  if (!realpath(c.library, path)) {
    fprintf(stderr, "tstor conformance: %s: %s\n", c.library, strerror(errno));
    return EXIT_USAGE;
  }
  opt.library = path;
  int is_cpu;
  if (find_cpu_backend(path, &is_cpu)) return EXIT_FAILED;
  opt.add_cpu = !is_cpu;
  char *derived = default_name(path);
  opt.name = c.name ? c.name : derived;
  if (opt.add_cpu && strcmp(opt.name, "cpu") == 0) opt.name = "under-test";
  if (!opt.name[0] || strpbrk(opt.name, "[]\n")) {
    fprintf(stderr, "tstor conformance: --name %s: not a section name\n", opt.name);
    free(derived);
    return EXIT_USAGE;
  }

  printf("tstor conformance %s: %s as [backend %s]%s\n\n", tstor_version_string(), path,
         opt.name, opt.add_cpu ? ", beside the cpu backend" : "");
  for (int i = 0; i < conf_nsections; i++) {
    if (c.any_selected && !c.selected[i]) continue;
    if (c.fork_sections)
      run_forked(&opt, &conf_sections[i]);
    else
      run_in_process(&opt, &conf_sections[i]);
  }
  rc = print_table();
  free_results();
  free(derived);
  return rc;
}
