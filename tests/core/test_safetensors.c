// safetensors: round trips, metadata, every kind of corruption, and files from the reference
// implementation (tests/core/data/interop.safetensors, made by make_safetensors_fixture.py).
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/safetensors.h"
#include "tests/common/test_util.h"

static char *tmpdir;  // a fresh directory per test (setup), removed by teardown

static void setup(void) { tmpdir = ocr_test_tmpdir("safetensors_"); }

static void teardown(void) {
    ocr_test_remove_tree(tmpdir);
    free(tmpdir);
    tmpdir = NULL;
}

static const char *in_tmp(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", tmpdir, name);
    return buf;
}

// A file laid out by hand: 8-byte little-endian `len_field`, `hlen` header bytes, `ndata` data bytes.
static void write_raw(const char *path, uint64_t len_field, const char *header, size_t hlen, const void *data,
                      size_t ndata) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(len_field >> (8 * i));
    ck_assert_uint_eq(fwrite(len8, 1, 8, f), 8);
    if (hlen) ck_assert_uint_eq(fwrite(header, 1, hlen, f), hlen);
    if (ndata) ck_assert_uint_eq(fwrite(data, 1, ndata, f), ndata);
    fclose(f);
}

static void write_with_header(const char *path, const char *header, size_t ndata) {
    unsigned char data[64];
    ck_assert_uint_le(ndata, sizeof data);
    for (size_t i = 0; i < ndata; i++) data[i] = (unsigned char)i;
    write_raw(path, strlen(header), header, strlen(header), data, ndata);
}

// Opening fails with `status`, and the message names the file and contains the fragments.
static void expect_open_error(const char *path, ocr_status_t status, const char *frag1, const char *frag2) {
    OcrSafetensors *st = (OcrSafetensors *)1;
    ocr_status_t got = ocr_safetensors_open(&st, path);
    const char *msg = ocr_last_error();
    ck_assert_msg(got == status, "status %s, expected %s (%s)", ocr_status_name(got), ocr_status_name(status), msg);
    ck_assert_ptr_null(st);
    ck_assert_msg(strstr(msg, path) != NULL, "message \"%s\" does not name the file", msg);
    if (frag1) ck_assert_msg(strstr(msg, frag1) != NULL, "message \"%s\" lacks \"%s\"", msg, frag1);
    if (frag2) ck_assert_msg(strstr(msg, frag2) != NULL, "message \"%s\" lacks \"%s\"", msg, frag2);
}

static OcrSafetensors *open_ok(const char *path) {
    OcrSafetensors *st = NULL;
    ocr_status_t s = ocr_safetensors_open(&st, path);
    ck_assert_msg(s == OCR_OK, "open %s: %s", path, ocr_last_error());
    return st;
}

static size_t tensor_bytes(const OcrNamedTensor *t) {
    size_t n = ocr_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    return n;
}

// ---- round trips ----------------------------------------------------------------------

