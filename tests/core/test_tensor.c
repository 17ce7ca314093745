// Tensors: dtypes and their names, sizes, views vs owned data, reshape, describe, element
// access through every dtype, and whole-tensor f32 conversion.
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/tensor.h"
#include "tests/common/test_util.h"

// A failing huge allocation must return NULL under AddressSanitizer too.
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

static int aborts(void (*fn)(void)) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        fn();
        _exit(0);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

START_TEST(test_dtype_names_and_sizes) {
    static const struct {
        ocr_dtype_t d;
        const char *name;
        size_t size;
        int is_float;
    } want[] = {{OCR_F32, "float32", 4, 1},
                {OCR_F16, "float16", 2, 1},
                {OCR_BF16, "bfloat16", 2, 1},
                {OCR_I32, "int32", 4, 0},
                {OCR_U8, "uint8", 1, 0}};
    ck_assert_int_eq(sizeof want / sizeof want[0], OCR_DTYPE_COUNT);
    for (int i = 0; i < OCR_DTYPE_COUNT; i++) {
        ck_assert_str_eq(ocr_dtype_name(want[i].d), want[i].name);
        ck_assert_uint_eq(ocr_dtype_size(want[i].d), want[i].size);
        ck_assert_int_eq(ocr_dtype_is_float(want[i].d), want[i].is_float);
        ocr_dtype_t back = OCR_DTYPE_COUNT;
        ck_assert(ocr_dtype_from_name(want[i].name, &back));  // the long names parse back
        ck_assert_int_eq(back, want[i].d);
    }
    ck_assert_str_eq(ocr_dtype_name(OCR_DTYPE_COUNT), "?");
}
END_TEST

START_TEST(test_dtype_parsing) {
    static const struct {
        const char *text;
        ocr_dtype_t d;
    } ok[] = {{"f32", OCR_F32},   {"fp32", OCR_F32},  {"float", OCR_F32},     {"F32", OCR_F32}, {"Float32", OCR_F32},
              {"f16", OCR_F16},   {"fp16", OCR_F16},  {"half", OCR_F16},      {"F16", OCR_F16}, {"FLOAT16", OCR_F16},
              {"bf16", OCR_BF16}, {"BF16", OCR_BF16}, {"BFloat16", OCR_BF16}, {"i32", OCR_I32}, {"I32", OCR_I32},
              {"int32", OCR_I32}, {"u8", OCR_U8},     {"U8", OCR_U8},         {"uint8", OCR_U8}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        ocr_dtype_t d = OCR_DTYPE_COUNT;
        ck_assert_msg(ocr_dtype_from_name(ok[i].text, &d), "\"%s\" not accepted", ok[i].text);
        ck_assert_msg(d == ok[i].d, "\"%s\" parsed as %s", ok[i].text, ocr_dtype_name(d));
    }
    static const char *bad[] = {"", "f64", "F64", "float64", "int8", "bf", "float16 ", "f 16", "bfloat"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ocr_dtype_t d = OCR_U8;
        ck_assert_msg(!ocr_dtype_from_name(bad[i], &d), "\"%s\" accepted", bad[i]);
        ck_assert_int_eq(d, OCR_U8);  // untouched on failure
    }
    ocr_dtype_t d = OCR_U8;
    ck_assert(!ocr_dtype_from_name(NULL, &d));
}
END_TEST

