/* torch.save files written by PyTorch (tests/ckpt/gen_golden.py), loaded by
 * tstor and listed as the generator listed what torch.load read from them:
 * every value, every tensor's dtype, sizes, strides, offset, storage sharing
 * and element bytes. Each file is loaded four ways (mapped, read into memory,
 * from a buffer, from a borrowed buffer) and onto the meta device. The
 * hostile files must each fail with the expected code and message, in every
 * way, without leaking (the sanitizer builds run this suite too). */
#define _GNU_SOURCE
#include "testutil.h"

#include <inttypes.h>
#include <stdarg.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tstor/serialize.h>
#include <tstor/tensor.h>
#include "ckptlist.h"
#include "cudasaved.h"
#include "ondevice.h"

#define CKDIR TSTOR_TEST_SRCDIR "/ckpt"

static tstor_context *ctx;

/* ------------------------------------------------------- expected lists */


/* The file's bytes in memory the process cannot write, as a caller's const
 * buffer may be: a load that writes to what it borrows crashes. Freed with
 * munmap(p, *len + 1). */
static char *slurp_read_only(const char *path, size_t *len) {
  char *s = tstor_test_slurp(path, len);
  char *p = mmap(NULL, *len + 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(p, MAP_FAILED);
  memcpy(p, s, *len);
  free(s);
  ck_assert_int_eq(mprotect(p, *len + 1, PROT_READ), 0);
  return p;
}

typedef struct golden {
  char *name;
  char *expect; /* the lines after "file NAME" */
} golden;

/* The golden sets: PyTorch 1.13's files (gen_golden.py, gen_tar.py) and
 * 2.x's (gen_golden_torch2.py), each with its folder and how many cases it
 * has at least. */
typedef struct golden_set {
  const char *dir;
  int min_cases;
  golden *cases;
  int ncases;
} golden_set;

static golden_set sets[] = {
    {CKDIR "/golden", 330, NULL, 0},
    {CKDIR "/golden_torch2", 100, NULL, 0},
};
enum { NSETS = sizeof sets / sizeof sets[0] };

/* A listing's cases (golden.txt's format), named relative to the set's folder. */
static void read_listing(golden_set *gs, const char *path) {
  char *all = tstor_test_slurp(path, NULL);
  char *p = strchr(all, '\n') + 1; /* past the header */
  while (*p) {
    ck_assert(strncmp(p, "file ", 5) == 0);
    char *eol = strchr(p, '\n');
    char *next = strstr(eol, "\nfile ");
    next = next ? next + 1 : eol + strlen(eol);
    gs->cases = realloc(gs->cases, (size_t)(gs->ncases + 1) * sizeof *gs->cases);
    gs->cases[gs->ncases].name = strndup(p + 5, (size_t)(eol - p - 5));
    gs->cases[gs->ncases].expect = strndup(eol + 1, (size_t)(next - eol - 1));
    gs->ncases++;
    p = next;
  }
  free(all);
}

/* PyTorch's files (1.13's, as PyTorch 2.x reads them: golden_as_torch2.txt,
 * which differs from 1.13's golden.txt where docs/formats.md says; and the
 * tar format's files that gen_tar.py wrote as PyTorch 0.1 did, which 1.13 and
 * 2.x read alike), or 2.x's. */
static golden_set *read_golden(int which) {
  golden_set *gs = &sets[which];
  if (gs->cases) return gs;
  if (which == 0) {
    read_listing(gs, CKDIR "/golden_as_torch2.txt");
    read_listing(gs, CKDIR "/tar.txt");
  } else {
    read_listing(gs, CKDIR "/golden_torch2.txt");
  }
  ck_assert_int_gt(gs->ncases, gs->min_cases);
  return gs;
}

/* A listing without what needs the elements: each tensor's fnv=, and a
 * per-channel quantizer's scales= and zero_points=, become "-". */
static char *drop_data(const char *s) {
  static const char *const marks[] = {"fnv=", "scales=", "zero_points="};
  char *r = strdup(s), *w = r;
  for (const char *p = s; *p;) {
    size_t k = 0, m = 0;
    for (; k < 3; k++)
      if (!strncmp(p, marks[k], m = strlen(marks[k]))) break;
    if (k == 3) {
      *w++ = *p++;
      continue;
    }
    memcpy(w, p, m);
    w += m;
    *w++ = '-';
    p += m + strcspn(p + m, " \n");
  }
  *w = '\0';
  return r;
}

enum { WAY_MAP, WAY_READ, WAY_BUFFER, WAY_BORROW, WAY_META, NWAYS };
static const char *const way_names[] = {"mapped", "read", "buffer", "borrowed buffer", "meta"};

static int load_way(int way, const char *path, char *bytes, size_t len, tstor_checkpoint **ck) {
  tstor_load_options o = {sizeof o, NULL, 0}; /* WAY_READ: the default */
  /* saved on a GPU, listed as torch.load(map_location="cpu") read it */
  if (strstr(path, "/tar/cuda_")) o.map_location = "cpu";
  switch (way) {
    case WAY_MAP: o.flags = TSTOR_LOAD_MMAP; break;
    case WAY_META: o.map_location = "meta"; break;
    case WAY_BUFFER: return tstor_torch_load_buffer(ctx, bytes, len, &o, ck);
    case WAY_BORROW:
      o.flags = TSTOR_LOAD_BORROW_BUFFER;
      return tstor_torch_load_buffer(ctx, bytes, len, &o, ck);
    default: break;
  }
  return tstor_torch_load(ctx, path, &o, ck);
}

static void setup(void) { ck_tstor_ok(tstor_context_open(NULL, &ctx)); }
static void teardown(void) { tstor_context_close(ctx); }

/* Whether base, the memory storage k of ck views, is another storage of ck
 * (a storage view of the legacy and tar formats). */
static int views_the_load(const tstor_checkpoint *ck, size_t k, const tstor_storage *base) {
  for (size_t j = 0; j < tstor_checkpoint_storage_count(ck); j++) {
    tstor_storage *other;
    ck_tstor_ok(tstor_checkpoint_storage(ck, j, NULL, &other));
    if (j != k && other == base) return 1;
  }
  return 0;
}

START_TEST(golden_files) {
  const golden_set *gs = read_golden(_i);
  const golden *cases = gs->cases;
  int mapped = 0, legacy_mapped = 0;
  for (int i = 0; i < gs->ncases; i++) {
    char *path;
    ck_assert(asprintf(&path, "%s/%s", gs->dir, cases[i].name) > 0);
    size_t len;
    char *bytes = slurp_read_only(path, &len);
    for (int way = 0; way < NWAYS; way++) {
      tstor_checkpoint *ck = NULL;
      int rc = load_way(way, path, bytes, len, &ck);
      ck_assert_msg(rc == 0, "%s (%s): %s: %s", cases[i].name, way_names[way], tstor_err_name(rc),
                    tstor_last_error());
      char *got = list_checkpoint(ck, way != WAY_META);
      char *want = way == WAY_META ? drop_data(cases[i].expect) : strdup(cases[i].expect);
      ck_assert_msg(strcmp(got, want) == 0, "%s (%s):\n--- tstor\n%s--- PyTorch\n%s", cases[i].name,
                    way_names[way], got, want);
      /* mapped loads of torch.save's stored, aligned records are views of one
       * mapping; read ones (the default) own their memory, but for the
       * legacy format's views, which view another storage of the load */
      for (size_t k = 0; way == WAY_READ && k < tstor_checkpoint_storage_count(ck); k++) {
        tstor_storage *s, *base;
        ck_tstor_ok(tstor_checkpoint_storage(ck, k, NULL, &s));
        ck_assert_msg(!(tstor_storage_flags(s) & TSTOR_FLAG_MAPPED),
                      "%s: storage %zu of a read load is a mapping", cases[i].name, k);
        if (!(base = tstor_storage_base(s))) continue;
        ck_assert_msg(views_the_load(ck, k, base),
                      "%s: storage %zu of a read load views memory of no storage of it",
                      cases[i].name, k);
      }
      for (size_t k = 0; way == WAY_MAP && k < tstor_checkpoint_storage_count(ck); k++) {
        tstor_storage *s;
        ck_tstor_ok(tstor_checkpoint_storage(ck, k, NULL, &s));
        tstor_storage *base = tstor_storage_base(s);
        /* the legacy and tar formats' storages follow pickles unaligned: a
         * view where one lands aligned, else a copy */
        if (strncmp(cases[i].name, "legacy_", 7) == 0 ||
            strncmp(cases[i].name, "../tar/", 7) == 0) {
          int mapping = base && (tstor_storage_flags(base) & TSTOR_FLAG_MAPPED);
          ck_assert_msg(!base || mapping || views_the_load(ck, k, base), "%s: storage %zu",
                        cases[i].name, k);
          legacy_mapped += mapping;
        } else if (tstor_storage_nbytes(s) && strncmp(cases[i].name, "../hostile/", 11) != 0) {
          ck_assert_msg(base && (tstor_storage_flags(base) & TSTOR_FLAG_MAPPED), "%s: storage %zu not mapped",
                        cases[i].name, k);
          mapped++;
        }
      }
      free(got);
      free(want);
      tstor_checkpoint_free(ck);
    }
    munmap(bytes, len + 1);
    free(path);
  }
  ck_assert_int_gt(mapped, (_i ? 90 : 300));
  if (!_i) ck_assert_int_gt(legacy_mapped, 5); /* 2.x's set has no legacy files */
}
END_TEST

/* Every golden file, loaded, saved by tstor and loaded again, lists the same:
 * values, layouts, sharing and bytes. (ckpt/roundtrip.sh has PyTorch load
 * the same re-saved files.) But one: tensors that view one storage as three
 * dtypes, which torch.save's format cannot hold (gen_golden_torch2.py checks
 * that torch.save refuses them). */
#define UNSAVABLE "storage_three_dtypes.pt"
START_TEST(golden_resave) {
  const golden_set *gs = read_golden(_i);
  const golden *cases = gs->cases;
  char dir[] = "/tmp/tstor-resave-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  for (int i = 0; i < gs->ncases; i++) {
    char *path, *out;
    ck_assert(asprintf(&path, "%s/%s", gs->dir, cases[i].name) > 0);
    ck_assert(asprintf(&out, "%s/resaved.pt", dir) > 0);
    for (int way = WAY_MAP; way <= WAY_READ; way++) {
      tstor_checkpoint *ck, *back;
      ck_tstor_ok(load_way(way, path, NULL, 0, &ck));
      int rc = tstor_torch_save(ck, out, NULL);
      if (strcmp(cases[i].name, UNSAVABLE) == 0) { /* as torch.save refuses it */
        ck_assert_int_eq(rc, TSTOR_EINVAL);
        ck_assert_ptr_nonnull(
            strstr(tstor_last_error(), "two tensors view one storage as float32 and as int32"));
        tstor_checkpoint_free(ck);
        continue;
      }
      ck_assert_msg(rc == 0, "%s: %s", cases[i].name, tstor_last_error());
      ck_tstor_ok(tstor_torch_load(ctx, out, NULL, &back));
      char *a = list_checkpoint(ck, 1), *b = list_checkpoint(back, 1);
      ck_assert_msg(strcmp(a, b) == 0, "%s:\n--- loaded\n%s--- saved and loaded again\n%s", cases[i].name, a, b);
      free(a);
      free(b);
      tstor_checkpoint_free(back);
      tstor_checkpoint_free(ck);
    }
    unlink(out);
    free(out);
    free(path);
  }
  rmdir(dir);
}
END_TEST