START_TEST(test_round_trip_dtypes_and_shapes) {
    // Bit patterns rather than values, so NaN payloads, signed zeros and subnormals are covered.
    uint32_t f32[6] = {0x3fc00000u, 0x80000000u, 0x7f800000u, 0x00000001u, 0x7fc12345u, 0xc0000000u};
    uint16_t f16[4] = {0x0001, 0x7c00, 0xfe01, 0x3555};
    uint16_t bf16[8] = {0x3f80, 0xbf80, 0x7f80, 0xff80, 0x0001, 0x8000, 0x7fc1, 0x4049};
    int32_t i32[3] = {INT32_MIN, -1, INT32_MAX};
    uint8_t u8[5] = {0, 1, 2, 254, 255};
    float scalar = 3.25f;
    float four_d[8];
    ocr_test_fill_uniform(four_d, 8, 7, -4.f, 4.f);
    OcrNamedTensor in[] = {
        // Odd-sized U8 first: the writer must still keep the wider tensors aligned.
        {"bytes", OCR_U8, 1, {5}, u8},
        {"half", OCR_F16, 1, {4}, f16},
        {"conv.weight", OCR_F32, 2, {2, 3}, f32},
        {"bn.bf16", OCR_BF16, 3, {2, 2, 2}, bf16},
        {"ids", OCR_I32, 1, {3}, i32},
        {"scalar", OCR_F32, 0, {0}, &scalar},
        {"empty", OCR_F16, 2, {0, 3}, NULL},
        {"four_d", OCR_F32, 4, {1, 2, 2, 2}, four_d},
    };
    int n = (int)(sizeof in / sizeof in[0]);
    char path[2048];
    in_tmp(path, sizeof path, "model.safetensors");
    ck_assert_msg(ocr_safetensors_write(path, in, n, NULL, 0) == OCR_OK, "%s", ocr_last_error());

    // Header length: the data section starts on an 8-byte boundary.
    char *raw;
    size_t rawsize;
    ck_assert_int_eq(ocr_read_file(path, &raw, &rawsize), OCR_OK);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)(unsigned char)raw[i] << (8 * i);
    ck_assert_uint_eq((8 + hlen) % 8, 0);
    ck_assert_int_eq(raw[8], '{');
    free(raw);

    OcrSafetensors *st = open_ok(path);
    ck_assert_int_eq(ocr_safetensors_count(st), n);
    for (int i = 0; i < n; i++) {
        const OcrNamedTensor *t = ocr_safetensors_at(st, i);
        ck_assert_str_eq(t->name, in[i].name);  // header order = the order given to write
        ck_assert_ptr_eq(ocr_safetensors_find(st, in[i].name), t);
        ck_assert_int_eq(t->dtype, in[i].dtype);
        ck_assert_int_eq(t->ndim, in[i].ndim);
        for (int d = 0; d < in[i].ndim; d++) ck_assert_int_eq(t->shape[d], in[i].shape[d]);
        ck_assert_uint_eq((uintptr_t)t->data % ocr_dtype_size(t->dtype), 0);
        size_t bytes = tensor_bytes(t);
        if (bytes) ck_assert_msg(memcmp(t->data, in[i].data, bytes) == 0, "tensor %s differs", t->name);
    }
    ck_assert_uint_eq(tensor_bytes(ocr_safetensors_find(st, "scalar")), 4);
    ck_assert_uint_eq(tensor_bytes(ocr_safetensors_find(st, "empty")), 0);
    ck_assert_ptr_null(ocr_safetensors_find(st, "missing"));
    ck_assert_ptr_null(ocr_safetensors_find(st, "conv"));
    ck_assert_ptr_null(ocr_safetensors_metadata(st, "format"));
    ocr_safetensors_close(st);
}
END_TEST

START_TEST(test_round_trip_many_tensors) {
    // Enough tensors that find() has to search, written over an existing file.
    enum { N = 40 };
    char names[N][16];
    float vals[N];
    OcrNamedTensor in[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "layer%02d.w", (i * 17) % N);
        vals[i] = (float)i * 0.5f - 3.f;
        in[i] = (OcrNamedTensor){names[i], OCR_F32, 1, {1}, &vals[i]};
    }
    char path[2048];
    in_tmp(path, sizeof path, "many.safetensors");
    ck_assert_int_eq(ocr_write_file_atomic(path, "not a checkpoint", 16), OCR_OK);
    ck_assert_msg(ocr_safetensors_write(path, in, N, NULL, 0) == OCR_OK, "%s", ocr_last_error());
    OcrSafetensors *st = open_ok(path);
    ck_assert_int_eq(ocr_safetensors_count(st), N);
    for (int i = 0; i < N; i++) {
        const OcrNamedTensor *t = ocr_safetensors_find(st, names[i]);
        ck_assert_ptr_nonnull(t);
        ck_assert(*(const float *)t->data == vals[i]);
    }
    ocr_safetensors_close(st);

    // No tensors at all is a valid file too.
    ck_assert_int_eq(ocr_safetensors_write(path, NULL, 0, NULL, 0), OCR_OK);
    st = open_ok(path);
    ck_assert_int_eq(ocr_safetensors_count(st), 0);
    ck_assert_ptr_null(ocr_safetensors_find(st, "x"));
    ocr_safetensors_close(st);
}
END_TEST

