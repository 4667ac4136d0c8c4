/* Python's pickle, as far as torch.save uses it: the opcodes (one list, which
 * the reader's dispatch and the writer's constants both come from), the
 * strict reading machine, the rules a format gives it, and the writer.
 *
 * The machine knows only pickle: the stack, marks, memo, numbers, strings and
 * containers. What a global names, what a persistent id refers to, what a
 * REDUCE of a global builds and what BUILD may set are the rules' business
 * (CPython's find_class and persistent_load): torch_rules.c says it for
 * torch.save's two formats. Nothing a file names is ever executed. */
#ifndef TSTOR_IO_PICKLE_H
#define TSTOR_IO_PICKLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cursor.h"
#include "writebuf.h"

/* X(NAME, byte, reader): the opcodes read, with the reader's handler
 * (load_<reader> in unpickle.c). Any other byte is refused by the reader,
 * and so are INT and BINSTRING unless the rules take Python 2's pickles. */
#define TSTOR__PICKLE_OPCODES(X)              \
  X(PROTO, 0x80, proto)                       \
  X(FRAME, 0x95, frame)                       \
  X(STOP, '.', stop)                          \
  X(MARK, '(', mark)                          \
  X(NONE, 'N', none)                          \
  X(NEWTRUE, 0x88, bool)                      \
  X(NEWFALSE, 0x89, bool)                     \
  X(BININT, 'J', binint)                      \
  X(BININT1, 'K', binint1)                    \
  X(BININT2, 'M', binint2)                    \
  X(INT, 'I', int)                            \
  X(LONG1, 0x8a, long1)                       \
  X(BINFLOAT, 'G', binfloat)                  \
  X(BINUNICODE, 'X', binunicode)              \
  X(SHORT_BINUNICODE, 0x8c, short_binunicode) \
  X(BINUNICODE8, 0x8d, binunicode8)           \
  X(SHORT_BINSTRING, 'U', short_binunicode)   \
  X(BINSTRING, 'T', binstring)                \
  X(EMPTY_DICT, '}', empty_dict)              \
  X(EMPTY_LIST, ']', empty_list)              \
  X(EMPTY_TUPLE, ')', empty_tuple)            \
  X(TUPLE, 't', tuple)                        \
  X(TUPLE1, 0x85, tuple_n)                    \
  X(TUPLE2, 0x86, tuple_n)                    \
  X(TUPLE3, 0x87, tuple_n)                    \
  X(APPEND, 'a', append)                      \
  X(APPENDS, 'e', appends)                    \
  X(SETITEM, 's', setitem)                    \
  X(SETITEMS, 'u', setitems)                  \
  X(BINPUT, 'q', binput)                      \
  X(LONG_BINPUT, 'r', long_binput)            \
  X(MEMOIZE, 0x94, memoize)                   \
  X(BINGET, 'h', binget)                      \
  X(LONG_BINGET, 'j', long_binget)            \
  X(GLOBAL, 'c', global)                      \
  X(STACK_GLOBAL, 0x93, stack_global)         \
  X(BINPERSID, 'Q', binpersid)                \
  X(REDUCE, 'R', reduce)                      \
  X(BUILD, 'b', build)

enum {
#define TSTOR__OPCODE_ENUM(name, byte, reader) TSTOR__OP_##name = (byte),
  TSTOR__PICKLE_OPCODES(TSTOR__OPCODE_ENUM)
#undef TSTOR__OPCODE_ENUM
};

/* ------------------------------------------------------------ reading */

typedef struct tstor__io_unpickler tstor__io_unpickler;

/* What a format allows. Each hook returns 0 or a code with the error set
 * (through tstor__io_unpickler_fail, which names the offset). A NULL hook
 * refuses the opcodes that need it. `state` is the caller's, passed back. */
