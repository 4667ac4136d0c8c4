/* The context a subcommand works in (commands.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "commands.h"

int tstor_open_for_command(const char *config, tstor_context **out) {
  int rc = tstor_context_open(config, out);
  if (rc == 0) return 0;
  fprintf(stderr, "tstor: cannot open %s: %s\n  %s\n",
          config ? config : getenv("TSTOR_CONFIG") ? getenv("TSTOR_CONFIG") : "the default config",
          tstor_strerror(rc), tstor_last_error());
  return EXIT_FAILED;
}
