/* Text from a file, made safe to print: names, keys, metadata and the error
 * messages that quote them come from whoever wrote the file, and none of it
 * may move the cursor or rewrite what the terminal shows. */
#ifndef TSTOR_TOOLS_TERMINAL_H
#define TSTOR_TOOLS_TERMINAL_H

#include <stdio.h>

/* s with control characters (C0, DEL and, in UTF-8, C1) as \xNN and the
 * backslash as \\: a new string, freed by the caller; NULL when out of
 * memory. */
char *tool_escaped(const char *s);

/* Prints s escaped to f, left-aligned in a column of `width` (0: as it is). */
void tool_print_escaped(FILE *f, const char *s, int width);

/* Prints the message, escaped whole, and a newline to stderr. */
void tool_complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