typedef struct tstor__io_pickle_rules {
  /* GLOBAL and STACK_GLOBAL: *out becomes what module.name stands for. */
  int (*find_class)(tstor__io_unpickler *up, const char *module, size_t mlen, const char *name,
                    size_t nlen, tstor_value **out);
  /* BINPERSID: *out becomes what the persistent id `pid` refers to. */
  int (*persistent_load)(tstor__io_unpickler *up, tstor_value *pid, tstor_value **out);
  /* REDUCE: fn (from find_class) applied to the tuple args. */
  int (*reduce)(tstor__io_unpickler *up, tstor_value *fn, tstor_value *args, tstor_value **out);
  /* BUILD: inst's state set from `state`. */
  int (*build)(tstor__io_unpickler *up, tstor_value *inst, tstor_value *state);
  void *state;
  /* INT (a decimal line) and BINSTRING too: what Python 2's pickle wrote in
   * binary pickles for ints past 32 bits and str of 256 bytes or more, which
   * Python 3's pickle reads and PyTorch's weights_only unpickler refuses. */
  bool python2;
} tstor__io_pickle_rules;

/* Runs the machine over the pickle at the cursor, which is left just past its
 * STOP (several pickles may follow one another, as in torch.save's legacy
 * format). *result gets the value STOP returns, a value of ck. Every value is
 * allocated in ck; past max_values values in ck, TSTOR_ERANGE. On failure
 * the message names cur->what and the opcode's offset; ck keeps what was
 * allocated (tstor_checkpoint_free frees it). rules may be NULL: no globals
 * and no persistent ids. */
int tstor__io_unpickle(tstor_checkpoint *ck, tstor__io_cursor *cur,
                       const tstor__io_pickle_rules *rules, size_t max_values,
                       tstor_value **result);

/* For the rules: a new value in the checkpoint being read; the rules' state;
 * the checkpoint; a failure naming the current opcode's offset. */
tstor_value *tstor__io_unpickler_value(tstor__io_unpickler *up, int kind);
void *tstor__io_unpickler_state(const tstor__io_unpickler *up);
tstor_checkpoint *tstor__io_unpickler_checkpoint(const tstor__io_unpickler *up);
int tstor__io_unpickler_fail(const tstor__io_unpickler *up, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ------------------------------------------------------------ writing */

/* A protocol-2 pickle writer over a first-error buffer: the value layer's
 * shapes, written as Python's pickle writes them (the shortest int opcode,
 * tuples of up to three by TUPLEn, containers in batches of 1000, a memo entry
 * for everything that can be shared). Each call appends; errors are kept in
 * the buffer. */
typedef struct tstor__io_pickler {
  tstor__io_wbuf out;
  tstor__io_idmap memo; /* identity (a pointer) -> memo index */
  uint32_t next_memo;
} tstor__io_pickler;

void tstor__io_pickler_init(tstor__io_pickler *pk, const char *what);
void tstor__io_pickler_free(tstor__io_pickler *pk);
void tstor__io_pickle_op(tstor__io_pickler *pk, uint8_t opcode);
void tstor__io_pickle_int(tstor__io_pickler *pk, int64_t v);
void tstor__io_pickle_float(tstor__io_pickler *pk, double v);
void tstor__io_pickle_str(tstor__io_pickler *pk, const char *s, size_t len);
/* TUPLE1..3 for up to three items pushed since no MARK, else TUPLE after a
 * MARK the caller pushed (tstor__io_pickle_tuple_begin gives it when needed). */
void tstor__io_pickle_tuple_begin(tstor__io_pickler *pk, size_t n);
void tstor__io_pickle_tuple_end(tstor__io_pickler *pk, size_t n);
/* "module\nname\n" as GLOBAL, memoized under the identity `id`. */
void tstor__io_pickle_global(tstor__io_pickler *pk, const void *id, const char *module,
                             const char *name);
/* A memo entry for the value on top of the stack, under the identity `id`;
 * tstor__io_pickle_memo_get pushes it again (false when id has none). */
void tstor__io_pickle_memo_put(tstor__io_pickler *pk, const void *id);
bool tstor__io_pickle_memo_get(tstor__io_pickler *pk, const void *id);

#endif