/* map_location onto another backend's device (the hpu stub, whose memory
 * faults on host access): the same listing, and each storage, copied back,
 * holds the bytes the cpu load maps. */
START_TEST(golden_on_device) {
  const golden_set *gs = read_golden(_i);
  const golden *cases = gs->cases;
  tstor_device hpu;
  ck_tstor_ok(tstor_device_parse(ctx, "hpu:0", &hpu)); /* the build tree has the stub */
  tstor_load_options o = {sizeof o, "hpu:0", 0};
  for (int i = 0; i < gs->ncases; i += 3) {
    char *path;
    ck_assert(asprintf(&path, "%s/%s", gs->dir, cases[i].name) > 0);
    tstor_checkpoint *dev, *host;
    tstor_load_options ho = {sizeof ho, strstr(path, "/tar/cuda_") ? "cpu" : NULL, 0};
    ck_tstor_ok(tstor_torch_load(ctx, path, &o, &dev));
    ck_tstor_ok(tstor_torch_load(ctx, path, &ho, &host));
    char *a = list_checkpoint(dev, 0), *b = list_checkpoint(host, 0);
    ck_assert_str_eq(a, b);
    ondevice_same_storages(ctx, dev, host, hpu, path);
    free(a);
    free(b);
    tstor_checkpoint_free(dev);
    tstor_checkpoint_free(host);
    free(path);
  }
}
END_TEST

/* Every format's files, loaded onto hpu:0 as a GPU machine loads them onto
 * cuda:0 (test_cuda_tensor). */
START_TEST(every_format_on_device) { ck_assert_int_gt(ondevice_every_format(ctx, "hpu:0"), 300); }
END_TEST

/* A tensor the caller retained outlives its checkpoint, and keeps the file's
 * mapping alive; a write to a mapped storage stays in this process. */
START_TEST(tensor_outlives_checkpoint) {
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_torch_load(ctx, CKDIR "/golden/share_dict_float32.pt", NULL, &ck));
  const tstor_value *root = tstor_checkpoint_root(ck);
  tstor_tensor *a = tstor_tensor_retain(tstor_value_tensor(tstor_value_dict_get(root, "a")));
  tstor_tensor *base = tstor_tensor_retain(tstor_value_tensor(tstor_value_dict_get(root, "base")));
  ck_assert_ptr_eq(tstor_tensor_storage(a), tstor_tensor_storage(base));
  ck_assert_ptr_null(tstor_value_dict_get(root, "missing"));
  tstor_checkpoint_free(ck);
  float *pa = tstor_tensor_data(a), *pb = tstor_tensor_data(base);
  ck_assert_ptr_eq(pa, pb + 2);
  float old = pb[2];
  pa[0] = 1234.5f;
  ck_assert(pb[2] == 1234.5f);
  tstor_tensor_release(a);
  tstor_tensor_release(base);
  /* the file is untouched: a fresh load sees the old value */
  ck_tstor_ok(tstor_torch_load(ctx, CKDIR "/golden/share_dict_float32.pt", NULL, &ck));
  float *again = tstor_tensor_data(tstor_value_tensor(tstor_value_dict_get(tstor_checkpoint_root(ck), "base")));
  ck_assert(again[2] == old);
  tstor_checkpoint_free(ck);
}
END_TEST

/* The files of a hostile list (hostile.txt's format) in dir, each refused
 * every way with its code and message; returns how many. */