START_TEST(test_metadata_round_trip) {
    float w[2] = {1.f, 2.f};
    OcrNamedTensor t = {"w", OCR_F32, 1, {2}, w};
    OcrMetadataEntry meta[] = {
        {"format", "pt"},
        {"config", "{\"Global\": {\"name\": \"a\\\\b\"}}\n\tnext line"},  // quotes, backslashes, control bytes
        {"unicode", "r\xc3\xa9sum\xc3\xa9 \xe4\xb8\xad"},
        {"empty", ""},
    };
    char path[2048];
    in_tmp(path, sizeof path, "meta.safetensors");
    ck_assert_msg(ocr_safetensors_write(path, &t, 1, meta, 4) == OCR_OK, "%s", ocr_last_error());
    OcrSafetensors *st = open_ok(path);
    ck_assert_int_eq(ocr_safetensors_count(st), 1);  // __metadata__ is not a tensor
    for (int i = 0; i < 4; i++) {
        const char *v = ocr_safetensors_metadata(st, meta[i].key);
        ck_assert_ptr_nonnull(v);
        ck_assert_str_eq(v, meta[i].value);
    }
    ck_assert_ptr_null(ocr_safetensors_metadata(st, "missing"));
    ck_assert_ptr_null(ocr_safetensors_find(st, "__metadata__"));
    ocr_safetensors_close(st);
}
END_TEST

START_TEST(test_write_rejects_bad_input) {
    float w[2] = {1.f, 2.f};
    char path[2048];
    in_tmp(path, sizeof path, "bad.safetensors");
    OcrNamedTensor dup[2] = {{"w", OCR_F32, 1, {2}, w}, {"w", OCR_F32, 1, {1}, w}};
    ck_assert_int_eq(ocr_safetensors_write(path, dup, 2, NULL, 0), OCR_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "'w'"));
    OcrNamedTensor five_d = {"x", OCR_F32, 5, {1, 1, 1, 1}, w};
    ck_assert_int_eq(ocr_safetensors_write(path, &five_d, 1, NULL, 0), OCR_ERR_INVALID_ARG);
    OcrNamedTensor neg = {"x", OCR_F32, 1, {-1}, w};
    ck_assert_int_eq(ocr_safetensors_write(path, &neg, 1, NULL, 0), OCR_ERR_INVALID_ARG);
    OcrNamedTensor nodata = {"x", OCR_F32, 1, {2}, NULL};
    ck_assert_int_eq(ocr_safetensors_write(path, &nodata, 1, NULL, 0), OCR_ERR_INVALID_ARG);
    OcrNamedTensor reserved = {"__metadata__", OCR_F32, 1, {2}, w};
    ck_assert_int_eq(ocr_safetensors_write(path, &reserved, 1, NULL, 0), OCR_ERR_INVALID_ARG);
    OcrNamedTensor ok = {"x", OCR_F32, 1, {2}, w};
    OcrMetadataEntry dupmeta[2] = {{"k", "a"}, {"k", "b"}};
    ck_assert_int_eq(ocr_safetensors_write(path, &ok, 1, dupmeta, 2), OCR_ERR_INVALID_ARG);
    ck_assert(!ocr_file_exists(path));
    // An unwritable destination fails without leaving anything behind.
    in_tmp(path, sizeof path, "no/such/dir/x.safetensors");
    ck_assert_int_eq(ocr_safetensors_write(path, &ok, 1, NULL, 0), OCR_ERR_IO);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), path));
}
END_TEST

