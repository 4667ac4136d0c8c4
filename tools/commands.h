/* The subcommands of the tstor program. Each takes the arguments after its
 * name (argv[0] is the subcommand) and returns the process exit status. */
#ifndef TSTOR_COMMANDS_H
#define TSTOR_COMMANDS_H

#include <tstor/tstor.h>

/* Exit statuses: 1 for a failure, 2 for bad usage, as most Unix tools (not
 * sysexits.h's, which start at 64). */
enum { EXIT_USAGE = 2, EXIT_FAILED = 1 };

int tstor_cmd_info(int argc, char **argv);
int tstor_cmd_bench(int argc, char **argv);
int tstor_cmd_conformance(int argc, char **argv);
int tstor_cmd_inspect(int argc, char **argv); /* cmd_ckpt.c, libtstor-io */
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

#endif