static int hostile_list(const char *list, const char *dir) {
  size_t len;
  char *all = tstor_test_slurp(list, &len);
  int n = 0;
  for (char *line = strtok(all, "\n"); line; line = strtok(NULL, "\n")) {
    if (line[0] == '#') continue;
    char name[128], code[32];
    int off = 0;
    ck_assert_int_eq(sscanf(line, "%127s %31s %n", name, code, &off), 2);
    const char *needle = line + off;
    char *path;
    ck_assert(asprintf(&path, "%s/%s", dir, name) > 0);
    size_t blen;
    char *bytes = tstor_test_slurp(path, &blen);
    for (int way = 0; way < NWAYS; way++) {
      /* meta is a device it has, and a map_location makes a missing location moot */
      if (way == WAY_META && (strcmp(code, "TSTOR_ENODEV") == 0 || strstr(needle, "no location"))) continue;
      tstor_checkpoint *ck = (tstor_checkpoint *)1;
      int rc = load_way(way, path, bytes, blen, &ck);
      /* Stored records' CRCs are checked only when asked (serialize.h), as
       * PyTorch's reader does; asked, every way that reads bytes finds it. */
      int crc = strstr(needle, "CRC") != NULL;
      if (crc && way != WAY_META) {
        tstor_load_options o = {sizeof o, NULL, TSTOR_LOAD_VERIFY_CRC | (way == WAY_MAP ? TSTOR_LOAD_MMAP : 0) |
                                                  (way == WAY_BORROW ? TSTOR_LOAD_BORROW_BUFFER : 0)};
        tstor_checkpoint *vck = (tstor_checkpoint *)1;
        int vrc = way >= WAY_BUFFER ? tstor_torch_load_buffer(ctx, bytes, blen, &o, &vck)
                                    : tstor_torch_load(ctx, path, &o, &vck);
        ck_assert_msg(vrc == TSTOR_EINVAL && strstr(tstor_last_error(), "CRC"), "%s (%s, verified): %s", name,
                      way_names[way], tstor_last_error());
        ck_assert_ptr_null(vck);
      }
      if (strcmp(code, "OK") == 0 || crc) {
        ck_assert_msg(rc == 0, "%s (%s): %s", name, way_names[way], tstor_last_error());
        tstor_checkpoint_free(ck);
        if (!crc && way != WAY_META) { /* and the CRCs of a good file hold, a record longer than its storage too */
          tstor_load_options o = {sizeof o, NULL, TSTOR_LOAD_VERIFY_CRC | (way == WAY_MAP ? TSTOR_LOAD_MMAP : 0) |
                                                    (way == WAY_BORROW ? TSTOR_LOAD_BORROW_BUFFER : 0)};
          int vrc = way >= WAY_BUFFER ? tstor_torch_load_buffer(ctx, bytes, blen, &o, &ck)
                                      : tstor_torch_load(ctx, path, &o, &ck);
          ck_assert_msg(vrc == 0, "%s (%s, verified): %s", name, way_names[way], tstor_last_error());
          tstor_checkpoint_free(ck);
        }
        continue;
      }
      ck_assert_msg(rc != 0 && strcmp(tstor_err_name(rc), code) == 0,
                    "%s (%s): got %s (%s), expected %s", name, way_names[way], tstor_err_name(rc),
                    tstor_last_error(), code);
      ck_assert_ptr_null(ck);
      ck_assert_msg(strstr(tstor_last_error(), needle) != NULL, "%s (%s): \"%s\" does not say \"%s\"",
                    name, way_names[way], tstor_last_error(), needle);
    }
    free(bytes);
    free(path);
    n++;
  }
  free(all);
  return n;
}

START_TEST(hostile_files) {
  if (_i == 0) {
    ck_assert_int_gt(hostile_list(CKDIR "/hostile.txt", CKDIR "/hostile"), 55);
    ck_assert_int_gt(hostile_list(CKDIR "/tar_hostile.txt", CKDIR "/tar_hostile"), 50);
  } else {
    ck_assert_int_gt(hostile_list(CKDIR "/hostile_torch2.txt", CKDIR "/hostile_torch2"), 2);
  }
}
END_TEST

/* Formats told apart by their first bytes, and tstor_checkpoint_load taking
 * whichever it reads: the golden .pt and a safetensors file load; the
 * openings of the legacy torch.save format (pickle protocols 2 to 5, a FRAME
 * from 4 on) and of Torch7 files (binary, both byte orders, and ascii) are
 * named and refused as not read yet; anything else is no checkpoint. */
static void spit_bytes(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(p, 1, n, f), n);
  fclose(f);
}