START_TEST(test_header_padding) {
    // Names of every length mod 8: the header is always padded (with spaces) so the data
    // section starts on an 8-byte boundary, and the padding does not disturb reading.
    float w = 1.5f;
    char name[16] = "";
    char path[2048];
    in_tmp(path, sizeof path, "pad.safetensors");
    for (int len = 1; len <= 8; len++) {
        strcat(name, "n");
        OcrNamedTensor t = {name, OCR_F32, 1, {1}, &w};
        ck_assert_int_eq(ocr_safetensors_write(path, &t, 1, NULL, 0), OCR_OK);
        char *raw;
        size_t size;
        ck_assert_int_eq(ocr_read_file(path, &raw, &size), OCR_OK);
        uint64_t hlen = 0;
        for (int i = 0; i < 8; i++) hlen |= (uint64_t)(unsigned char)raw[i] << (8 * i);
        ck_assert_uint_eq(hlen % 8, 0);
        ck_assert_uint_eq(size, 8 + hlen + 4);
        ck_assert_int_eq(raw[8 + hlen - 1] == ' ' || raw[8 + hlen - 1] == '}', 1);
        free(raw);
        OcrSafetensors *st = open_ok(path);
        ck_assert(*(const float *)ocr_safetensors_find(st, name)->data == 1.5f);
        ocr_safetensors_close(st);
    }
}
END_TEST

// ---- corruption ---------------------------------------------------------------------

typedef struct {
    const char *header;
    size_t ndata;
    ocr_status_t status;
    const char *frag1, *frag2;
} BadHeader;