START_TEST(test_numel_bytes_dims) {
    OcrTensor t = ocr_tensor_view_cpu(NULL, OCR_F16, 4, OCR_SHAPE(2, 48, 320, 3));
    ck_assert_int_eq(ocr_tensor_numel(&t), 2 * 48 * 320 * 3);
    ck_assert_uint_eq(ocr_tensor_bytes(&t), 2 * 48 * 320 * 3 * 2);
    ck_assert_int_eq(ocr_tensor_dim(&t, 0), 2);
    ck_assert_int_eq(ocr_tensor_dim(&t, 3), 3);
    ck_assert_int_eq(ocr_tensor_dim(&t, -1), 3);
    ck_assert_int_eq(ocr_tensor_dim(&t, -4), 2);
    OcrTensor m = ocr_tensor_view_cpu(NULL, OCR_I32, 2, OCR_SHAPE(5, 7));
    ck_assert_int_eq(m.shape[2], 1);  // unused trailing entries are 1
    ck_assert_int_eq(m.shape[3], 1);
    ck_assert_uint_eq(ocr_tensor_bytes(&m), 140);
    OcrTensor s = ocr_tensor_view_cpu(NULL, OCR_BF16, 0, NULL);  // a scalar
    ck_assert_int_eq(ocr_tensor_numel(&s), 1);
    ck_assert_uint_eq(ocr_tensor_bytes(&s), 2);
    OcrTensor e = ocr_tensor_view_cpu(NULL, OCR_U8, 3, OCR_SHAPE(4, 0, 9));
    ck_assert_int_eq(ocr_tensor_numel(&e), 0);
    ck_assert_uint_eq(ocr_tensor_bytes(&e), 0);
    ck_assert(ocr_tensor_same_shape(&t, &t));
    ck_assert(!ocr_tensor_same_shape(&t, &m));
    OcrTensor m2 = ocr_tensor_view_cpu(NULL, OCR_F32, 2, OCR_SHAPE(5, 8));
    ck_assert(!ocr_tensor_same_shape(&m, &m2));
    OcrTensor m3 = ocr_tensor_view_cpu(NULL, OCR_F32, 2, OCR_SHAPE(5, 7));
    ck_assert(ocr_tensor_same_shape(&m, &m3));  // dtype does not matter for shape
}
END_TEST

static void dim_out_of_range(void) {
    OcrTensor t = ocr_tensor_view_cpu(NULL, OCR_F32, 2, OCR_SHAPE(2, 3));
    (void)ocr_tensor_dim(&t, 2);
}
static void reshape_bad_count(void) {
    float d[6];
    OcrTensor t = ocr_tensor_view_cpu(d, OCR_F32, 2, OCR_SHAPE(2, 3));
    (void)ocr_tensor_reshape(&t, 2, OCR_SHAPE(4, 2));
}
static void get_out_of_bounds(void) {
    float d[6] = {0};
    OcrTensor t = ocr_tensor_view_cpu(d, OCR_F32, 2, OCR_SHAPE(2, 3));
    (void)ocr_tensor_get_f32(&t, 6);
}
static void to_f32_of_int(void) {
    int32_t d[2] = {0};
    float out[2];
    OcrTensor t = ocr_tensor_view_cpu(d, OCR_I32, 1, OCR_SHAPE(2));
    ocr_tensor_to_f32(&t, out);
}
static void too_many_dims(void) { (void)ocr_tensor_view_cpu(NULL, OCR_F32, 5, OCR_SHAPE(1, 1, 1, 1, 1)); }
static void valid_use(void) {
    float d[6] = {0};
    OcrTensor t = ocr_tensor_view_cpu(d, OCR_F32, 2, OCR_SHAPE(2, 3));
    OcrTensor r = ocr_tensor_reshape(&t, 1, OCR_SHAPE(6));
    (void)ocr_tensor_get_f32(&r, 5);
    (void)ocr_tensor_dim(&t, -2);
}

START_TEST(test_invariants_abort) {
    ck_assert_msg(!aborts(valid_use), "valid use aborted");
    ck_assert_msg(aborts(dim_out_of_range), "dim 2 of a 2-d tensor");
    ck_assert_msg(aborts(reshape_bad_count), "reshape to another element count");
    ck_assert_msg(aborts(get_out_of_bounds), "get past the end");
    ck_assert_msg(aborts(to_f32_of_int), "to_f32 of an int32 tensor");
    ck_assert_msg(aborts(too_many_dims), "5-d tensor");
}
END_TEST

