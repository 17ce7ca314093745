// The strict pickle reader of core/pickle.c on hand-built pickles (protocol 4 with frames and
// memo, protocol 2 with GLOBAL and _codecs bytes, OrderedDict, float16 and big-endian arrays,
// non-array entries) and on damaged ones (every truncation, every byte flipped, refused globals
// and opcodes, memo misses, byte counts that do not match the shape, trailing bytes).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/pickle.h"
#include "tests/common/test_util.h"

// ---- a pickle writer for the tests --------------------------------------------------------------

typedef struct {
    uint8_t *p;
    size_t n, cap;
} PB;

static void pb_raw(PB *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        ck_assert_ptr_nonnull(b->p);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void pb_op(PB *b, uint8_t op) { pb_raw(b, &op, 1); }
static void pb_u32(PB *b, uint32_t v) {
    uint8_t q[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    pb_raw(b, q, 4);
}
static void pb_str(PB *b, const char *s) {  // SHORT_BINUNICODE
    pb_op(b, 0x8c);
    pb_op(b, (uint8_t)strlen(s));
    pb_raw(b, s, strlen(s));
}
static void pb_int(PB *b, int v) {
    if (v >= 0 && v < 256) {
        pb_op(b, 'K');
        pb_op(b, (uint8_t)v);
    } else {
        pb_op(b, 'J');
        pb_u32(b, (uint32_t)v);
    }
}
static void pb_global(PB *b, const char *mod, const char *name, int proto2) {
    if (proto2) {
        pb_op(b, 'c');
        pb_raw(b, mod, strlen(mod));
        pb_op(b, '\n');
        pb_raw(b, name, strlen(name));
        pb_op(b, '\n');
    } else {
        pb_str(b, mod);
        pb_str(b, name);
        pb_op(b, 0x93);
    }
}
// Bytes: BINBYTES (protocol 3+), or protocol 2's _codecs.encode(latin1 text, 'latin1').
static void pb_bytes(PB *b, const uint8_t *d, size_t n, int proto2) {
    if (!proto2) {
        pb_op(b, 'B');
        pb_u32(b, (uint32_t)n);
        pb_raw(b, d, n);
        return;
    }
    pb_global(b, "_codecs", "encode", 1);
    PB u = {0};
    for (size_t i = 0; i < n; i++) {
        if (d[i] < 0x80) {
            pb_op(&u, d[i]);
        } else {
            pb_op(&u, (uint8_t)(0xC0 | (d[i] >> 6)));
            pb_op(&u, (uint8_t)(0x80 | (d[i] & 0x3F)));
        }
    }
    pb_op(b, 'X');
    pb_u32(b, (uint32_t)u.n);
    pb_raw(b, u.p, u.n);
    free(u.p);
    pb_str(b, "latin1");
    pb_op(b, 0x86);  // TUPLE2
    pb_op(b, 'R');
}
// numpy's ndarray reduce: _reconstruct(ndarray, (0,), b'b') then BUILD (1, shape, dtype, False, data).
static void pb_array(PB *b, const char *descr, char order, int ndim, const int64_t *shape, const void *data, size_t nbytes,
                     int proto2) {
    pb_global(b, "numpy.core.multiarray", "_reconstruct", proto2);
    pb_global(b, "numpy", "ndarray", proto2);
    pb_int(b, 0);
    pb_op(b, 0x85);
    pb_bytes(b, (const uint8_t *)"b", 1, proto2);
    pb_op(b, 0x87);
    pb_op(b, 'R');
    pb_op(b, '(');
    pb_int(b, 1);
    pb_op(b, '(');
    for (int d = 0; d < ndim; d++) pb_int(b, (int)shape[d]);
    pb_op(b, 't');
    pb_global(b, "numpy", "dtype", proto2);
    pb_str(b, descr);
    pb_op(b, 0x89);
    pb_op(b, 0x88);
    pb_op(b, 0x87);
    pb_op(b, 'R');
    pb_op(b, '(');
    pb_int(b, 3);
    char o[2] = {order, 0};
    pb_str(b, o);
    pb_op(b, 'N');
    pb_op(b, 'N');
    pb_op(b, 'N');
    pb_int(b, -1);
    pb_int(b, -1);
    pb_int(b, 0);
    pb_op(b, 't');
    pb_op(b, 'b');
    pb_op(b, 0x89);
    pb_bytes(b, data, nbytes, proto2);
    pb_op(b, 't');
    pb_op(b, 'b');
}

static const float A[6] = {1.5f, -2.0f, 0.25f, 3.0f, -0.125f, 1e-3f};

// {"w": f4 (2,3), "h": f2 (2,), "be": >f4 (1,), "map": {}, "ints": i8 (1,)}, protocol 4 with a
// frame and the memo used for the dtype global as paddle.save's pickles do.
static PB build_p4(void) {
    PB b = {0};
    pb_op(&b, 0x80);
    pb_op(&b, 4);
    pb_op(&b, 0x95);
    uint8_t frame[8] = {0};
    pb_raw(&b, frame, 8);
    pb_op(&b, '}');
    pb_op(&b, 0x94);  // memo 0: the dict
    pb_op(&b, '(');
    pb_str(&b, "w");
    pb_array(&b, "f4", '<', 2, (const int64_t[]){2, 3}, A, sizeof A, 0);
    pb_str(&b, "h");
    const uint16_t h[2] = {0x3C00 /* 1.0 */, 0xC100 /* -2.5 */};
    pb_array(&b, "f2", '<', 1, (const int64_t[]){2}, h, sizeof h, 0);
    pb_str(&b, "be");
    const uint8_t be[4] = {0x40, 0x49, 0x0f, 0xdb};  // 3.14159274 big-endian
    pb_array(&b, "f4", '>', 1, (const int64_t[]){1}, be, 4, 0);
    pb_str(&b, "map");
    pb_op(&b, '}');
    pb_str(&b, "ints");
    const int64_t iv = 7;
    pb_array(&b, "i8", '<', 1, (const int64_t[]){1}, &iv, 8, 0);
    pb_op(&b, 'u');
    pb_op(&b, '.');
    return b;
}

// Protocol 2: GLOBAL opcodes, BINPUT/BINGET, _codecs bytes, an OrderedDict filled by SETITEM.
static PB build_p2(void) {
    PB b = {0};
    pb_op(&b, 0x80);
    pb_op(&b, 2);
    pb_global(&b, "collections", "OrderedDict", 1);
    pb_op(&b, ')');
    pb_op(&b, 'R');
    pb_op(&b, 'q');
    pb_op(&b, 0);  // memo 0
    pb_str(&b, "x");
    pb_op(&b, 'q');
    pb_op(&b, 1);
    pb_array(&b, "f4", '<', 1, (const int64_t[]){6}, A, sizeof A, 1);
    pb_op(&b, 's');
    pb_str(&b, "s");
    pb_array(&b, "f8", '<', 0, NULL, (const double[]){-0.5}, 8, 1);
    pb_op(&b, 's');
    pb_op(&b, '.');
    return b;
}

START_TEST(test_pickle_valid) {
    PB b = build_p4();
    OcrPdparams *p;
    ck_assert_msg(ocr_pdparams_parse(&p, b.p, b.n, "p4.pdparams") == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(p->protocol, 4);
    ck_assert_int_eq(p->count, 3);
    const OcrPdTensor *w = ocr_pdparams_find(p, "w");
    ck_assert(w && w->ndim == 2 && w->shape[0] == 2 && w->shape[1] == 3 && w->numel == 6);
    for (int i = 0; i < 6; i++) ck_assert(w->f32[i] == A[i]);
    const OcrPdTensor *h = ocr_pdparams_find(p, "h");
    ck_assert(h && h->numel == 2 && h->f32[0] == 1.0f && h->f32[1] == -2.5f);
    ck_assert_str_eq(h->dtype, "f2");
    const OcrPdTensor *be = ocr_pdparams_find(p, "be");
    ck_assert(be && be->f32[0] == 3.14159274f);
    ck_assert_str_eq(p->tensors[0].name, "w");  // file order
    ck_assert_int_eq(p->nother, 2);
    ck_assert_str_eq(p->other[0], "map (dict)");
    ck_assert_str_eq(p->other[1], "ints (i8 array, not float)");
    ocr_pdparams_free(p);
    PB c = build_p2();
    ck_assert_msg(ocr_pdparams_parse(&p, c.p, c.n, "p2.pdparams") == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(p->protocol, 2);
    ck_assert_int_eq(p->count, 2);
    ck_assert_str_eq(p->tensors[0].name, "x");
    for (int i = 0; i < 6; i++) ck_assert(p->tensors[0].f32[i] == A[i]);
    ck_assert_str_eq(p->tensors[1].name, "s");
    ck_assert(p->tensors[1].ndim == 0 && p->tensors[1].numel == 1 && p->tensors[1].f32[0] == -0.5f);
    ocr_pdparams_free(p);
    // Every truncation fails cleanly; flipping any byte never crashes.
    PB *bufs[2] = {&b, &c};
    for (int k = 0; k < 2; k++) {
        PB *q = bufs[k];
        for (size_t cut = 0; cut < q->n; cut++) {
            p = (OcrPdparams *)1;
            ck_assert_int_eq(ocr_pdparams_parse(&p, q->p, cut, "cut.pdparams"), OCR_ERR_FORMAT);
            ck_assert_ptr_null(p);
        }
        for (size_t i = 0; i < q->n; i++) {
            uint8_t saved = q->p[i];
            for (int bit = 0; bit < 8; bit++) {
                q->p[i] = (uint8_t)(saved ^ (1u << bit));
                ocr_status_t st = ocr_pdparams_parse(&p, q->p, q->n, "flip.pdparams");
                if (st == OCR_OK) ocr_pdparams_free(p);
                else ck_assert(st == OCR_ERR_FORMAT || st == OCR_ERR_OOM);
            }
            q->p[i] = saved;
        }
    }
    free(b.p);
    free(c.p);
}
END_TEST

static void expect_bad(PB *b, const char *needle) {
    OcrPdparams *p = (OcrPdparams *)1;
    ck_assert_int_eq(ocr_pdparams_parse(&p, b->p, b->n, "bad.pdparams"), OCR_ERR_FORMAT);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(ocr_last_error(), needle), "\"%s\" lacks \"%s\"", ocr_last_error(), needle);
    free(b->p);
    memset(b, 0, sizeof *b);
}

START_TEST(test_pickle_errors) {
    PB b = {0};
    pb_raw(&b, "hello", 5);
    expect_bad(&b, "not a pickle");
    // A global outside numpy's state dicts (what a malicious pickle calls).
    pb_op(&b, 0x80);
    pb_op(&b, 4);
    pb_global(&b, "os", "system", 0);
    pb_op(&b, '.');
    expect_bad(&b, "refuses the global os.system");
    // A memo index never stored.
    pb_op(&b, 0x80);
    pb_op(&b, 4);
    pb_op(&b, 'h');
    pb_op(&b, 9);
    pb_op(&b, '.');
    expect_bad(&b, "memo index 9");
    // Fewer data bytes than the shape needs.
    pb_op(&b, 0x80);
    pb_op(&b, 4);
    pb_op(&b, '}');
    pb_str(&b, "w");
    pb_array(&b, "f4", '<', 2, (const int64_t[]){2, 3}, A, 20, 0);
    pb_op(&b, 's');
    pb_op(&b, '.');
    expect_bad(&b, "carries 20 bytes, not 24");
    // Not a dict at the top.
    pb_op(&b, 0x80);
    pb_op(&b, 4);
    pb_op(&b, ']');
    pb_op(&b, '.');
    expect_bad(&b, "not a state dict");
    // Bytes after STOP.
    pb_op(&b, 0x80);
    pb_op(&b, 4);
    pb_op(&b, '}');
    pb_op(&b, '.');
    pb_op(&b, 'N');
    expect_bad(&b, "after the pickle's STOP");
    // INST (protocol 0 object construction) is not read.
    pb_op(&b, 0x80);
    pb_op(&b, 4);
    pb_op(&b, 'i');
    expect_bad(&b, "opcode 0x69 at byte 2");
    // Popping an empty stack, a length past the end, a dict with an odd item list.
    pb_op(&b, 0x80);
    pb_op(&b, 4);
    pb_op(&b, '0');
    expect_bad(&b, "empty stack");
    pb_op(&b, 0x80);
    pb_op(&b, 4);
    pb_op(&b, 'X');
    pb_u32(&b, 1000);
    pb_raw(&b, "ab", 2);
    expect_bad(&b, "runs past the end");
    pb_op(&b, 0x80);
    pb_op(&b, 4);
    pb_op(&b, '}');
    pb_op(&b, '(');
    pb_str(&b, "k");
    pb_op(&b, 'u');
    pb_op(&b, '.');
    expect_bad(&b, "odd number");
    // The same key twice (here through the memo, as a pickler would reuse the string).
    pb_op(&b, 0x80);
    pb_op(&b, 4);
    pb_op(&b, '}');
    pb_str(&b, "k");
    pb_op(&b, 0x94);
    pb_op(&b, 'N');
    pb_op(&b, 's');
    pb_op(&b, 'h');
    pb_op(&b, 0);
    pb_op(&b, 'N');
    pb_op(&b, 's');
    pb_op(&b, '.');
    expect_bad(&b, "the key k twice");
    // A non-string key at the top level.
    pb_op(&b, 0x80);
    pb_op(&b, 4);
    pb_op(&b, '}');
    pb_int(&b, 3);
    pb_op(&b, 'N');
    pb_op(&b, 's');
    pb_op(&b, '.');
    expect_bad(&b, "key that is not a string");
}
END_TEST

int main(void) {
    Suite *s = suite_create("pickle");
    TCase *tc = tcase_create("pickle");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_pickle_valid);
    tcase_add_test(tc, test_pickle_errors);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}