START_TEST(formats_by_their_bytes) {
  static const unsigned char magic[] = {0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  unsigned char legacy2[16] = {0x80, 0x02}, legacy4[32] = {0x80, 0x04, 0x95, 0x0c};
  memcpy(legacy2 + 2, magic, sizeof magic);
  memcpy(legacy4 + 11, magic, sizeof magic);
  static const unsigned char t7_le[] = {4, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 'V', ' ', '1'},
                             t7_be[] = {0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 2},
                             st[] = {13, 0, 0, 0, 0, 0, 0, 0, ' ', '{', '}', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
  const struct {
    const void *p;
    size_t n;
    tstor_file_format want;
  } heads[] = {
      {"PK\3\4", 4, TSTOR_FORMAT_TORCH},
      {legacy2, 14, TSTOR_FORMAT_TORCH_LEGACY},
      {legacy4, 23, TSTOR_FORMAT_TORCH_LEGACY},
      {legacy2, 13, TSTOR_FORMAT_UNKNOWN}, /* cut inside the magic */
      {t7_le, sizeof t7_le, TSTOR_FORMAT_TORCH7},
      {t7_be, sizeof t7_be, TSTOR_FORMAT_TORCH7},
      {"4\n1\n3\nV 1\n", 10, TSTOR_FORMAT_TORCH7},
      {st, sizeof st, TSTOR_FORMAT_SAFETENSORS},
      {"\x80\x02}q\x00.", 6, TSTOR_FORMAT_UNKNOWN}, /* a pickle, but not torch's */
      {"\xff\xff\xff\xff\xff\xff\xff\x7f{", 9, TSTOR_FORMAT_UNKNOWN},
      {"", 0, TSTOR_FORMAT_UNKNOWN},
  };
  for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++)
    ck_assert_msg(tstor_file_format_detect(heads[i].p, heads[i].n) == heads[i].want, "case %zu: %s", i,
                  tstor_file_format_name(tstor_file_format_detect(heads[i].p, heads[i].n)));
  ck_assert_int_eq(tstor_file_format_detect(NULL, 4), TSTOR_FORMAT_UNKNOWN);
  ck_assert_str_eq(tstor_file_format_name(TSTOR_FORMAT_TORCH_LEGACY), "torch-legacy");
  ck_assert_str_eq(tstor_file_format_name(TSTOR_FORMAT_TORCH_TAR), "torch-tar");
  /* the tar format: a whole header block whose checksum is right */
  size_t tlen;
  char *tar = tstor_test_slurp(CKDIR "/tar/state_linear.pt", &tlen);
  ck_assert_int_eq(tstor_file_format_detect(tar, 512), TSTOR_FORMAT_TORCH_TAR);
  ck_assert_int_eq(tstor_file_format_detect(tar, 511), TSTOR_FORMAT_UNKNOWN);
  tar[148] ^= 1;
  ck_assert_int_eq(tstor_file_format_detect(tar, 512), TSTOR_FORMAT_UNKNOWN);
  memset(tar, 0, 512);
  ck_assert_int_eq(tstor_file_format_detect(tar, 512), TSTOR_FORMAT_UNKNOWN);
  free(tar);
  ck_assert_str_eq(tstor_file_format_name((tstor_file_format)99), "unknown");

  tstor_file_format f;
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_file_format_of(CKDIR "/golden/checkpoint_nested.pt", &f));
  ck_assert_int_eq(f, TSTOR_FORMAT_TORCH);
  ck_tstor_ok(tstor_checkpoint_load(ctx, CKDIR "/golden/checkpoint_nested.pt", NULL, &ck));
  ck_assert_ptr_nonnull(tstor_value_dict_get(tstor_checkpoint_root(ck), "model"));
  char dir[] = "/tmp/tstor-formats-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char path[256];
  snprintf(path, sizeof path, "%s/w.safetensors", dir);
  tstor_checkpoint *flat;
  tstor_load_options o = TSTOR_LOAD_OPTIONS_INIT;
  o.map_location = "cpu";
  ck_tstor_ok(tstor_torch_load(ctx, CKDIR "/golden/share_dict_float32.pt", &o, &flat));
  ck_tstor_ok(tstor_safetensors_save(flat, path, TEST_SAVE_OPTS(TSTOR_SAVE_COPY_SHARED)));
  tstor_checkpoint_free(flat);
  ck_tstor_ok(tstor_file_format_of(path, &f));
  ck_assert_int_eq(f, TSTOR_FORMAT_SAFETENSORS);
  tstor_checkpoint_free(ck);
  ck_tstor_ok(tstor_checkpoint_load(ctx, path, NULL, &ck));
  ck_assert_ptr_nonnull(tstor_value_dict_get(tstor_checkpoint_root(ck), "a"));
  tstor_checkpoint_free(ck);
  unlink(path);
  snprintf(path, sizeof path, "%s/old.pt", dir);
  /* the legacy format is read by its bytes (the golden files check what is
   * read); a head with the magic number and nothing after it is refused */
  ck_tstor_ok(tstor_file_format_of(CKDIR "/golden/legacy_checkpoint_nested.pt", &f));
  ck_assert_int_eq(f, TSTOR_FORMAT_TORCH_LEGACY);
  ck_tstor_ok(tstor_checkpoint_load(ctx, CKDIR "/golden/legacy_checkpoint_nested.pt", NULL, &ck));
  ck_assert_ptr_nonnull(tstor_value_dict_get(tstor_checkpoint_root(ck), "model"));
  tstor_checkpoint_free(ck);
  spit_bytes(path, legacy2, sizeof legacy2);
  ck = (tstor_checkpoint *)1;
  ck_tstor_err(tstor_checkpoint_load(ctx, path, NULL, &ck), TSTOR_EINVAL);
  ck_assert_ptr_null(ck);
  ck_last_error_has("torch.save legacy file offset 0: the magic number pickle does not end with STOP");
  /* a Torch7 file is read by its bytes (test_torch7 checks what is read);
   * this head stops before its class name */
  spit_bytes(path, t7_le, sizeof t7_le);
  ck_tstor_err(tstor_checkpoint_load(ctx, path, NULL, &ck), TSTOR_EINVAL);
  ck_last_error_has("Torch7 file offset 15: the file ends inside a class name (4 bytes, 0 left)");
  /* the tar format too, and it is read, not written */
  ck_tstor_ok(tstor_file_format_of(CKDIR "/tar/checkpoint.pt", &f));
  ck_assert_int_eq(f, TSTOR_FORMAT_TORCH_TAR);
  ck_tstor_ok(tstor_checkpoint_load(ctx, CKDIR "/tar/checkpoint.pt", NULL, &ck));
  ck_assert_ptr_nonnull(tstor_value_dict_get(tstor_checkpoint_root(ck), "state_dict"));
  ck_tstor_err(tstor_checkpoint_save(ck, path, TSTOR_FORMAT_TORCH_TAR, NULL), TSTOR_ENOTSUP);
  ck_last_error_has("torch.save's tar format is read, not written");
  tstor_checkpoint_free(ck);
  spit_bytes(path, "hello", 5);
  ck_tstor_err(tstor_checkpoint_load(ctx, path, NULL, &ck), TSTOR_EINVAL);
  ck_last_error_has("not a checkpoint tstor knows");
  unlink(path);
  ck_tstor_err(tstor_file_format_of(path, &f), TSTOR_ENOENT);
  ck_assert_int_eq(mkfifo(path, 0600), 0); /* refused, not waited on */
  ck_tstor_err(tstor_file_format_of(path, &f), TSTOR_EINVAL);
  ck_tstor_err(tstor_checkpoint_load(ctx, path, NULL, &ck), TSTOR_EINVAL);
  unlink(path);
  rmdir(dir);
  ck_tstor_err(tstor_file_format_of(NULL, &f), TSTOR_EINVAL);
  ck_tstor_err(tstor_checkpoint_load(ctx, CKDIR "/golden/checkpoint_nested.pt", NULL, NULL), TSTOR_EINVAL);
}
END_TEST

/* A file saved from a GPU: without map_location its storages go to cuda:0,
 * which a context without the cuda backend cannot give (torch.load refuses
 * it likewise without CUDA); map_location "cpu" loads it anywhere. */
START_TEST(saved_on_a_gpu) {
  tstor_device cpu, gpu;
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  int have_gpu = tstor_device_parse(ctx, "cuda:0", &gpu) == 0;
  tstor_checkpoint *ck = (tstor_checkpoint *)1;
  int rc = tstor_torch_load(ctx, CUDA_SAVED_PT, NULL, &ck);
  if (have_gpu) {
    ck_tstor_ok(rc);
    cuda_saved_check(ctx, ck, gpu);
    tstor_checkpoint_free(ck);
  } else {
    ck_assert_int_eq(rc, TSTOR_ENODEV);
    ck_assert_ptr_null(ck);
    ck_last_error_has("storage '0' is for device 'cuda:0', which this context cannot give (no device \"cuda:0\"");
    ck_assert_ptr_null(strstr(tstor_last_error(), "cannot give (storage")); /* not written into itself */
  }
  tstor_load_options o = {sizeof o, "cpu", 0};
  ck_tstor_ok(tstor_torch_load(ctx, CUDA_SAVED_PT, &o, &ck));
  cuda_saved_check(ctx, ck, cpu);
  tstor_checkpoint_free(ck);
}
END_TEST

/* Makes the file path names from its template (mkstemp's XXXXXX). */
static void make_temp(char *path) {
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
}

/* ck saved with torch.save to a file of its own and loaded back (ck freed). */
static tstor_checkpoint *save_and_load(tstor_checkpoint *ck) {
  char path[] = "/tmp/tstor-bounds-XXXXXX";
  make_temp(path);
  ck_tstor_ok(tstor_torch_save(ck, path, NULL));
  tstor_checkpoint_free(ck);
  tstor_checkpoint *back;
  ck_tstor_ok(tstor_torch_load(ctx, path, NULL, &back));
  unlink(path);
  return back;
}

/* A dict of 80,000 int keys, all multiples of 2^32: with a hash whose low
 * bits ignored the high ones they all took one slot, and loading the 880 KB
 * file took 161 s. Built, saved and loaded again here within the tcase's
 * time limit (linear time takes well under a second). */
