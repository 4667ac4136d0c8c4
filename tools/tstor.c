/* tstor: inspect, benchmark and check tstor installations and backends. */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} commands[] = {
    {"info", tstor_cmd_info, "show the version, config, backends, devices and copy table"},
    {"bench", tstor_cmd_bench, "measure storage operations against libc, side by side"},
    {"conformance", tstor_cmd_conformance, "check a backend module and print a pass/fail table"},
    {"inspect", tstor_cmd_inspect,
     "list the tensors of a checkpoint (.pt, .safetensors, .t7, .gguf)"},
    {"convert", tstor_cmd_convert,
     "convert a checkpoint between torch.save, safetensors, Torch7 and GGUF"},
#if HAVE_REMOTE
    {"serve", tstor_cmd_serve, "export this host's devices to tstor-remote.so clients"},
#endif
};

static void usage(FILE *out) {
  fprintf(out,
          "usage: tstor COMMAND [OPTIONS]\n"
          "       tstor --help | --version\n\n"
          "commands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
  fprintf(out,
          "\n'tstor COMMAND --help' describes a command's options.\n"
          "environment: TSTOR_CONFIG, TSTOR_DEFAULT_DEVICE, TSTOR_BACKEND_DIR, TSTOR_LOG\n");
}

/* Run from the build tree (not installed), use the modules just built there
 * unless the caller chose a directory. */
static void use_build_tree_modules(void) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0 || getenv("TSTOR_BACKEND_DIR")) return;
  exe[n] = '\0';
  const char *tools = TSTOR_ABS_BUILDDIR "/tools/";
  if (strncmp(exe, tools, strlen(tools)) == 0)
    setenv("TSTOR_BACKEND_DIR", TSTOR_ABS_BUILDDIR "/modules", 0);
}

int main(int argc, char **argv) {
  use_build_tree_modules();
  if (argc < 2) {
    usage(stderr);
    return EXIT_USAGE;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
      strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("tstor %s\n", tstor_version_string());
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "tstor: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return EXIT_USAGE;
}
