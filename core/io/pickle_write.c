/* The pickle writer of pickle.h: protocol 2, as Python's pickle writes it, so
 * that PyTorch 1.13's weights_only loader (which reads only the opcodes
 * protocol 2 emits, and no BINFLOAT) reads what it writes. */
#include "io_internal.h"

#include <string.h>

void tstor__io_pickler_init(tstor__io_pickler *pk, const char *what) {
  memset(pk, 0, sizeof *pk);
  pk->out.what = what;
}

void tstor__io_pickler_free(tstor__io_pickler *pk) {
  tstor__io_wbuf_free(&pk->out);
  tstor__io_idmap_free(&pk->memo);
}

void tstor__io_pickle_op(tstor__io_pickler *pk, uint8_t opcode) {
  tstor__io_wbuf_byte(&pk->out, opcode);
}

static void op_u32(tstor__io_pickler *pk, uint8_t opcode, uint32_t v) {
  tstor__io_wbuf_byte(&pk->out, opcode);
  tstor__io_wbuf_uint(&pk->out, v, 4, false);
}

void tstor__io_pickle_int(tstor__io_pickler *pk, int64_t v) {
  if (v >= 0 && v < 256) {
    tstor__io_wbuf_byte(&pk->out, TSTOR__OP_BININT1);
    tstor__io_wbuf_uint(&pk->out, (uint64_t)v, 1, false);
  } else if (v >= 0 && v < 65536) {
    tstor__io_wbuf_byte(&pk->out, TSTOR__OP_BININT2);
    tstor__io_wbuf_uint(&pk->out, (uint64_t)v, 2, false);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    op_u32(pk, TSTOR__OP_BININT, (uint32_t)(int32_t)v);
  } else {
    /* LONG1: the fewest little-endian two's-complement bytes, as Python writes */
    uint8_t b[8];
    tstor__io_put_uint(b, (uint64_t)v, 8, false);
    size_t n = 8;
    while (n > 1 && ((b[n - 1] == 0x00 && !(b[n - 2] & 0x80)) || (b[n - 1] == 0xFF && (b[n - 2] & 0x80)))) n--;
    tstor__io_wbuf_byte(&pk->out, TSTOR__OP_LONG1);
    tstor__io_wbuf_byte(&pk->out, (uint8_t)n);
    tstor__io_wbuf_append(&pk->out, b, n);
  }
}

void tstor__io_pickle_float(tstor__io_pickler *pk, double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  tstor__io_wbuf_byte(&pk->out, TSTOR__OP_BINFLOAT);
  tstor__io_wbuf_uint(&pk->out, u, 8, true);
}

void tstor__io_pickle_str(tstor__io_pickler *pk, const char *s, size_t len) {
  if (len > UINT32_MAX) {
    tstor__io_wbuf_fail(&pk->out, TSTOR_EOVERFLOW, "a string of %zu bytes", len);
    return;
  }
  op_u32(pk, TSTOR__OP_BINUNICODE, (uint32_t)len);
  tstor__io_wbuf_append(&pk->out, s, len);
}

void tstor__io_pickle_tuple_begin(tstor__io_pickler *pk, size_t n) {
  if (n > 3) tstor__io_wbuf_byte(&pk->out, TSTOR__OP_MARK);
}

void tstor__io_pickle_tuple_end(tstor__io_pickler *pk, size_t n) {
  static const uint8_t small[4] = {TSTOR__OP_EMPTY_TUPLE, TSTOR__OP_TUPLE1, TSTOR__OP_TUPLE2, TSTOR__OP_TUPLE3};
  tstor__io_wbuf_byte(&pk->out, n <= 3 ? small[n] : TSTOR__OP_TUPLE);
}

/* ------------------------------------------------------------- the memo */

static void memo_op(tstor__io_pickler *pk, uint8_t one_byte, uint8_t four_bytes, uint32_t idx) {
  if (idx < 256) {
    tstor__io_wbuf_byte(&pk->out, one_byte);
    tstor__io_wbuf_byte(&pk->out, (uint8_t)idx);
  } else {
    op_u32(pk, four_bytes, idx);
  }
}

void tstor__io_pickle_memo_put(tstor__io_pickler *pk, const void *id) {
  if (pk->out.err.code) return;
  int rc = tstor__io_idmap_put(&pk->memo, id, pk->next_memo);
  if (rc) {
    tstor__io_wbuf_fail(&pk->out, rc, "%s: out of memory for the pickle's memo", pk->out.what);
    return;
  }
  memo_op(pk, TSTOR__OP_BINPUT, TSTOR__OP_LONG_BINPUT, pk->next_memo++);
}

bool tstor__io_pickle_memo_get(tstor__io_pickler *pk, const void *id) {
  uint32_t idx;
  if (!tstor__io_idmap_get(&pk->memo, id, &idx)) return false;
  memo_op(pk, TSTOR__OP_BINGET, TSTOR__OP_LONG_BINGET, idx);
  return true;
}

void tstor__io_pickle_global(tstor__io_pickler *pk, const void *id, const char *module,
                             const char *name) {
  if (tstor__io_pickle_memo_get(pk, id)) return;
  tstor__io_wbuf_byte(&pk->out, TSTOR__OP_GLOBAL);
  tstor__io_wbuf_printf(&pk->out, "%s\n%s\n", module, name);
  tstor__io_pickle_memo_put(pk, id);
}