START_TEST(dict_keys_that_collide_stay_linear) {
  enum { N = 80000 };
  tstor_checkpoint *ck, *back;
  tstor_value *d;
  ck_tstor_ok(tstor_checkpoint_new(&ck));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &d));
  for (int64_t i = 0; i < N; i++) {
    tstor_value *k, *v;
    ck_tstor_ok(tstor_value_new_int(ck, i << 32, &k));
    ck_tstor_ok(tstor_value_new_int(ck, i, &v));
    ck_tstor_ok(tstor_value_dict_set(d, k, v));
  }
  ck_tstor_ok(tstor_checkpoint_set_root(ck, d));
  back = save_and_load(ck);
  const tstor_value *root = tstor_checkpoint_root(back);
  ck_assert_uint_eq(tstor_value_len(root), N);
  ck_assert_int_eq(tstor_value_int(tstor_value_key(root, N - 1)), (int64_t)(N - 1) << 32);
  ck_assert_int_eq(tstor_value_int(tstor_value_item(root, 12345)), 12345);
  tstor_checkpoint_free(back);
}
END_TEST

/* A tuple of the tuple before it twice, 60 deep: 2^60 paths over 61 values,
 * which torch.load reads. It was refused as a bomb; a tree costs what its
 * values cost, so it loads, and saves back with its sharing, in linear
 * time. */
START_TEST(shared_subtrees_load_whole) {
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_torch_load(ctx, CKDIR "/hostile/exponential_dag.pt", NULL, &ck));
  for (int pass = 0; pass < 2; pass++) {
    const tstor_value *v = tstor_checkpoint_root(ck);
    int depth = 0;
    while (tstor_value_kind_of(v) == TSTOR_VALUE_TUPLE) {
      ck_assert_uint_eq(tstor_value_len(v), 2);
      ck_assert_ptr_eq(tstor_value_item(v, 0), tstor_value_item(v, 1));
      v = tstor_value_item(v, 0);
      depth++;
    }
    ck_assert_int_eq(depth, 60);
    ck_assert_int_eq(tstor_value_kind_of(v), TSTOR_VALUE_NONE);
    if (!pass) ck = save_and_load(ck);
  }
  tstor_checkpoint_free(ck);
}
END_TEST

/* 50,000 tensors, each on a storage of its own: a lookup by a linear scan,
 * of storage keys and of zip entries, made loading them quadratic (133 s for
 * the file torch 1.13 writes). Saved and loaded within the tcase's limit. */
START_TEST(many_storages_stay_linear) {
  enum { N = 50000 };
  tstor_device cpu;
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  tstor_checkpoint *ck, *back;
  tstor_value *list;
  ck_tstor_ok(tstor_checkpoint_new(&ck));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_LIST, &list));
  int64_t one = 1;
  for (int i = 0; i < N; i++) {
    tstor_tensor *t;
    tstor_value *v;
    float x = (float)i;
    ck_tstor_ok(tstor_tensor_from_array(ctx, cpu, TSTOR_FLOAT32, 1, &one, &x, &t));
    ck_tstor_ok(tstor_value_new_tensor(ck, t, &v));
    tstor_tensor_release(t);
    ck_tstor_ok(tstor_value_append(list, v));
  }
  ck_tstor_ok(tstor_checkpoint_set_root(ck, list));
  back = save_and_load(ck);
  ck_assert_uint_eq(tstor_checkpoint_storage_count(back), N);
  float x;
  ck_tstor_ok(tstor_tensor_to_array(tstor_value_tensor(tstor_value_item(tstor_checkpoint_root(back), N - 1)),
                                    &x, TSTOR_FLOAT32, 1));
  ck_assert(x == (float)(N - 1));
  tstor_checkpoint_free(back);
}
END_TEST

/* ------------------------------------------------ tar files built here */

/* n bytes at p appended to t (put() stops at a NUL). */
static void add(text *t, const void *p, size_t n) {
  if (t->len + n + 1 > t->cap) {
    t->cap = (t->len + n + 1) * 2;
    ck_assert_ptr_nonnull(t->s = realloc(t->s, t->cap));
  }
  if (n) memcpy(t->s + t->len, p, n); /* an empty member's data may be NULL */
  t->len += n;
}
#define ADD(t, literal) add((t), (literal), sizeof(literal) - 1)

/* A ustar member: its header, its bytes, padding. */
static void tar_member(text *w, const char *name, const void *data, size_t n) {
  char h[512] = {0};
  static const char zeros[512];
  snprintf(h, 100, "%s", name);
  snprintf(h + 100, 8, "%07o", 0600);
  snprintf(h + 124, 12, "%011zo", n);
  h[156] = '0';
  memcpy(h + 257,
         "ustar\0"
         "00",
         8);
  memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (size_t i = 0; i < 512; i++) sum += (unsigned char)h[i];
  snprintf(h + 148, 8, "%06o", sum);
  add(w, h, 512);
  add(w, data, n);
  add(w, zeros, (512 - n % 512) % 512);
}

/* BININT of a pickle. */
static void int4(text *t, uint32_t v) {
  unsigned char b[5] = {'J', v & 0xff, v >> 8 & 0xff, v >> 16 & 0xff, v >> 24};
  add(t, b, sizeof b);
}

/* Loads the archive in a child, within `kib` KiB more memory than it
 * started with (unless under ASan), and expects `want`. */
static void tar_load_bounded(const text *w, long kib, int want) {
  fflush(NULL);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    tstor_checkpoint *ck = NULL;
    int rc = tstor_torch_load_buffer(ctx, w->s, w->len, NULL, &ck);
    getrusage(RUSAGE_SELF, &after);
    long grew = after.ru_maxrss - before.ru_maxrss;
    if (!UNDER_ASAN && grew > kib) {
      fprintf(stderr, "a tar file of %zu bytes grew the process by %ld KiB, more than %ld\n",
              w->len, grew, kib);
      _exit(2);
    }
    if (rc != want) {
      fprintf(stderr, "%s (%s), not %s\n", tstor_err_name(rc), tstor_last_error(),
              tstor_err_name(want));
      _exit(1);
    }
    tstor_checkpoint_free(ck);
    _exit(0);
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed (status 0x%x)",
                status);
}

/* The tar format's members and counts cost what the file holds, linearly:
 * 20,000 members before torch.save's four, 200,000 tensors on one storage
 * that one list names, 100,000 storages; and a count of 2^62 storages in
 * a file of a few kilobytes is refused as soon as the bytes end. */
START_TEST(tar_files_stay_linear) {
  enum { MEMBERS = 20000, TENSORS = 200000, STORAGES = 100000 };
  /* ndim 1, 4 bytes unread, size 1, stride 1, offset 0 */
  static const char layout[32] = {1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1};
  text tensors = {0}, storages = {0}, tree = {0}, w = {0};
  ADD(&tensors, "\x80\x02");
  int4(&tensors, TENSORS);
  ADD(&tensors, ".");
  ADD(&tree, "\x80\x02](");
  for (uint32_t k = 0; k < TENSORS; k++) {
    ADD(&tensors, "\x80\x02");
    int4(&tensors, 1000 + k);
    ADD(&tensors,
        "K\x01"
        "ctorch\nFloatTensor\n\x87.");
    add(&tensors, layout, sizeof layout);
    char key[16];
    int n = snprintf(key, sizeof key, "%u", 1000 + k);
    unsigned char op[5] = {'X', (unsigned char)n, 0, 0, 0};
    add(&tree, op, sizeof op);
    add(&tree, key, (size_t)n);
    ADD(&tree, "Q");
  }
  ADD(&tree, "e.");
  ADD(&storages, "\x80\x02K\x01.\x80\x02K\x01X\x03\0\0\0cpuctorch\nFloatStorage\n\x87.");
  ADD(&storages, "\1\0\0\0\0\0\0\0\0\0\x80\x3f\x80\x02].");
  for (int i = 0; i < MEMBERS; i++) tar_member(&w, "x", NULL, 0);
  tar_member(&w, "pickle", tree.s, tree.len);
  tar_member(&w, "tensors", tensors.s, tensors.len);
  tar_member(&w, "storages", storages.s, storages.len);
  tar_load_bounded(&w, (long)(512 * w.len / 1024) + 8192, 0);

  /* STORAGES empty storages, which the tree does not name */
  text many = {0}, m = {0};
  ADD(&many, "\x80\x02");
  int4(&many, STORAGES);
  ADD(&many, ".");
  for (uint32_t k = 0; k < STORAGES; k++) {
    ADD(&many, "\x80\x02");
    int4(&many, 7 + k);
    ADD(&many, "X\x03\0\0\0cpuctorch\nByteStorage\n\x87.\0\0\0\0\0\0\0\0");
  }
  ADD(&many, "\x80\x02].");
  tar_member(&m, "pickle", "\x80\x02N.", 4);
  tar_member(&m, "tensors", "\x80\x02K\x00.", 5);
  tar_member(&m, "storages", many.s, many.len);
  tar_load_bounded(&m, (long)(512 * m.len / 1024) + 8192, 0);

  /* a count the bytes cannot hold */
  text c = {0};
  static const char huge[] = "\x80\x02\x8a\x08\0\0\0\0\0\0\0\x40.";
  tar_member(&c, "pickle", "\x80\x02N.", 4);
  tar_member(&c, "tensors", "\x80\x02K\x00.", 5);
  tar_member(&c, "storages", huge, sizeof huge - 1);
  tar_load_bounded(&c, 8192, TSTOR_EINVAL);
  free(tensors.s);
  free(storages.s);
  free(tree.s);
  free(w.s);
  free(many.s);
  free(m.s);
  free(c.s);
}
END_TEST