START_TEST(test_views_and_owned) {
    ocr_device_t cpu = ocr_cpu();
    OcrMemStats s0 = ocr_mem_stats(cpu);
    float backing[12];
    for (int i = 0; i < 12; i++) backing[i] = (float)i;
    OcrTensor v = ocr_tensor_view_cpu(backing, OCR_F32, 2, OCR_SHAPE(3, 4));
    ck_assert_int_eq(v.owns_data, 0);
    ck_assert_ptr_eq(v.data, backing);
    ck_assert(ocr_device_equal(v.device, cpu));
    ck_assert(ocr_tensor_get_f32(&v, 7) == 7.0f);
    ocr_tensor_free(&v);  // a view leaves the memory alone and clears the struct
    ck_assert_ptr_null(v.data);
    ck_assert(backing[11] == 11.0f);

    OcrTensor t;
    ck_assert_int_eq(ocr_tensor_alloc(&t, OCR_BF16, cpu, 3, OCR_SHAPE(2, 3, 5), OCR_MEM_PARAMS), OCR_OK);
    ck_assert_int_eq(t.owns_data, 1);
    ck_assert_int_eq(t.category, OCR_MEM_PARAMS);
    ck_assert_uint_eq((uintptr_t)t.data % OCR_MEM_ALIGNMENT, 0);
    ck_assert_uint_eq(ocr_mem_size_of(t.data), 60);
    OcrMemStats s = ocr_mem_stats(cpu);
    ck_assert_int_eq(s.current[OCR_MEM_PARAMS] - s0.current[OCR_MEM_PARAMS], 60);  // charged to its category
    // A view of owned data does not own it; freeing the view keeps the owner valid.
    OcrTensor tv = ocr_tensor_view_cpu(t.data, OCR_BF16, 1, OCR_SHAPE(30));
    ocr_tensor_fill(&t, 1.5f);
    ocr_tensor_free(&tv);
    ck_assert(ocr_tensor_get_f32(&t, 29) == 1.5f);
    ocr_tensor_free(&t);
    ck_assert_ptr_null(t.data);
    ck_assert_int_eq(t.owns_data, 0);
    s = ocr_mem_stats(cpu);
    ck_assert_int_eq(s.current[OCR_MEM_PARAMS], s0.current[OCR_MEM_PARAMS]);
    ck_assert_int_eq(s.allocations, s0.allocations);

    // An empty tensor allocates (a unique block of 0 bytes) and converts without touching memory.
    OcrTensor e;
    ck_assert_int_eq(ocr_tensor_alloc(&e, OCR_F16, cpu, 2, OCR_SHAPE(0, 4), OCR_MEM_ACTIVATIONS), OCR_OK);
    ocr_tensor_from_f32(&e, NULL);
    ocr_tensor_to_f32(&e, NULL);
    ocr_tensor_fill(&e, 1.0f);
    ocr_tensor_free(&e);

    // Failure: a message naming the tensor, nothing charged.
    OcrTensor big;
    ocr_clear_error();
    ck_assert_int_eq(ocr_tensor_alloc(&big, OCR_F32, cpu, 2, OCR_SHAPE(1ll << 40, 1ll << 20), OCR_MEM_ACTIVATIONS),
                     OCR_ERR_OOM);
    ck_assert_ptr_null(big.data);
    ck_assert_int_eq(big.owns_data, 0);
    ck_assert_msg(strstr(ocr_last_error(), "(1099511627776, 1048576) float32") != NULL, "message: %s",
                  ocr_last_error());
    ocr_tensor_free(&big);  // safe on a failed allocation
    s = ocr_mem_stats(cpu);
    ck_assert_int_eq(s.current_total, s0.current_total);
}
END_TEST

START_TEST(test_reshape) {
    int32_t d[24];
    for (int i = 0; i < 24; i++) d[i] = i;
    OcrTensor t = ocr_tensor_view_cpu(d, OCR_I32, 3, OCR_SHAPE(2, 3, 4));
    OcrTensor r = ocr_tensor_reshape(&t, 2, OCR_SHAPE(6, 4));
    ck_assert_ptr_eq(r.data, t.data);
    ck_assert_int_eq(r.owns_data, 0);  // a reshape is a view, even of owned data
    ck_assert_int_eq(r.ndim, 2);
    ck_assert_int_eq(r.shape[0], 6);
    ck_assert_int_eq(r.shape[1], 4);
    ck_assert_int_eq(r.shape[2], 1);
    ck_assert_int_eq(r.dtype, OCR_I32);
    ck_assert(ocr_tensor_get_f32(&r, 23) == 23.0f);
    OcrTensor f = ocr_tensor_reshape(&t, 1, OCR_SHAPE(24));
    ck_assert_int_eq(ocr_tensor_numel(&f), 24);
    OcrTensor four = ocr_tensor_reshape(&t, 4, OCR_SHAPE(1, 2, 12, 1));
    ck_assert_int_eq(ocr_tensor_dim(&four, -2), 12);

    OcrTensor owned;
    ck_assert_int_eq(ocr_tensor_alloc(&owned, OCR_F32, ocr_cpu(), 2, OCR_SHAPE(2, 2), OCR_MEM_DATA), OCR_OK);
    OcrTensor ov = ocr_tensor_reshape(&owned, 1, OCR_SHAPE(4));
    ck_assert_int_eq(ov.owns_data, 0);
    ocr_tensor_free(&ov);  // must not free the owner's block
    ocr_tensor_set_f32(&owned, 3, 2.0f);
    ocr_tensor_free(&owned);
}
END_TEST

