/* The context a subcommand works in, and the checkpoint it loads (commands.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include <tstor/serialize.h>

#include "commands.h"
#include "terminal.h"

int tstor_open_for_command(const char *config, tstor_context **out) {
  int rc = tstor_context_open(config, out);
  if (rc == 0) return 0;
  /* The library's message names the file, the line and the reason; the code
   * alone ("permission denied" for a wrong remote secret) would mislead. */
  const char *from = config                   ? config
                     : getenv("TSTOR_CONFIG") ? getenv("TSTOR_CONFIG")
                                              : "the default config";
  tool_complain("tstor: no context from %s:", from);
  tool_complain("  %s (%s)", tstor_last_error(), tstor_err_name(rc));
  return EXIT_FAILED;
}

int tstor_load_for_command(const char *config, const char *path, int shapes_only,
                           tstor_loaded *out) {
  *out = (tstor_loaded){0};
  int rc = tstor_open_for_command(config, &out->ctx);
  if (rc) return rc;
  tstor_device meta;
  tstor_load_options o = TSTOR_LOAD_OPTIONS_INIT;
  o.map_location = shapes_only && tstor_device_parse(out->ctx, "meta", &meta) == 0 ? "meta" : "cpu";
  tstor_file_format f;
  if ((rc = tstor_file_format_of(path, &f)) == 0 &&
      (rc = tstor_checkpoint_load(out->ctx, path, &o, &out->ck)) == 0) {
    out->format = tstor_file_format_name(f);
    return 0;
  }
  tool_complain("tstor: %s (%s)", tstor_last_error(), tstor_err_name(rc));
  tstor_unload_for_command(out);
  return EXIT_FAILED;
}

void tstor_unload_for_command(tstor_loaded *l) {
  tstor_checkpoint_free(l->ck);
  tstor_context_close(l->ctx);
  *l = (tstor_loaded){0};
}