/* A save replaces regular files only, writes through a symbolic link, and
 * keeps the replaced file's mode and (as root) its owner. Both savers. */
/* A new checkpoint {"w": the n floats at x}. */
static tstor_checkpoint *one_float_tensor(const float *x, int64_t n) {
  tstor_device cpu;
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  tstor_checkpoint *ck;
  tstor_value *d, *k, *v;
  tstor_tensor *t;
  ck_tstor_ok(tstor_tensor_from_array(ctx, cpu, TSTOR_FLOAT32, 1, &n, x, &t));
  ck_tstor_ok(tstor_checkpoint_new(&ck));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &d));
  ck_tstor_ok(tstor_value_new_string(ck, "w", 1, &k));
  ck_tstor_ok(tstor_value_new_tensor(ck, t, &v));
  ck_tstor_ok(tstor_value_dict_set(d, k, v));
  ck_tstor_ok(tstor_checkpoint_set_root(ck, d));
  tstor_tensor_release(t);
  return ck;
}

static int save_either(int which, const tstor_checkpoint *ck, const char *path) {
  return which ? tstor_safetensors_save(ck, path, NULL) : tstor_torch_save(ck, path, NULL);
}

/* Torch's quantized tensors decode as torch's dequantize() decodes them, bit
 * for bit (ckpt/quantized_values.txt: every 8-bit code, 32-bit codes to the
 * extremes, per tensor and per channel along either axis, float_qparams,
 * views), alone and through tstor_checkpoint_dequantize, after which the
 * tree saves as safetensors. */
START_TEST(torch_quantized_dequantize) {
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_torch_load(ctx, CKDIR "/golden_torch2/quantized_values.pt", NULL, &ck));
  char *all = tstor_test_slurp(CKDIR "/quantized_values.txt", NULL);
  const tstor_value *root = tstor_checkpoint_root(ck);
  uint64_t *want = calloc(tstor_value_len(root), sizeof *want);
  int n = 0;
  for (char *line = strtok(strchr(all, '\n') + 1, "\n"); line; line = strtok(NULL, "\n"), n++) {
    char name[64];
    unsigned long long h;
    ck_assert_int_eq(sscanf(line, "%63s %llx", name, &h), 2);
    const tstor_value *v = tstor_value_dict_get(root, name);
    ck_assert_ptr_nonnull(v);
    tstor_qparams q;
    ck_tstor_ok(tstor_value_qparams(v, &q));
    tstor_tensor *f;
    ck_tstor_ok(tstor_value_dequantize(v, TSTOR_FLOAT32, &f));
    ck_assert_msg(tensor_fnv(f) == h, "%s (%s): tstor's values differ from torch's dequantize()",
                  name, q.scheme);
    tstor_tensor_release(f);
    want[n] = h;
    ck_assert_str_eq(tstor_value_string(tstor_value_key(root, (size_t)n), NULL), name);
  }
  ck_assert_int_eq(n, (int)tstor_value_len(root));
  ck_assert_int_gt(n, 20);
  ck_tstor_err(
      tstor_value_dequantize(tstor_value_item(root, 0), TSTOR_INT32, &(tstor_tensor *){NULL}),
      TSTOR_EINVAL);
  ck_tstor_ok(tstor_checkpoint_dequantize(ck, TSTOR_FLOAT32));
  for (int i = 0; i < n; i++) {
    const tstor_value *v = tstor_value_item(root, (size_t)i);
    tstor_qparams q;
    ck_tstor_err(tstor_value_qparams(v, &q), TSTOR_EINVAL);
    ck_assert_int_eq(tstor_tensor_dtype(tstor_value_tensor(v)), TSTOR_FLOAT32);
    ck_assert(tensor_fnv(tstor_value_tensor(v)) == want[i]);
  }
  char path[] = "/tmp/tstor-dequantized-XXXXXX";
  make_temp(path);
  ck_tstor_ok(tstor_safetensors_save(ck, path, NULL));
  unlink(path);
  free(want);
  free(all);
  tstor_checkpoint_free(ck);
}
END_TEST

/* The dtypes PyTorch 2.x added are saved as 2.x saves them: a
 * _rebuild_tensor_v3 over the bytes of a torch.storage.UntypedStorage, the
 * dtype an argument (ckpt/roundtrip.sh has torch 2.x read them back); the
 * others as before, with their storage class. A storage of such a dtype has
 * no class to be saved as itself. */
START_TEST(new_dtypes_save_as_torch2) {
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_torch_load(ctx, CKDIR "/golden_torch2/state_dict_mixed.pt", NULL, &ck));
  void *mem;
  size_t len;
  ck_tstor_ok(tstor_checkpoint_save_buffer(ck, TSTOR_FORMAT_TORCH, NULL, &mem, &len));
  ck_assert_ptr_nonnull(memmem(mem, len, "_rebuild_tensor_v3", 18));
  ck_assert_ptr_nonnull(memmem(mem, len, "torch.storage\nUntypedStorage\n", 29));
  ck_assert_ptr_nonnull(memmem(mem, len, "torch\nfloat8_e4m3fn\n", 20));
  ck_assert_ptr_nonnull(memmem(mem, len, "_rebuild_tensor_v2", 18)); /* the float32 weight */
  ck_assert_ptr_nonnull(memmem(mem, len, "torch\nFloatStorage\n", 19));
  free(mem);
  tstor_tensor *t =
      tstor_value_tensor(tstor_value_dict_get(tstor_checkpoint_root(ck), "weight_fp8"));
  tstor_checkpoint *out;
  tstor_value *root, *sv;
  ck_tstor_ok(tstor_checkpoint_new(&out));
  ck_tstor_ok(tstor_value_new(out, TSTOR_VALUE_LIST, &root));
  ck_tstor_ok(tstor_value_new_storage(out, tstor_tensor_storage(t), TSTOR_FLOAT8_E4M3FN, &sv));
  ck_tstor_ok(tstor_value_append(root, sv));
  ck_tstor_ok(tstor_checkpoint_set_root(out, root));
  ck_tstor_err(tstor_checkpoint_save_buffer(out, TSTOR_FORMAT_TORCH, NULL, &mem, &len),
               TSTOR_ENOTSUP);
  ck_last_error_has(
      "a float8_e4m3fn storage saved as itself: PyTorch has no storage class for float8_e4m3fn");
  tstor_checkpoint_free(out);
  tstor_checkpoint_free(ck);
}
END_TEST

