/* The subcommands of the tstor program. Each takes the arguments after its
 * name (argv[0] is the subcommand) and returns the process exit status. */
#ifndef TSTOR_COMMANDS_H
#define TSTOR_COMMANDS_H

#include <tstor/serialize.h>
#include <tstor/tstor.h>

/* Exit statuses: 1 for a failure, 2 for bad usage, as most Unix tools (not
 * sysexits.h's, which start at 64). */
enum { EXIT_USAGE = 2, EXIT_FAILED = 1 };

int tstor_cmd_info(int argc, char **argv);
int tstor_cmd_bench(int argc, char **argv);
int tstor_cmd_conformance(int argc, char **argv);
int tstor_cmd_inspect(int argc, char **argv); /* both with libtstor-io */
int tstor_cmd_convert(int argc, char **argv);
int tstor_cmd_serve(int argc, char **argv); /* cmd_serve.c, where the remote backend is built */

/* tstor bench --torch (bench_torch.cc, built where configure found libtorch):
 * prints the side-by-side table with PyTorch; `dir` holds its temporary file.
 * Returns an exit status. */
#ifdef __cplusplus
extern "C"
#endif
    int
    tstor_bench_torch(tstor_context *ctx, int rounds, int quick, int threads, const char *dir);

/* open.c: opens the context named by --config (or the default rules),
 * printing the error on failure. Returns 0 or an exit status. */
int tstor_open_for_command(const char *config, tstor_context **out);

/* A checkpoint a command loaded, in the context it opened for it. */
typedef struct tstor_loaded {
  tstor_context *ctx;
  tstor_checkpoint *ck;
  const char *format; /* tstor_file_format_name's, told by the file's bytes */
} tstor_loaded;

/* Opens the context and loads the checkpoint at path in any format tstor
 * reads: onto the meta device when `shapes_only` and the context has one
 * (the data is neither read nor mapped), else onto cpu. 0, or the exit
 * status after printing why not, with nothing left open. */
int tstor_load_for_command(const char *config, const char *path, int shapes_only,
                           tstor_loaded *out);
/* Frees the checkpoint and closes its context. */
void tstor_unload_for_command(tstor_loaded *l);

/* Whether v is a tensor: a TENSOR, or a QUANTIZED one (GGUF's). */
static inline int tool_is_tensor(const tstor_value *v) {
  tstor_value_kind k = tstor_value_kind_of(v);
  return k == TSTOR_VALUE_TENSOR || k == TSTOR_VALUE_QUANTIZED;
}

#endif