START_TEST(test_describe) {
    char buf[96];
    OcrTensor t = ocr_tensor_view_cpu(NULL, OCR_F16, 4, OCR_SHAPE(2, 48, 320, 3));
    ck_assert_str_eq(ocr_tensor_describe(&t, buf, sizeof buf), "(2, 48, 320, 3) float16");
    OcrTensor s = ocr_tensor_view_cpu(NULL, OCR_F32, 0, NULL);
    ck_assert_str_eq(ocr_tensor_describe(&s, buf, sizeof buf), "() float32");
    OcrTensor v = ocr_tensor_view_cpu(NULL, OCR_U8, 1, OCR_SHAPE(7));
    ck_assert_str_eq(ocr_tensor_describe(&v, buf, sizeof buf), "(7) uint8");
    OcrTensor b = ocr_tensor_view_cpu(NULL, OCR_BF16, 2, OCR_SHAPE(1000000, 12));
    ck_assert_str_eq(ocr_tensor_describe(&b, buf, sizeof buf), "(1000000, 12) bfloat16");
    // Small buffers truncate and stay terminated, never writing past the end.
    for (size_t n = 1; n < 26; n++) {
        char small[32];
        memset(small, 'Z', sizeof small);
        ocr_tensor_describe(&t, small, n);
        ck_assert_uint_lt(strlen(small), n);
        ck_assert_int_eq(strncmp(small, "(2, 48, 320, 3) float16", strlen(small)), 0);
        for (size_t k = n; k < sizeof small; k++) ck_assert_int_eq(small[k], 'Z');
    }
}
END_TEST

START_TEST(test_get_set_every_dtype) {
    OcrTensor t[OCR_DTYPE_COUNT];
    for (int d = 0; d < OCR_DTYPE_COUNT; d++) {
        ck_assert_int_eq(ocr_tensor_alloc(&t[d], (ocr_dtype_t)d, ocr_cpu(), 2, OCR_SHAPE(3, 5), OCR_MEM_ACTIVATIONS),
                         OCR_OK);
        memset(t[d].data, 0, ocr_tensor_bytes(&t[d]));
    }
    const float third = 1.0f / 3.0f;
    ocr_tensor_set_f32(&t[OCR_F32], 4, third);
    ck_assert(ocr_tensor_get_f32(&t[OCR_F32], 4) == third);
    ck_assert(((float *)t[OCR_F32].data)[4] == third);
    // f16 stores 1/3 rounded to 11 significant bits: 0x3555 = 1365/4096.
    ocr_tensor_set_f32(&t[OCR_F16], 4, third);
    ck_assert_uint_eq(((uint16_t *)t[OCR_F16].data)[4], 0x3555);
    ck_assert(ocr_tensor_get_f32(&t[OCR_F16], 4) == 1365.0f / 4096.0f);
    // bf16 stores 1/3 with 8 significant bits: 0x3eab = 171/512.
    ocr_tensor_set_f32(&t[OCR_BF16], 4, third);
    ck_assert_uint_eq(((uint16_t *)t[OCR_BF16].data)[4], 0x3eab);
    ck_assert(ocr_tensor_get_f32(&t[OCR_BF16], 4) == 171.0f / 512.0f);
    ocr_tensor_set_f32(&t[OCR_F16], 0, 1e6f);  // overflow to inf
    ck_assert(isinf(ocr_tensor_get_f32(&t[OCR_F16], 0)));
    ocr_tensor_set_f32(&t[OCR_BF16], 0, NAN);
    ck_assert(isnan(ocr_tensor_get_f32(&t[OCR_BF16], 0)));
    // Integers: truncation toward zero as a C cast, saturating at the type's range, NaN -> 0.
    static const struct {
        float in;
        int32_t i32;
        uint8_t u8;
    } ints[] = {{0.0f, 0, 0},
                {7.9f, 7, 7},
                {-7.9f, -7, 0},
                {255.0f, 255, 255},
                {300.0f, 300, 255},
                {-1.0f, -1, 0},
                {1e10f, INT32_MAX, 255},
                {-1e10f, INT32_MIN, 0},
                {NAN, 0, 0},
                {INFINITY, INT32_MAX, 255},
                {16777216.0f, 16777216, 255},
                {0.999f, 0, 0}};
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
        ocr_tensor_set_f32(&t[OCR_I32], 14, ints[k].in);
        ocr_tensor_set_f32(&t[OCR_U8], 14, ints[k].in);
        ck_assert_msg(((int32_t *)t[OCR_I32].data)[14] == ints[k].i32, "int32 of %g: %d", (double)ints[k].in,
                      ((int32_t *)t[OCR_I32].data)[14]);
        ck_assert_msg(((uint8_t *)t[OCR_U8].data)[14] == ints[k].u8, "uint8 of %g: %d", (double)ints[k].in,
                      ((uint8_t *)t[OCR_U8].data)[14]);
        ck_assert(ocr_tensor_get_f32(&t[OCR_I32], 14) == (float)ints[k].i32);
        ck_assert(ocr_tensor_get_f32(&t[OCR_U8], 14) == (float)ints[k].u8);
    }
    // Every element of every dtype round-trips small integers, and writes land at the index.
    for (int d = 0; d < OCR_DTYPE_COUNT; d++) {
        for (int i = 0; i < 15; i++) ocr_tensor_set_f32(&t[d], i, (float)(i * 3));
        for (int i = 0; i < 15; i++) ck_assert(ocr_tensor_get_f32(&t[d], i) == (float)(i * 3));
        ocr_tensor_fill(&t[d], 5.0f);
        for (int i = 0; i < 15; i++) ck_assert(ocr_tensor_get_f32(&t[d], i) == 5.0f);
        ocr_tensor_free(&t[d]);
    }
}
END_TEST