START_TEST(saves_keep_what_the_path_is) {
  float x[3] = {1, 2, 3};
  tstor_checkpoint *ck = one_float_tensor(x, 3);
  char dir[] = "/tmp/tstor-save-path-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char fifo[64], link[64], target[64], mode[64];
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  snprintf(link, sizeof link, "%s/link", dir);
  snprintf(target, sizeof target, "%s/target", dir);
  snprintf(mode, sizeof mode, "%s/mode", dir);
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  for (int which = 0; which < 2; which++) {
    /* a FIFO is refused and stays a FIFO */
    ck_tstor_err(save_either(which, ck, fifo), TSTOR_EINVAL);
    ck_last_error_has("not a regular file");
    struct stat st;
    ck_assert_int_eq(lstat(fifo, &st), 0);
    ck_assert(S_ISFIFO(st.st_mode));
    /* a link is written through: the link stays, its target is the file */
    unlink(target);
    unlink(link);
    FILE *f = fopen(target, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_int_eq(symlink("target", link), 0);
    ck_tstor_ok(save_either(which, ck, link));
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(stat(target, &st), 0);
    ck_assert_int_gt(st.st_size, 12);
    /* a dangling link is refused */
    unlink(target);
    ck_tstor_err(save_either(which, ck, link), TSTOR_EINVAL);
    /* an existing file keeps its mode and owner */
    unlink(mode);
    f = fopen(mode, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_int_eq(chmod(mode, 0640), 0);
    uid_t uid = geteuid() == 0 ? 65534 : geteuid();
    if (geteuid() == 0) ck_assert_int_eq(chown(mode, uid, 65534), 0);
    ck_tstor_ok(save_either(which, ck, mode));
    ck_assert_int_eq(stat(mode, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0640);
    ck_assert_int_eq(st.st_uid, uid);
    ck_assert_int_gt(st.st_size, 12);
  }
  /* nothing left beside them: no temporary file stayed */
  DIR *dp = opendir(dir);
  ck_assert_ptr_nonnull(dp);
  struct dirent *de;
  int entries = 0;
  while ((de = readdir(dp)))
    if (de->d_name[0] != '.') {
      ck_assert_msg(strstr(de->d_name, ".tmp.") == NULL, "left behind: %s", de->d_name);
      entries++;
    }
  closedir(dp);
  ck_assert_int_eq(entries, 3); /* fifo, link, mode */
  unlink(fifo);
  unlink(link);
  unlink(mode);
  rmdir(dir);
  tstor_checkpoint_free(ck);
}
END_TEST

/* A load reads the file (as torch.load does): what it gave stays as it was
 * when the file is then truncated and rewritten, as torch.save over it
 * would. The tensor spans several read pieces, so that several threads
 * read it. A FIFO is refused at once, without waiting for a writer. */
START_TEST(loads_outlive_their_file) {
  int64_t n = 9 << 20; /* 36 MiB of float32 */
  float *x = malloc((size_t)n * sizeof *x);
  ck_assert_ptr_nonnull(x);
  for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 1000003);
  tstor_checkpoint *ck = one_float_tensor(x, n);
  char dir[] = "/tmp/tstor-outlive-XXXXXX", path[64], fifo[64];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/ck", dir);
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  for (int which = 0; which < 2; which++) {
    ck_tstor_ok(save_either(which, ck, path));
    tstor_checkpoint *back;
    ck_tstor_ok(which ? tstor_safetensors_load(ctx, path, NULL, &back) : tstor_torch_load(ctx, path, NULL, &back));
    /* rewritten in place: truncated, then other bytes */
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 1000; i++) fputs("not the checkpoint any more ", f);
    ck_assert_int_eq(fclose(f), 0);
    tstor_tensor *got = tstor_value_tensor(tstor_value_dict_get(tstor_checkpoint_root(back), "w"));
    ck_assert_ptr_nonnull(got);
    ck_assert_int_eq(tstor_tensor_numel(got), n);
    ck_assert_msg(memcmp(tstor_tensor_data(got), x, (size_t)n * sizeof *x) == 0,
                  "%s: the loaded tensor changed with its file", which ? "safetensors" : "torch");
    tstor_checkpoint_free(back);
    unlink(path);
    for (int mmap_flag = 0; mmap_flag < 2; mmap_flag++) {
      tstor_load_options o = {sizeof o, NULL, mmap_flag ? TSTOR_LOAD_MMAP : 0};
      back = (tstor_checkpoint *)1;
      int rc = which ? tstor_safetensors_load(ctx, fifo, &o, &back) : tstor_torch_load(ctx, fifo, &o, &back);
      ck_assert_msg(rc == TSTOR_EINVAL && strstr(tstor_last_error(), "not a regular file"),
                    "%s%s: a FIFO gave %s: %s", which ? "safetensors" : "torch", mmap_flag ? ", mapped" : "",
                    tstor_err_name(rc), tstor_last_error());
      ck_assert_ptr_null(back);
    }
  }
  unlink(fifo);
  rmdir(dir);
  free(x);
  tstor_checkpoint_free(ck);
}
END_TEST

/* A small file cannot make a load use more than a stated multiple of its size:
 * data.pkl at most 16 times the file, one value (about 100 bytes with its
 * bookkeeping) per byte of it, so under 512 times the file's size, here with
 * 8 MiB of slack for the process itself. Each load runs in a child, whose peak
 * resident size is compared before and after; a 16 KB bomb took 1.5 GB before
 * the bound. (Under ASan the shadow memory and the quarantine swamp the figure:
 * there only the refusal is checked.) */
START_TEST(small_files_cost_little) {
  /* and a safetensors header of a million empty JSON arrays, 3 MB that a JSON
   * parser turns into a million objects */
  char st_path[] = "/tmp/tstor-json-bomb-XXXXXX";
  int fd = mkstemp(st_path);
  ck_assert_int_ge(fd, 0);
  FILE *f = fdopen(fd, "wb");
  ck_assert_ptr_nonnull(f);
  const uint64_t arrays = 1000000, hlen = 7 + 3 * arrays; /* {"a":[ + [], * n - , + ]} */
  for (int b = 0; b < 8; b++) fputc((int)(hlen >> (8 * b) & 0xff), f);
  fputs("{\"a\":[", f);
  for (uint64_t k = 0; k < arrays; k++) fputs(k ? ",[]" : "[]", f);
  fputs("]}", f);
  ck_assert_int_eq(fclose(f), 0);
  static const char *const bombs[] = {"pickle_bomb.pt", "pickle_values_past_budget.pt", NULL};
  for (size_t i = 0; i < sizeof bombs / sizeof bombs[0]; i++) {
    char *path;
    if (bombs[i]) ck_assert(asprintf(&path, CKDIR "/hostile/%s", bombs[i]) > 0);
    else ck_assert_ptr_nonnull(path = strdup(st_path));
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
      struct rusage before, after;
      getrusage(RUSAGE_SELF, &before);
      tstor_checkpoint *ck = (tstor_checkpoint *)1;
      int rc = bombs[i] ? tstor_torch_load(ctx, path, NULL, &ck) : tstor_safetensors_load(ctx, path, NULL, &ck);
      getrusage(RUSAGE_SELF, &after);
      long grew_kib = after.ru_maxrss - before.ru_maxrss, bound_kib = (long)(512 * st.st_size / 1024) + 8192;
      if (!UNDER_ASAN && grew_kib > bound_kib) {
        fprintf(stderr, "%s (%lld bytes): the load grew the process by %ld KiB, more than %ld\n", path,
                (long long)st.st_size, grew_kib, bound_kib);
        _exit(2);
      }
      if (rc != (bombs[i] ? TSTOR_ERANGE : TSTOR_EINVAL) || ck) {
        fprintf(stderr, "%s: %s (%s), not refused\n", path, tstor_err_name(rc), tstor_last_error());
        _exit(1);
      }
      _exit(0);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: the child failed (status 0x%x)", path,
                  status);
    free(path);
  }
  unlink(st_path);
}
END_TEST