#define T_(dtype, shape, offs) "{\"dtype\":" dtype ",\"shape\":" shape ",\"data_offsets\":" offs "}"
static const BadHeader bad_headers[] = {
    {"[1,2]", 0, OCR_ERR_FORMAT, "JSON object", NULL},
    {"{\"a\":{\"dtype\":\"F32\"", 0, OCR_ERR_FORMAT, "not valid JSON", NULL},
    {"{\"a\":" T_("\"F32\"", "[2]", "[0,8]") "} x", 8, OCR_ERR_FORMAT, "not valid JSON", NULL},
    {" {\"a\":" T_("\"F32\"", "[2]", "[0,8]") "}", 8, OCR_ERR_FORMAT, "starting with '{'", NULL},
    {"{\"a\":5}", 0, OCR_ERR_FORMAT, "tensor 'a'", "must be an object"},
    {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, OCR_ERR_FORMAT, "tensor 'a'", "missing \"dtype\""},
    {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, OCR_ERR_FORMAT, "tensor 'a'", "missing \"shape\""},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, OCR_ERR_FORMAT, "tensor 'a'", "missing \"data_offsets\""},
    {"{\"a\":" T_("5", "[2]", "[0,8]") "}", 8, OCR_ERR_FORMAT, "tensor 'a'", "dtype must be a string"},
    {"{\"a\":" T_("\"F33\"", "[2]", "[0,8]") "}", 8, OCR_ERR_FORMAT, "tensor 'a'", "unknown dtype \"F33\""},
    {"{\"a\":" T_("\"f32\"", "[2]", "[0,8]") "}", 8, OCR_ERR_FORMAT, "tensor 'a'", "unknown dtype \"f32\""},
    {"{\"a\":" T_("\"F64\"", "[1]", "[0,8]") "}", 8, OCR_ERR_UNSUPPORTED, "tensor 'a'", "F64 is not supported"},
    {"{\"a\":" T_("\"F32\"", "2", "[0,8]") "}", 8, OCR_ERR_FORMAT, "tensor 'a'", "shape must be a list"},
    {"{\"a\":" T_("\"F32\"", "[-2]", "[0,8]") "}", 8, OCR_ERR_FORMAT, "tensor 'a'", "shape entry 0"},
    {"{\"a\":" T_("\"F32\"", "[2,1.5]", "[0,8]") "}", 8, OCR_ERR_FORMAT, "tensor 'a'", "shape entry 1"},
    {"{\"a\":" T_("\"F32\"", "[1,1,1,1,2]", "[0,8]") "}", 8, OCR_ERR_UNSUPPORTED, "tensor 'a'", "5 dimensions"},
    {"{\"a\":" T_("\"U8\"", "[4294967296,4294967296,4294967296]", "[0,8]") "}", 8, OCR_ERR_FORMAT, "tensor 'a'",
     "too large"},
    {"{\"a\":" T_("\"F32\"", "[2]", "[0]") "}", 8, OCR_ERR_FORMAT, "tensor 'a'", "data_offsets must be a list"},
    {"{\"a\":" T_("\"F32\"", "[2]", "[\"0\",\"8\"]") "}", 8, OCR_ERR_FORMAT, "tensor 'a'", "data_offsets must"},
    {"{\"a\":" T_("\"F32\"", "[2]", "[-8,0]") "}", 8, OCR_ERR_FORMAT, "tensor 'a'", "data_offsets must"},
    {"{\"a\":" T_("\"F32\"", "[2]", "{\"b\":0}") "}", 8, OCR_ERR_FORMAT, "tensor 'a'", "data_offsets must"},
    {"{\"a\":" T_("\"F32\"", "[0]", "[8,0]") "}", 8, OCR_ERR_FORMAT, "tensor 'a'", "reversed"},
    {"{\"a\":" T_("\"F32\"", "[4]", "[0,16]") "}", 8, OCR_ERR_FORMAT, "tensor 'a'", "outside the data section"},
    {"{\"a\":" T_("\"F32\"", "[3]", "[0,8]") "}", 8, OCR_ERR_FORMAT, "tensor 'a'",
     "hold 8 bytes, but shape (3) of F32 needs 12"},
    {"{\"a\":" T_("\"BF16\"", "[2,2]", "[0,4]") "}", 4, OCR_ERR_FORMAT, "tensor 'a'", "shape (2, 2) of BF16 needs 8"},
    {"{\"a\":" T_("\"F32\"", "[2]", "[0,8]") ",\"b\":" T_("\"F32\"", "[1]", "[4,8]") "}", 8, OCR_ERR_FORMAT,
     "tensor 'b'", "overlap tensor 'a'"},
    {"{\"a\":" T_("\"F32\"", "[1]", "[0,4]") ",\"a\":" T_("\"F32\"", "[1]", "[4,8]") "}", 8, OCR_ERR_FORMAT,
     "tensor 'a' appears twice", NULL},
    {"{\"a\":" T_("\"F32\"", "[1]", "[0,4]") ",\"b\":" T_("\"F32\"", "[1]", "[8,12]") "}", 12, OCR_ERR_FORMAT,
     "tensor 'b'", "[4, 8) of the data section unused"},
    {"{\"a\":" T_("\"F32\"", "[1]", "[0,4]") "}", 8, OCR_ERR_FORMAT, "end at byte 4", "has 8 bytes"},
    {"{\"__metadata__\":{\"k\":3},\"a\":" T_("\"F32\"", "[2]", "[0,8]") "}", 8, OCR_ERR_FORMAT,
     "__metadata__ value for key 'k' must be a string", "a number"},
    {"{\"__metadata__\":[\"x\"],\"a\":" T_("\"F32\"", "[2]", "[0,8]") "}", 8, OCR_ERR_FORMAT,
     "__metadata__ must be an object", "a list"},
};
#undef T_

START_TEST(test_corrupt_header) {
    const BadHeader *c = &bad_headers[_i];
    char path[2048];
    in_tmp(path, sizeof path, "corrupt.safetensors");
    write_with_header(path, c->header, c->ndata);
    expect_open_error(path, c->status, c->frag1, c->frag2);
}
END_TEST