START_TEST(test_to_from_f32) {
    enum { N = 1000 };
    float src[N], back[N];
    ocr_test_fill_uniform(src, N, 5, -70000.0f, 70000.0f);  // includes values that overflow f16
    src[0] = NAN;
    src[1] = -0.0f;
    src[2] = 1e-30f;
    src[3] = INFINITY;
    for (int d = OCR_F32; d <= OCR_BF16; d++) {
        // Odd element counts exercise the vector tails.
        for (int n = 0; n <= N; n += n < 20 ? 1 : 327) {
            OcrTensor t;
            ck_assert_int_eq(ocr_tensor_alloc(&t, (ocr_dtype_t)d, ocr_cpu(), 1, OCR_SHAPE(n), OCR_MEM_DATA), OCR_OK);
            ocr_tensor_from_f32(&t, src);
            for (int i = 0; i < n; i++) {
                uint32_t want;
                if (d == OCR_F32)
                    want = ocr_f32_bits(src[i]);
                else if (d == OCR_F16)
                    want = ocr_f32_to_f16(src[i]);
                else
                    want = ocr_f32_to_bf16(src[i]);
                uint32_t got = d == OCR_F32 ? ((uint32_t *)t.data)[i] : ((uint16_t *)t.data)[i];
                if (got != want)
                    ck_abort_msg("%s from_f32 n=%d [%d]: 0x%x want 0x%x", ocr_dtype_name(t.dtype), n, i, got, want);
            }
            memset(back, 0x55, sizeof back);
            ocr_tensor_to_f32(&t, back);
            for (int i = 0; i < n; i++) {
                float want = ocr_tensor_get_f32(&t, i);
                if (ocr_f32_bits(back[i]) != ocr_f32_bits(want))
                    ck_abort_msg("%s to_f32 n=%d [%d]: %g want %g", ocr_dtype_name(t.dtype), n, i, (double)back[i],
                                 (double)want);
            }
            if (n < N) ck_assert_uint_eq(ocr_f32_bits(back[n]), 0x55555555u);  // nothing past the end
            ocr_tensor_free(&t);
        }
    }
}
END_TEST

static Suite *tensor_suite(void) {
    Suite *s = suite_create("tensor");
    TCase *tc = tcase_create("tensor");
    tcase_add_test(tc, test_dtype_names_and_sizes);
    tcase_add_test(tc, test_dtype_parsing);
    tcase_add_test(tc, test_numel_bytes_dims);
    tcase_add_test(tc, test_invariants_abort);
    tcase_add_test(tc, test_views_and_owned);
    tcase_add_test(tc, test_reshape);
    tcase_add_test(tc, test_describe);
    tcase_add_test(tc, test_get_set_every_dtype);
    tcase_add_test(tc, test_to_from_f32);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(tensor_suite()); }