START_TEST(bad_arguments) {
  tstor_checkpoint *ck = (tstor_checkpoint *)1;
  ck_tstor_err(tstor_torch_load(ctx, NULL, NULL, &ck), TSTOR_EINVAL);
  ck_assert_ptr_null(ck);
  ck_tstor_err(tstor_torch_load(ctx, "x.pt", NULL, NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_torch_load(ctx, "/nonexistent/file.pt", NULL, &ck), TSTOR_ENOENT);
  ck_last_error_has("/nonexistent/file.pt");
  /* a path through a regular file (ENOTDIR): the code a config gets too,
   * from the one errno map */
  const char *through = CKDIR "/golden/scalars.pt/model.pt";
  ck_tstor_err(tstor_checkpoint_load(ctx, through, NULL, &ck), TSTOR_ENOENT);
  ck_tstor_err(tstor_torch_load(ctx, through, NULL, &ck), TSTOR_ENOENT);
  tstor_context *none;
  ck_tstor_err(tstor_context_open(CKDIR "/golden/scalars.pt/tstor.ini", &none), TSTOR_ENOENT);
  tstor_load_options o = {sizeof o + 8, NULL, 0};
  ck_tstor_err(tstor_torch_load(ctx, CKDIR "/golden/scalars.pt", &o, &ck), TSTOR_EINVAL);
  ck_last_error_has("size");
  ck_tstor_err(tstor_torch_load_buffer(ctx, NULL, 5, NULL, &ck), TSTOR_EINVAL);
  ck_tstor_err(tstor_torch_load_buffer(ctx, "", 0, NULL, &ck), TSTOR_EINVAL);
  o.size = sizeof o;
  o.flags = TSTOR_LOAD_READ | TSTOR_LOAD_MMAP;
  ck_tstor_err(tstor_torch_load(ctx, CKDIR "/golden/scalars.pt", &o, &ck), TSTOR_EINVAL);
  ck_last_error_has("together");
  o.flags = 1u << 20;
  ck_tstor_err(tstor_safetensors_load(ctx, CKDIR "/golden/scalars.pt", &o, &ck), TSTOR_EINVAL);
  ck_last_error_has("unknown flags");
  o.flags = 0;
  /* a storage whose location is no string: refused alone, read under a
   * map_location (torch.load does the same) */
  ck_tstor_err(tstor_torch_load(ctx, CKDIR "/hostile/location_not_string.pt", NULL, &ck), TSTOR_EINVAL);
  o.map_location = "cpu";
  ck_tstor_ok(tstor_torch_load(ctx, CKDIR "/hostile/location_not_string.pt", &o, &ck));
  tstor_checkpoint_free(ck);
  /* dict keys as Python hashes them, through the value API too: equal tuples
   * are one key, a list is none */
  tstor_checkpoint *built;
  tstor_value *d, *l, *t1, *t2, *one, *v;
  ck_tstor_ok(tstor_checkpoint_new(&built));
  ck_tstor_ok(tstor_value_new(built, TSTOR_VALUE_DICT, &d));
  ck_tstor_ok(tstor_value_new(built, TSTOR_VALUE_LIST, &l));
  ck_tstor_ok(tstor_value_new(built, TSTOR_VALUE_TUPLE, &t1));
  ck_tstor_ok(tstor_value_new(built, TSTOR_VALUE_TUPLE, &t2));
  ck_tstor_ok(tstor_value_new_int(built, 1, &one));
  ck_tstor_ok(tstor_value_append(t1, one));
  ck_tstor_ok(tstor_value_append(t2, one));
  ck_tstor_ok(tstor_value_new_int(built, 5, &v));
  ck_tstor_err(tstor_value_dict_set(d, l, v), TSTOR_EINVAL);
  ck_last_error_has("unhashable");
  ck_tstor_ok(tstor_value_dict_set(d, t1, v));
  ck_tstor_ok(tstor_value_dict_set(d, t2, one));
  ck_assert_int_eq(tstor_value_len(d), 1);
  ck_assert_ptr_eq(tstor_value_item(d, 0), one);
  tstor_checkpoint_free(built);
  /* a map_location naming no device is the argument's fault, said as such,
   * whatever the file holds (even none) */
  o.map_location = "nosuchdevice";
  ck_tstor_err(tstor_torch_load(ctx, CKDIR "/golden/tensor_root.pt", &o, &ck), TSTOR_ENODEV);
  ck_last_error_has("map_location \"nosuchdevice\" is no device of this context: unknown device type in "
                    "\"nosuchdevice\" (this context has cpu, meta");
  ck_tstor_err(tstor_torch_load(ctx, CKDIR "/nosuch.pt", &o, &ck), TSTOR_ENODEV);
  ck_tstor_err(tstor_safetensors_load(ctx, CKDIR "/golden/tensor_root.pt", &o, &ck), TSTOR_ENODEV);
  ck_last_error_has("map_location \"nosuchdevice\"");
  o.map_location = "cpu:x";
  ck_tstor_err(tstor_torch_load_buffer(ctx, "", 0, &o, &ck), TSTOR_EINVAL);
  ck_last_error_has("map_location \"cpu:x\" is no device of this context: bad device index");
  tstor_checkpoint_free(NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("ckpt_golden");
  TCase *tc = tcase_create("load");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, golden_files, 0, NSETS);
  tcase_add_test(tc, tensor_outlives_checkpoint);
  tcase_add_loop_test(tc, golden_resave, 0, NSETS);
  tcase_add_loop_test(tc, golden_on_device, 0, NSETS);
  tcase_add_test(tc, every_format_on_device);
  tcase_add_loop_test(tc, hostile_files, 0, NSETS);
  tcase_add_test(tc, saved_on_a_gpu);
  tcase_add_test(tc, formats_by_their_bytes);
  tcase_add_test(tc, saves_keep_what_the_path_is);
  tcase_add_test(tc, new_dtypes_save_as_torch2);
  tcase_add_test(tc, torch_quantized_dequantize);
  tcase_add_test(tc, loads_outlive_their_file);
  tcase_add_test(tc, small_files_cost_little);
  tcase_add_test(tc, bad_arguments);
  suite_add_tcase(s, tc);
  tc = tcase_create("bounds");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, dict_keys_that_collide_stay_linear);
  tcase_add_test(tc, shared_subtrees_load_whole);
  tcase_add_test(tc, many_storages_stay_linear);
  tcase_add_test(tc, tar_files_stay_linear);
  suite_add_tcase(s, tc);
  int rc = tstor_test_run(s);
  for (int k = 0; k < NSETS; k++) {
    for (int i = 0; i < sets[k].ncases; i++) {
      free(sets[k].cases[i].name);
      free(sets[k].cases[i].expect);
    }
    free(sets[k].cases);
  }
  return rc;
}
