/* GGUF's layout (llama.cpp's docs/gguf.md, ggml's gguf.h) and ggml's tensor
 * types: the facts the GGUF reader, the writer and the dequantizer share,
 * each listed once. All integers are little-endian.
 *
 *   header      "GGUF", u32 version (2 or 3: they lay out alike), u64 tensor
 *               count, u64 metadata count
 *   metadata    per entry: string key, u32 value type, the value
 *   tensor info per tensor: string name, u32 n_dims, u64 ne[n_dims] (ggml's
 *               order: the fastest-varying dimension first), u32 ggml type,
 *               u64 offset into the data section (a multiple of the alignment)
 *   padding     zeros up to a multiple of general.alignment (a u32; 32 when
 *               absent)
 *   data        each tensor's blocks, padded to the alignment
 *
 * A string is a u64 length and that many bytes (UTF-8, no NUL). A value is
 * a scalar of its type, a string, or an array: u32 element type, u64 count,
 * the elements. */
#ifndef TSTOR_IO_GGUF_FORMAT_H
#define TSTOR_IO_GGUF_FORMAT_H

#include <tstor/typed.h>

#define TSTOR__GGUF_MAGIC "GGUF"
#define TSTOR__GGUF_VERSION 3 /* the version written */
#define TSTOR__GGUF_ALIGNMENT 32
#define TSTOR__GGUF_ALIGNMENT_KEY "general.alignment"

/* The metadata value types: X(NAME, id, bytes of a scalar (0: a string or
 * an array), name). The ids are tstor_gguf_type's (serialize.h). */
#define TSTOR__GGUF_VALUE_TYPES(X) \
  X(UINT8, 0, 1, "u8")             \
  X(INT8, 1, 1, "i8")              \
  X(UINT16, 2, 2, "u16")           \
  X(INT16, 3, 2, "i16")            \
  X(UINT32, 4, 4, "u32")           \
  X(INT32, 5, 4, "i32")            \
  X(FLOAT32, 6, 4, "f32")          \
  X(BOOL, 7, 1, "bool")            \
  X(STRING, 8, 0, "str")           \
  X(ARRAY, 9, 0, "arr")            \
  X(UINT64, 10, 8, "u64")          \
  X(INT64, 11, 8, "i64")           \
  X(FLOAT64, 12, 8, "f64")
#define TSTOR__GGUF_VALUE_TYPE_COUNT 13

/* ggml's tensor types (ggml.h's enum ggml_type) that a GGUF file may hold:
 * X(NAME, id, elements per block, bytes per block, the tstor dtype of a
 * plain type or -1 for a quantized one). The names are the gguf package's
 * (GGMLQuantizationType); the ids missing from the list (4, 5, 31-33,
 * 36-38) are types ggml removed, which no file may hold. */
#define TSTOR__GGML_TYPES(X)        \
  X(F32, 0, 1, 4, TSTOR_FLOAT32)    \
  X(F16, 1, 1, 2, TSTOR_FLOAT16)    \
  X(Q4_0, 2, 32, 18, -1)            \
  X(Q4_1, 3, 32, 20, -1)            \
  X(Q5_0, 6, 32, 22, -1)            \
  X(Q5_1, 7, 32, 24, -1)            \
  X(Q8_0, 8, 32, 34, -1)            \
  X(Q8_1, 9, 32, 36, -1)            \
  X(Q2_K, 10, 256, 84, -1)          \
  X(Q3_K, 11, 256, 110, -1)         \
  X(Q4_K, 12, 256, 144, -1)         \
  X(Q5_K, 13, 256, 176, -1)         \
  X(Q6_K, 14, 256, 210, -1)         \
  X(Q8_K, 15, 256, 292, -1)         \
  X(IQ2_XXS, 16, 256, 66, -1)       \
  X(IQ2_XS, 17, 256, 74, -1)        \
  X(IQ3_XXS, 18, 256, 98, -1)       \
  X(IQ1_S, 19, 256, 50, -1)         \
  X(IQ4_NL, 20, 32, 18, -1)         \
  X(IQ3_S, 21, 256, 110, -1)        \
  X(IQ2_S, 22, 256, 82, -1)         \
  X(IQ4_XS, 23, 256, 136, -1)       \
  X(I8, 24, 1, 1, TSTOR_INT8)       \
  X(I16, 25, 1, 2, TSTOR_INT16)     \
  X(I32, 26, 1, 4, TSTOR_INT32)     \
  X(I64, 27, 1, 8, TSTOR_INT64)     \
  X(F64, 28, 1, 8, TSTOR_FLOAT64)   \
  X(IQ1_M, 29, 256, 56, -1)         \
  X(BF16, 30, 1, 2, TSTOR_BFLOAT16) \
  X(TQ1_0, 34, 256, 54, -1)         \
  X(TQ2_0, 35, 256, 66, -1)         \
  X(MXFP4, 39, 32, 17, -1)          \
  X(NVFP4, 40, 64, 36, -1)          \
  X(Q1_0, 41, 128, 18, -1)          \
  X(Q2_0, 42, 64, 18, -1)
#define TSTOR__GGML_TYPE_END 43 /* one past the largest id */

typedef struct tstor__io_ggml_type {
  const char *name; /* NULL: no such type */
  int64_t block;    /* elements per block */
  int64_t bytes;    /* bytes per block */
  int dtype;        /* a plain type's tstor dtype, or -1 */
} tstor__io_ggml_type;

/* Type `id`'s facts, or NULL for an id that is none of ggml's. */
const tstor__io_ggml_type *tstor__io_ggml_type_of(int64_t id);
/* The ggml type of plain dtype dt, or -1 where GGUF has none (bool, uint8,
 * complex, float8). */
int tstor__io_ggml_type_for(tstor_dtype dt);
/* Decodes `blocks` blocks of quantized type `id` at src into float32 at dst
 * (ggml_dequant.c); 0, or TSTOR_EINVAL for a plain type or no type. */
int tstor__io_ggml_dequantize(int id, const uint8_t *src, int64_t blocks, float *dst);

#endif