START_TEST(test_short_files) {
    char path[2048];
    in_tmp(path, sizeof path, "short.safetensors");
    ck_assert_int_eq(ocr_write_file_atomic(path, "\x10\0\0\0\0", 5), OCR_OK);
    expect_open_error(path, OCR_ERR_FORMAT, "5 bytes", "too short");
    ck_assert_int_eq(ocr_write_file_atomic(path, "", 0), OCR_OK);
    expect_open_error(path, OCR_ERR_FORMAT, "0 bytes", "too short");
}
END_TEST

START_TEST(test_bad_header_length) {
    char path[2048];
    in_tmp(path, sizeof path, "len.safetensors");
    const char *h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    unsigned char data[8] = {0};
    // Length one past the file: a truncated download.
    write_raw(path, strlen(h) + 9, h, strlen(h), data, 8);
    expect_open_error(path, OCR_ERR_FORMAT, "header length", "exceeds");
    // Absurd lengths (another format, or random bytes) are refused before anything is read.
    write_raw(path, 1000000000000ull, h, strlen(h), data, 8);
    expect_open_error(path, OCR_ERR_FORMAT, "absurd", NULL);
    write_raw(path, UINT64_MAX, h, strlen(h), data, 8);
    expect_open_error(path, OCR_ERR_FORMAT, "absurd", NULL);
    // Zero: no header at all.
    write_raw(path, 0, h, strlen(h), data, 8);
    expect_open_error(path, OCR_ERR_FORMAT, "empty", NULL);
    // Too short by one: the JSON is cut.
    write_raw(path, strlen(h) - 1, h, strlen(h), data, 8);
    expect_open_error(path, OCR_ERR_FORMAT, "not valid JSON", NULL);
    // A NUL inside the header.
    char withnul[128];
    size_t n = strlen(h);
    memcpy(withnul, h, n);
    memcpy(withnul + n, "\0   ", 4);
    write_raw(path, n + 4, withnul, n + 4, data, 8);
    expect_open_error(path, OCR_ERR_FORMAT, "NUL byte", NULL);
}
END_TEST

START_TEST(test_missing_file) {
    char path[2048];
    in_tmp(path, sizeof path, "absent.safetensors");
    expect_open_error(path, OCR_ERR_NOT_FOUND, "cannot open", NULL);
}
END_TEST

// ---- interoperability ---------------------------------------------------------------

START_TEST(test_reads_reference_fixture) {
    // Written by the reference Python implementation (see make_safetensors_fixture.py).
    const char *path = OCR_SOURCE_DIR "/tests/core/data/interop.safetensors";
    OcrSafetensors *st = open_ok(path);
    ck_assert_int_eq(ocr_safetensors_count(st), 7);
    ck_assert_str_eq(ocr_safetensors_metadata(st, "format"), "pt");
    ck_assert_str_eq(ocr_safetensors_metadata(st, "note"), "ocrtrain interop fixture");

    const OcrNamedTensor *t = ocr_safetensors_find(st, "weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->dtype, OCR_F32);
    ck_assert_int_eq(t->ndim, 2);
    ck_assert_int_eq(t->shape[0], 2);
    ck_assert_int_eq(t->shape[1], 3);
    const float want_w[6] = {0.5f, -1.25f, 3.0f, 1e-3f, -0.0f, 65504.0f};
    ck_assert_int_eq(memcmp(t->data, want_w, sizeof want_w), 0);

    t = ocr_safetensors_find(st, "half");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->dtype, OCR_F16);
    ck_assert_int_eq(t->ndim, 1);
    ck_assert_int_eq(t->shape[0], 4);
    const uint16_t want_h[4] = {0x3C00, 0xC100, 0x7BFF, 0x0001};
    ck_assert_int_eq(memcmp(t->data, want_h, sizeof want_h), 0);
    ck_assert(ocr_f16_to_f32(((const uint16_t *)t->data)[1]) == -2.5f);

    t = ocr_safetensors_find(st, "bf16");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->dtype, OCR_BF16);
    ck_assert_int_eq(t->ndim, 2);
    const uint16_t want_b[4] = {0x3F80, 0xC040, 0x7F80, 0x0001};
    ck_assert_int_eq(memcmp(t->data, want_b, sizeof want_b), 0);
    ck_assert(ocr_bf16_to_f32(((const uint16_t *)t->data)[1]) == -3.0f);

    t = ocr_safetensors_find(st, "ids");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->dtype, OCR_I32);
    const int32_t want_i[3] = {-1, 0, 2147483647};
    ck_assert_int_eq(memcmp(t->data, want_i, sizeof want_i), 0);

    t = ocr_safetensors_find(st, "bytes");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->dtype, OCR_U8);
    ck_assert_int_eq(t->shape[0], 5);
    ck_assert_int_eq(memcmp(t->data, (const uint8_t[]){0, 1, 127, 128, 255}, 5), 0);

    t = ocr_safetensors_find(st, "scalar");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->ndim, 0);
    ck_assert(*(const float *)t->data == 42.0f);

    t = ocr_safetensors_find(st, "empty");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->ndim, 2);
    ck_assert_int_eq(t->shape[0], 0);
    ck_assert_int_eq(t->shape[1], 3);
    ocr_safetensors_close(st);
}
END_TEST

START_TEST(test_hand_crafted_misaligned) {
    // Per the published format: u64 LE header size, JSON header, data. Here the header is
    // 1 byte past a multiple of 8 (legal: only trailing spaces are padding), so the data is
    // misaligned in the file and the reader must still hand out aligned pointers.
    char header[256];
    int n = snprintf(header, sizeof header, "%s",
                     "{\"h\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[8,10]},"
                     "\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}");
    while (n % 8 != 1) header[n++] = ' ';
    header[n] = '\0';
    unsigned char data[10];
    const float xs[2] = {-1.5f, 1e-30f};
    memcpy(data, xs, 8);
    data[8] = 0x00, data[9] = 0x3C;  // f16 1.0, little-endian
    char path[2048];
    in_tmp(path, sizeof path, "hand.safetensors");
    write_raw(path, (uint64_t)n, header, (size_t)n, data, sizeof data);
    OcrSafetensors *st = open_ok(path);
    ck_assert_int_eq(ocr_safetensors_count(st), 2);
    ck_assert_str_eq(ocr_safetensors_at(st, 0)->name, "h");  // header order
    const OcrNamedTensor *x = ocr_safetensors_find(st, "x");
    ck_assert_uint_eq((uintptr_t)x->data % 4, 0);
    ck_assert(((const float *)x->data)[0] == -1.5f);
    ck_assert(((const float *)x->data)[1] == 1e-30f);
    const OcrNamedTensor *h = ocr_safetensors_find(st, "h");
    ck_assert_uint_eq((uintptr_t)h->data % 2, 0);
    ck_assert_uint_eq(((const uint16_t *)h->data)[0], 0x3C00);
    ocr_safetensors_close(st);
}
END_TEST

static Suite *safetensors_suite(void) {
    Suite *s = suite_create("core_safetensors");
    TCase *tc = tcase_create("safetensors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_round_trip_dtypes_and_shapes);
    tcase_add_test(tc, test_round_trip_many_tensors);
    tcase_add_test(tc, test_metadata_round_trip);
    tcase_add_test(tc, test_write_rejects_bad_input);
    tcase_add_test(tc, test_header_padding);
    tcase_add_loop_test(tc, test_corrupt_header, 0, (int)(sizeof bad_headers / sizeof bad_headers[0]));
    tcase_add_test(tc, test_short_files);
    tcase_add_test(tc, test_bad_header_length);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_reads_reference_fixture);
    tcase_add_test(tc, test_hand_crafted_misaligned);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(safetensors_suite()); }
