// Export for deployment (models/onnx_export.h, models/pdparams_write.h):
// - the committed PP-OCRv4 training-form fixture (tests/models/data/ppocrv4_small.pdparams)
//   exported to ONNX is byte-for-byte the file tools/check_export.py --fixtures ran onnxruntime
//   on (sha256 and size in tests/models/data/export/export.json), twice the same bytes; the file
//   parses with our reader (opset, IR, input x, output probs, dictionary metadata, every node
//   input defined before use); our importer reads it back into the deploy network with every
//   parameter and BN statistic bit-identical to ocr_model_fuse's, and that network reproduces
//   onnxruntime's probabilities of the file (export/ppocrv4_small.ort_probs.f32);
// - .pdparams written from it parse with our pickle reader into the same 888 names, shapes and
//   bit-identical values as the paddle.save original; a deploy-form network is written in the
//   training form that reproduces it;
// - a seeded PP-OCRv3 en network survives ONNX and .pdparams round trips bit for bit (weights and
//   logits); with fold_bn no BatchNormalization is left and the folded stem equals w·γ/√(σ²+ε)
//   rounded once; a MultiHead network writes PaddleOCR's MultiHead names and exports its CTC branch;
// - bad input: an SVTRNet network is refused by name, an unwritable path is an I/O error naming
//   it, and a failed write (full disk, injected) leaves the old file and no temporary behind.
#include <cjson/cJSON.h>
#include <dirent.h>

#include "core/fileio.h"
#include "kernels/backend.h"
#include "models/onnx.h"
#include "models/onnx_export.h"
#include "models/onnx_import.h"
#include "models/pdparams.h"
#include "models/pdparams_write.h"
#include "tests/models/model_test_util.h"

// ---- SHA-256 (FIPS 180-4), to compare an export with the recorded digest ---------------------------------

static const uint32_t SHA_K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01,
    0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
    0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08,
    0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha_block(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++) w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + SHA_K[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

static void sha256_hex(const uint8_t *data, size_t n, char out[65]) {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    size_t full = n / 64 * 64;
    for (size_t i = 0; i < full; i += 64) sha_block(h, data + i);
    uint8_t tail[128] = {0};
    size_t rest = n - full;
    memcpy(tail, data + full, rest);
    tail[rest] = 0x80;
    size_t len = rest + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)n * 8;
    for (int i = 0; i < 8; i++) tail[len - 1 - i] = (uint8_t)(bits >> (8 * i));
    for (size_t i = 0; i < len; i += 64) sha_block(h, tail + i);
    for (int i = 0; i < 8; i++) snprintf(out + 8 * i, 9, "%08x", h[i]);
}

START_TEST(test_sha256) {
    char hex[65];
    sha256_hex((const uint8_t *)"abc", 3, hex);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";  // 56 bytes: the padding takes a second block
    sha256_hex((const uint8_t *)two, strlen(two), hex);
    ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}
END_TEST

// ---- helpers -------------------------------------------------------------------------------------------------

static char *read_text(const char *rel, size_t *size) {
    char path[1024], *data;
    size_t n;
    snprintf(path, sizeof path, "%s/%s", OCR_SOURCE_DIR, rel);
    ck_assert_msg(ocr_read_file(path, &data, &n) == OCR_OK, "%s", ocr_last_error());
    if (size) *size = n;
    return data;
}

static float *read_floats(const char *rel, int64_t expect) {
    size_t n;
    char *d = read_text(rel, &n);
    ck_assert_msg(n == (size_t)expect * 4, "%s: %zu bytes, expected %lld floats", rel, n, (long long)expect);
    return (float *)d;
}

// The en dictionary as the export writes it into the metadata: the lines without the last newline.
static char *dictionary_text(void) {
    size_t n;
    char *d = read_text("configs/dicts/en_dict.txt", &n);
    while (n > 0 && (d[n - 1] == '\n' || d[n - 1] == '\r')) d[--n] = '\0';
    return d;
}

static OcrModel *small_v4(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/models/data/ppocrv4_small.pdparams", OCR_SOURCE_DIR);
    OcrPdparams *p;
    ck_assert_msg(ocr_pdparams_load(&p, path) == OCR_OK, "%s", ocr_last_error());
    OcrArch arch;
    char desc[300];
    ck_assert_msg(ocr_pdparams_arch(p, &arch, desc, sizeof desc) == OCR_OK, "%s", ocr_last_error());
    OcrModel *m;
    ck_assert(ocr_model_create(&m, &arch) == OCR_OK);
    OcrPdLoadReport r;
    ck_assert(ocr_pdparams_load_into(m, p, &r) == OCR_OK);
    ck_assert_int_eq(r.missing, 0);
    ocr_pdparams_report_free(&r);
    ocr_pdparams_free(p);
    return m;
}

// Every entry of `a` exists in `b` under the same name with the same shape and the same bits.
static void tables_equal(const OcrParamTable *a, const OcrParamTable *b, const char *what) {
    ck_assert_msg(a->count == b->count, "%s: %d vs %d tensors", what, a->count, b->count);
    for (int i = 0; i < a->count; i++) {
        int j = ocr_params_find(b, a->items[i].name);
        ck_assert_msg(j >= 0, "%s: %s missing", what, a->items[i].name);
        ck_assert_msg(a->items[i].numel == b->items[j].numel && a->items[i].ndim == b->items[j].ndim, "%s: %s shape", what,
                      a->items[i].name);
        for (int k = 0; k < a->items[i].ndim; k++) ck_assert(a->items[i].shape[k] == b->items[j].shape[k]);
        OcrTensor x = ocr_params_tensor(a, i), y = ocr_params_tensor(b, j);
        float *u = tm_copy_f32(&x), *v = tm_copy_f32(&y);
        ck_assert_msg(memcmp(u, v, (size_t)a->items[i].numel * sizeof(float)) == 0, "%s: %s differs", what, a->items[i].name);
        free(u);
        free(v);
    }
}

static void nchw_to_nhwc(OcrTensor *x, const float *nchw, int B, int H, int W) {
    ck_assert(ocr_tensor_alloc(x, OCR_F32, ocr_cpu(), 4, (int64_t[]){B, H, W, 3}, OCR_MEM_DATA) == OCR_OK);
    float *d = x->data;
    for (int b = 0; b < B; b++)
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < H; y++)
                for (int q = 0; q < W; q++) d[(((int64_t)b * H + y) * W + q) * 3 + c] = nchw[(((int64_t)b * 3 + c) * H + y) * W + q];
}

// How far two float32 evaluations of one network may put a probability apart (the bound
// tools/check_export.py uses): each dot product of length K rounds to about sqrt(K)·u relative
// to its terms, in each of the two implementations; to first order the relative errors of the
// layers add up; the logits then move by eps·max|z| and a softmax output by at most half the
// largest logit change. The 1e-4 is the floor.
static double rounding_bound(const OcrModel *m, int T, double max_abs_logit) {
    const OcrParamTable *p = ocr_model_params((OcrModel *)m);
    double sum = 0;
    for (int i = 0; i < p->count; i++) {
        const OcrParamInfo *e = &p->items[i];
        if (e->role != OCR_ROLE_WEIGHT) continue;
        if (e->ndim == 4) sum += sqrt((double)(e->shape[1] * e->shape[2] * e->shape[3]));
        if (e->ndim == 2) sum += sqrt((double)e->shape[0]);
    }
    const OcrArch *a = ocr_model_arch(m);
    if (a->neck_svtr) sum += a->neck.depth * (sqrt((double)a->neck.hidden / a->neck.heads) + sqrt((double)T));
    double eps = 2.0 * ldexp(1.0, -24) * sum;
    return fmax(1e-4, 0.5 * eps * max_abs_logit);
}

static cJSON *export_json(void) {
    char *text = read_text("tests/models/data/export/export.json", NULL);
    cJSON *j = cJSON_Parse(text);
    free(text);
    ck_assert_msg(j != NULL, "export.json does not parse");
    return j;
}

static const char *json_str(const cJSON *j, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    ck_assert_msg(cJSON_IsString(v), "export.json: no string %s", key);
    return v->valuestring;
}

// Every node input is the graph input, an initializer, a Constant's output or an earlier node's
// output: the node list is in topological order, as ONNX requires.
static void check_topological(const OcrOnnxModel *om) {
    int cap = om->ninits + om->nnodes * 2 + 4, n = 0;
    const char **known = calloc((size_t)cap, sizeof *known);
    ck_assert(known);
    for (int i = 0; i < om->ninputs; i++) known[n++] = om->inputs[i];
    for (int i = 0; i < om->ninits; i++) known[n++] = om->inits[i].name;
    for (int i = 0; i < om->nnodes; i++) {
        const OcrOnnxNode *nd = &om->nodes[i];
        for (int k = 0; k < nd->ninputs; k++) {
            int found = 0;
            for (int q = n - 1; q >= 0 && !found; q--) found = strcmp(known[q], nd->inputs[k]) == 0;
            ck_assert_msg(found, "node #%d %s (%s) reads %s before it is defined", i, nd->op_type, nd->name, nd->inputs[k]);
        }
        for (int k = 0; k < nd->noutputs; k++) {
            ck_assert(n < cap);
            known[n++] = nd->outputs[k];
        }
    }
    free(known);
}

// ---- the PP-OCRv4 fixture -----------------------------------------------------------------------------------

START_TEST(test_v4_fixture_onnx) {
    enum { B = 2, H = 48, W = 128, T = 16, C = 97 };
    cJSON *meta = export_json();
    char *dict = dictionary_text();
    OcrModel *m = small_v4();
    OcrOnnxExportOptions opt = {dict, json_str(meta, "producer_version"), 0};
    OcrOnnxExportInfo info;
    uint8_t *a, *b;
    size_t na, nb;
    ck_assert_msg(ocr_onnx_export_bytes(m, &opt, &a, &na, &info) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(ocr_onnx_export_bytes(m, &opt, &b, &nb, NULL) == OCR_OK, "%s", ocr_last_error());
    ck_assert(na == nb && memcmp(a, b, na) == 0);
    ck_assert(info.fused && !info.multihead_ctc && info.seq_divisor == 8);
    char hex[65];
    sha256_hex(a, na, hex);
    printf("  export: %zu bytes, %d nodes, %d initializers, sha256 %s\n", na, info.nodes, info.initializers, hex);
    const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(meta, "onnx_bytes");
    ck_assert(cJSON_IsNumber(bytes) && (size_t)bytes->valuedouble == na);
    ck_assert_str_eq(hex, json_str(meta, "onnx_sha256"));

    OcrOnnxModel *om;
    ck_assert_msg(ocr_onnx_parse(&om, a, na, "export.onnx") == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(om->opset, OCR_ONNX_EXPORT_OPSET);
    ck_assert_int_eq(om->ir_version, OCR_ONNX_EXPORT_IR);
    ck_assert_str_eq(om->producer, "ocrtrain");
    ck_assert(om->ninputs == 1 && strcmp(om->inputs[0], "x") == 0);
    ck_assert(om->noutputs == 1 && strcmp(om->outputs[0], "probs") == 0);
    ck_assert(ocr_onnx_metadata(om, "character") && strcmp(ocr_onnx_metadata(om, "character"), dict) == 0);
    ck_assert_int_eq(om->nnodes, info.nodes);
    ck_assert_int_eq(om->ninits, info.initializers);
    check_topological(om);

    // Back through our importer: the deploy network, every tensor the fused one's, bit for bit.
    OcrModel *back;
    OcrOnnxImportInfo ii;
    ck_assert_msg(ocr_import_onnx(&back, om, "export.onnx", &ii) == OCR_OK, "%s", ocr_last_error());
    ck_assert(ii.deploy && ii.softmax_output && ii.unused_arrays == 0);
    printf("  re-imported: %s\n", ii.variant);
    OcrModel *fused;
    ck_assert(ocr_model_fuse(&fused, m) == OCR_OK);
    tables_equal(ocr_model_params(fused), ocr_model_params(back), "parameters");
    tables_equal(ocr_model_stats(fused), ocr_model_stats(back), "BN statistics");

    // onnxruntime's probabilities of this very file.
    float *x = read_floats("tests/models/data/ppocrv4_small.input.f32", (int64_t)B * 3 * H * W);
    float *ort = read_floats("tests/models/data/export/ppocrv4_small.ort_probs.f32", (int64_t)B * T * C);
    OcrTensor img;
    nchw_to_nhwc(&img, x, B, H, W);
    ck_assert_msg(ocr_model_forward(back, &img, 0) == OCR_OK, "%s", ocr_last_error());
    const OcrTensor *pr = ocr_model_probs(back), *lg = ocr_model_logits(back);
    ck_assert(pr->shape[0] == B && pr->shape[1] == T && pr->shape[2] == C);
    float *ours = tm_copy_f32(pr), *logits = tm_copy_f32(lg);
    double tol = rounding_bound(back, T, tm_max_abs(logits, (int64_t)B * T * C));
    double d = tm_max_diff(ours, ort, (int64_t)B * T * C);
    int argmax_diff = 0;
    for (int s = 0; s < B * T; s++) {
        int p = 0, q = 0;
        for (int c = 1; c < C; c++) {
            if (ours[s * C + c] > ours[s * C + p]) p = c;
            if (ort[s * C + c] > ort[s * C + q]) q = c;
        }
        argmax_diff += p != q;
    }
    printf("  vs onnxruntime: max |prob diff| %.3g (bound %.3g), argmax differences %d of %d\n", d, tol, argmax_diff, B * T);
    ck_assert_msg(d <= tol, "probabilities differ by %g (bound %g)", d, tol);
    ck_assert_int_eq(argmax_diff, 0);
    free(ours);
    free(logits);
    ocr_tensor_free(&img);
    free(x);
    free(ort);
    ocr_model_free(fused);
    ocr_model_free(back);
    ocr_onnx_free(om);
    free(a);
    free(b);
    ocr_model_free(m);
    free(dict);
    cJSON_Delete(meta);
}
END_TEST

START_TEST(test_v4_fixture_pdparams) {
    OcrModel *m = small_v4();
    uint8_t *a, *b;
    size_t na, nb;
    OcrPdWriteInfo info;
    ck_assert_msg(ocr_pdparams_write_bytes(m, &a, &na, &info) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(ocr_pdparams_write_bytes(m, &b, &nb, NULL) == OCR_OK, "%s", ocr_last_error());
    ck_assert(na == nb && memcmp(a, b, na) == 0);
    ck_assert(!info.unfused && info.tensors == 888);
    OcrPdparams *ours, *orig;
    ck_assert_msg(ocr_pdparams_parse(&ours, a, na, "written.pdparams") == OCR_OK, "%s", ocr_last_error());
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/models/data/ppocrv4_small.pdparams", OCR_SOURCE_DIR);
    ck_assert(ocr_pdparams_load(&orig, path) == OCR_OK);
    ck_assert_int_eq(ours->protocol, 4);
    ck_assert_int_eq(ours->nother, 0);
    ck_assert_int_eq(ours->count, orig->count);
    // PaddleOCR's names, Paddle's layouts, the very values paddle.save wrote.
    for (int i = 0; i < orig->count; i++) {
        const OcrPdTensor *o = &orig->tensors[i], *t = ocr_pdparams_find(ours, o->name);
        ck_assert_msg(t != NULL, "%s not written", o->name);
        ck_assert_int_eq(t->ndim, o->ndim);
        for (int k = 0; k < o->ndim; k++) ck_assert(t->shape[k] == o->shape[k]);
        ck_assert_str_eq(t->dtype, "f4");
        ck_assert_msg(memcmp(t->f32, o->f32, (size_t)o->numel * sizeof(float)) == 0, "%s differs", o->name);
    }
    // Layers in order, each layer's parameters before its buffers, as Paddle's state_dict.
    ck_assert_str_eq(ours->tensors[0].name, "backbone.conv1.conv.weight");
    ck_assert_str_eq(ours->tensors[1].name, "backbone.conv1.bn.weight");
    ck_assert_str_eq(ours->tensors[3].name, "backbone.conv1.bn._mean");
    ck_assert_str_eq(ours->tensors[4].name, "backbone.conv1.bn._variance");
    ocr_pdparams_free(ours);
    ocr_pdparams_free(orig);
    free(a);
    free(b);
    ocr_model_free(m);
}
END_TEST

// A deploy-form network (as `ocrtrain import --onnx` gives) is written in a training form that
// PaddleOCR's network loads and that computes the same function.
START_TEST(test_unfuse) {
    enum { B = 2, H = 48, W = 128, T = 16, C = 97 };
    OcrModel *m = small_v4(), *fused;
    ck_assert(ocr_model_fuse(&fused, m) == OCR_OK);
    uint8_t *a;
    size_t na;
    OcrPdWriteInfo info;
    ck_assert_msg(ocr_pdparams_write_bytes(fused, &a, &na, &info) == OCR_OK, "%s", ocr_last_error());
    ck_assert(info.unfused && info.tensors == 888);
    OcrPdparams *p;
    ck_assert_msg(ocr_pdparams_parse(&p, a, na, "unfused.pdparams") == OCR_OK, "%s", ocr_last_error());
    OcrArch arch;
    char desc[300];
    ck_assert_msg(ocr_pdparams_arch(p, &arch, desc, sizeof desc) == OCR_OK, "%s", ocr_last_error());
    ck_assert(!arch.lcnet.deploy && arch.lcnet.conv_kxk_num == 4);
    OcrModel *t;
    ck_assert(ocr_model_create(&t, &arch) == OCR_OK);
    OcrPdLoadReport r;
    ck_assert(ocr_pdparams_load_into(t, p, &r) == OCR_OK);
    ck_assert_int_eq(r.missing + r.unexpected + r.shape_mismatch, 0);
    ocr_pdparams_report_free(&r);
    // The same function up to float32 rounding: the k×k branch holds the fused kernel and a BN
    // with mean 0 and variance 1 − ε (so it divides by about 1), every other branch adds zeros.
    float *x = read_floats("tests/models/data/ppocrv4_small.input.f32", (int64_t)B * 3 * H * W);
    OcrTensor img;
    nchw_to_nhwc(&img, x, B, H, W);
    ck_assert(ocr_model_forward(fused, &img, 0) == OCR_OK);
    float *pf = tm_copy_f32(ocr_model_probs(fused)), *lf = tm_copy_f32(ocr_model_logits(fused));
    ck_assert(ocr_model_forward(t, &img, 0) == OCR_OK);
    float *pt = tm_copy_f32(ocr_model_probs(t));
    double d = tm_max_diff(pf, pt, (int64_t)B * T * C), tol = rounding_bound(fused, T, tm_max_abs(lf, (int64_t)B * T * C));
    printf("  unfused vs fused: max |prob diff| %.3g (bound %.3g)\n", d, tol);
    ck_assert(d <= tol);
    free(pf);
    free(lf);
    free(pt);
    free(x);
    ocr_tensor_free(&img);
    ocr_model_free(t);
    ocr_pdparams_free(p);
    free(a);
    ocr_model_free(fused);
    ocr_model_free(m);
}
END_TEST

// ---- PP-OCRv3 and MultiHead ------------------------------------------------------------------------------------

START_TEST(test_v3_round_trips) {
    OcrModel *m = tm_model("rec_ppocrv3_en.json", NULL);
    tm_randomize_bn(m, 5);
    uint8_t *a;
    size_t na;
    OcrOnnxExportInfo info;
    ck_assert_msg(ocr_onnx_export_bytes(m, NULL, &a, &na, &info) == OCR_OK, "%s", ocr_last_error());
    ck_assert(!info.fused && info.seq_divisor == 8);
    OcrOnnxModel *om;
    ck_assert(ocr_onnx_parse(&om, a, na, "v3.onnx") == OCR_OK);
    ck_assert(ocr_onnx_metadata(om, "character") == NULL);  // no dictionary given
    check_topological(om);
    OcrModel *back;
    OcrOnnxImportInfo ii;
    ck_assert_msg(ocr_import_onnx(&back, om, "v3.onnx", &ii) == OCR_OK, "%s", ocr_last_error());
    ck_assert_str_eq(ii.version, "PP-OCRv3");
    tables_equal(ocr_model_params(m), ocr_model_params(back), "v3 onnx parameters");
    tables_equal(ocr_model_stats(m), ocr_model_stats(back), "v3 onnx BN statistics");
    // The same network and weights run the same code: identical logits.
    OcrTensor img = tm_images(1, 48, 64, 9);
    ck_assert(ocr_model_forward(m, &img, 0) == OCR_OK);
    float *l0 = tm_copy_f32(ocr_model_logits(m));
    ck_assert(ocr_model_forward(back, &img, 0) == OCR_OK);
    float *l1 = tm_copy_f32(ocr_model_logits(back));
    ck_assert(memcmp(l0, l1, (size_t)ocr_tensor_numel(ocr_model_logits(m)) * sizeof(float)) == 0);

    uint8_t *pb;
    size_t npb;
    ck_assert(ocr_pdparams_write_bytes(m, &pb, &npb, NULL) == OCR_OK);
    OcrPdparams *p;
    ck_assert(ocr_pdparams_parse(&p, pb, npb, "v3.pdparams") == OCR_OK);
    ck_assert(ocr_pdparams_find(p, "backbone.block_list.11._se.conv1.weight") != NULL);
    ck_assert(ocr_pdparams_find(p, "neck.encoder.svtr_block.1.mixer.qkv.weight") != NULL);
    OcrArch arch;
    char desc[300];
    ck_assert_msg(ocr_pdparams_arch(p, &arch, desc, sizeof desc) == OCR_OK, "%s", ocr_last_error());
    ck_assert(arch.backbone == OCR_BACKBONE_MV1E);
    OcrModel *fromp;
    ck_assert(ocr_model_create(&fromp, &arch) == OCR_OK);
    OcrPdLoadReport r;
    ck_assert(ocr_pdparams_load_into(fromp, p, &r) == OCR_OK);
    ck_assert_int_eq(r.missing + r.unexpected + r.shape_mismatch, 0);
    ocr_pdparams_report_free(&r);
    tables_equal(ocr_model_params(m), ocr_model_params(fromp), "v3 pdparams parameters");
    tables_equal(ocr_model_stats(m), ocr_model_stats(fromp), "v3 pdparams BN statistics");
    ocr_model_free(fromp);
    ocr_pdparams_free(p);
    free(pb);

    // --fold-bn: no BatchNormalization left; the stem's folded kernel and bias are w·γ/√(σ²+ε) and
    // β − μ·γ/√(σ²+ε), computed in double and rounded once, in OIHW.
    OcrOnnxExportOptions fold = {NULL, NULL, 1};
    uint8_t *fb;
    size_t nfb;
    OcrOnnxExportInfo finfo;
    ck_assert(ocr_onnx_export_bytes(m, &fold, &fb, &nfb, &finfo) == OCR_OK);
    OcrOnnxModel *fm;
    ck_assert(ocr_onnx_parse(&fm, fb, nfb, "folded.onnx") == OCR_OK);
    int bns = 0;
    for (int i = 0; i < om->nnodes; i++) bns += strcmp(om->nodes[i].op_type, "BatchNormalization") == 0;
    for (int i = 0; i < fm->nnodes; i++) ck_assert(strcmp(fm->nodes[i].op_type, "BatchNormalization") != 0);
    ck_assert_int_eq(fm->nnodes, om->nnodes - bns);
    check_topological(fm);
    const OcrOnnxTensor *fw = ocr_onnx_constant(fm, "backbone.conv1._conv.weight.bn_folded");
    const OcrOnnxTensor *fbias = ocr_onnx_constant(fm, "backbone.conv1._conv.bias.bn_folded");
    ck_assert(fw && fbias && fw->ndim == 4 && fbias->numel == fw->dims[0]);
    OcrParamTable *mp = ocr_model_params(m), *ms = ocr_model_stats(m);
    const float *w = ocr_params_tensor(mp, ocr_params_find(mp, "backbone.conv1._conv.weight")).data;
    const float *g = ocr_params_tensor(mp, ocr_params_find(mp, "backbone.conv1._batch_norm.weight")).data;
    const float *be = ocr_params_tensor(mp, ocr_params_find(mp, "backbone.conv1._batch_norm.bias")).data;
    const float *mu = ocr_params_tensor(ms, ocr_params_find(ms, "backbone.conv1._batch_norm._mean")).data;
    const float *var = ocr_params_tensor(ms, ocr_params_find(ms, "backbone.conv1._batch_norm._variance")).data;
    int64_t oc = fw->dims[0], cg = fw->dims[1], kh = fw->dims[2], kw = fw->dims[3];
    for (int64_t o = 0; o < oc; o++) {
        double sc = (double)g[o] / sqrt((double)var[o] + 1e-5f);
        ck_assert(fbias->f32[o] == (float)((double)be[o] - (double)mu[o] * sc));
        for (int64_t c = 0; c < cg; c++)
            for (int64_t y = 0; y < kh; y++)
                for (int64_t x = 0; x < kw; x++)
                    ck_assert(fw->f32[((o * cg + c) * kh + y) * kw + x] == (float)((double)w[((o * kh + y) * kw + x) * cg + c] * sc));
    }
    ocr_onnx_free(fm);
    free(fb);
    free(l0);
    free(l1);
    ocr_tensor_free(&img);
    ocr_model_free(back);
    ocr_onnx_free(om);
    free(a);
    ocr_model_free(m);
}
END_TEST

START_TEST(test_multihead) {
    OcrModel *m = tm_model("rec_ppocrv3_en_gtc_nrtr.json", NULL);
    ck_assert(ocr_model_arch(m)->multihead.kind != OCR_GUIDE_NONE);
    uint8_t *pb;
    size_t npb;
    OcrPdWriteInfo wi;
    ck_assert_msg(ocr_pdparams_write_bytes(m, &pb, &npb, &wi) == OCR_OK, "%s", ocr_last_error());
    OcrPdparams *p;
    ck_assert(ocr_pdparams_parse(&p, pb, npb, "mh.pdparams") == OCR_OK);
    // PaddleOCR's MultiHead names: the CTC branch under head.ctc_encoder / head.ctc_head, the
    // guidance branch under head.before_gtc / head.gtc_head; no neck.* of a plain model.
    ck_assert(ocr_pdparams_find(p, "head.ctc_encoder.encoder.conv1.conv.weight") != NULL);
    ck_assert(ocr_pdparams_find(p, "head.ctc_encoder.encoder.conv1.norm._variance") != NULL);
    ck_assert(ocr_pdparams_find(p, "head.ctc_head.fc.weight") != NULL);
    ck_assert(ocr_pdparams_find(p, "head.before_gtc.1.fc.weight") != NULL);
    int guide = 0;
    for (int i = 0; i < p->count; i++) {
        ck_assert_msg(strncmp(p->tensors[i].name, "neck.", 5) != 0, "%s", p->tensors[i].name);
        guide += strncmp(p->tensors[i].name, "head.gtc_head.", 14) == 0 || strncmp(p->tensors[i].name, "head.before_gtc.", 16) == 0;
    }
    ck_assert_int_eq(p->count, ocr_model_params(m)->count + ocr_model_stats(m)->count);
    // Our reader maps the CTC branch into a plain network and counts the guidance branch aside.
    OcrModel *ctc = tm_model("rec_ppocrv3_en.json", NULL);
    OcrPdLoadReport r;
    ck_assert(ocr_pdparams_load_into(ctc, p, &r) == OCR_OK);
    ck_assert_int_eq(r.missing + r.unexpected + r.shape_mismatch, 0);
    ck_assert_int_eq(r.guidance, guide);
    ocr_pdparams_report_free(&r);

    // ONNX: the CTC branch only, which our importer reads back as the plain network.
    uint8_t *a;
    size_t na;
    OcrOnnxExportInfo info;
    ck_assert_msg(ocr_onnx_export_bytes(m, NULL, &a, &na, &info) == OCR_OK, "%s", ocr_last_error());
    ck_assert(info.multihead_ctc);
    OcrOnnxModel *om;
    ck_assert(ocr_onnx_parse(&om, a, na, "mh.onnx") == OCR_OK);
    for (int i = 0; i < om->ninits; i++) ck_assert_msg(strstr(om->inits[i].name, "gtc") == NULL, "%s", om->inits[i].name);
    OcrModel *back;
    ck_assert_msg(ocr_import_onnx(&back, om, "mh.onnx", NULL) == OCR_OK, "%s", ocr_last_error());
    tables_equal(ocr_model_params(ctc), ocr_model_params(back), "MultiHead CTC branch");
    ocr_model_free(back);
    ocr_onnx_free(om);
    free(a);
    ocr_model_free(ctc);
    ocr_pdparams_free(p);
    free(pb);
    ocr_model_free(m);

    // SAR (PP-OCRv3's MultiHead): every LSTM parameter also under its cell's name, as Paddle's
    // nn.LSTM state dict has it (2 LSTMs x 2 layers x 4 tensors), equal values; our reader
    // takes the file back with nothing missing and the 16 second names counted as aliases.
    m = tm_model("rec_ppocrv3_en_gtc_sar.json", NULL);
    ck_assert_int_eq(ocr_model_arch(m)->multihead.kind, OCR_GUIDE_SAR);
    ck_assert_msg(ocr_pdparams_write_bytes(m, &pb, &npb, &wi) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(wi.aliases, 16);
    ck_assert_int_eq(wi.tensors, ocr_model_params(m)->count + ocr_model_stats(m)->count + 16);
    ck_assert(ocr_pdparams_parse(&p, pb, npb, "sar.pdparams") == OCR_OK);
    const OcrPdTensor *l1 = ocr_pdparams_find(p, "head.sar_head.decoder.rnn_decoder.weight_hh_l1");
    const OcrPdTensor *c1 = ocr_pdparams_find(p, "head.sar_head.decoder.rnn_decoder.1.cell.weight_hh");
    ck_assert(l1 && c1 && l1->numel == c1->numel && memcmp(l1->f32, c1->f32, (size_t)l1->numel * 4) == 0);
    OcrModel *again = tm_model("rec_ppocrv3_en_gtc_sar.json", NULL);
    ck_assert(ocr_pdparams_load_into(again, p, &r) == OCR_OK);
    ck_assert_int_eq(r.missing + r.unexpected + r.shape_mismatch + r.guidance, 0);
    ck_assert_int_eq(r.aliases, 16);
    ck_assert_int_eq(r.loaded, ocr_model_params(m)->count + ocr_model_stats(m)->count);
    ocr_pdparams_report_free(&r);
    ocr_model_free(again);
    ocr_pdparams_free(p);
    free(pb);
    ocr_model_free(m);
}
END_TEST

// ---- bad input -----------------------------------------------------------------------------------------------

static int temporaries_in(const char *dir) {
    DIR *d = opendir(dir);
    ck_assert(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

START_TEST(test_bad_input) {
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char target[1024], pd_target[1024];
    snprintf(target, sizeof target, "%s/export_victim.onnx", tmp);
    snprintf(pd_target, sizeof pd_target, "%s/export_victim.pdparams", tmp);
    ck_assert(ocr_write_file_atomic(target, "old", 3) == OCR_OK);
    ck_assert(ocr_write_file_atomic(pd_target, "old", 3) == OCR_OK);

    // A network the exporter does not know: refused by name, nothing written.
    OcrModel *svtr = tm_model("rec_svtr_tiny.json", NULL);
    ck_assert_int_eq(ocr_onnx_export(svtr, NULL, target, NULL), OCR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(ocr_last_error(), "SVTRNet") != NULL, "%s", ocr_last_error());
    ocr_model_free(svtr);

    // PPLCNetV3 at a height whose map is not 3..5 rows: the inference pool would be adaptive.
    OcrModel *v4 = small_v4();
    OcrArch arch = *ocr_model_arch(v4);
    arch.img_h = 32;
    OcrModel *v4_32;
    ck_assert(ocr_model_create(&v4_32, &arch) == OCR_OK);
    ck_assert_int_eq(ocr_onnx_export(v4_32, NULL, target, NULL), OCR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(ocr_last_error(), "2-row map") != NULL, "%s", ocr_last_error());
    ocr_model_free(v4_32);
    ocr_model_free(v4);

    // A path that cannot be written: an I/O error naming it.
    OcrModel *m = tm_model("rec_ppocrv3_en.json", NULL);
    const char *bad = "/nonexistent-ocrtrain-dir/out.onnx";
    ck_assert_int_eq(ocr_onnx_export(m, NULL, bad, NULL), OCR_ERR_IO);
    ck_assert_msg(strstr(ocr_last_error(), "/nonexistent-ocrtrain-dir/out.onnx") != NULL, "%s", ocr_last_error());
    ck_assert_int_eq(ocr_pdparams_write(m, "/nonexistent-ocrtrain-dir/out.pdparams", NULL), OCR_ERR_IO);

    // A write that fails at commit (a full disk, injected): the old file stays, no temporary is left.
    setenv("OCR_TEST_FAIL_WRITE", "export_victim", 1);
    ck_assert(ocr_onnx_export(m, NULL, target, NULL) != OCR_OK);
    ck_assert(ocr_pdparams_write(m, pd_target, NULL) != OCR_OK);
    unsetenv("OCR_TEST_FAIL_WRITE");
    size_t n;
    char *d;
    ck_assert(ocr_read_file(target, &d, &n) == OCR_OK);
    ck_assert(n == 3 && memcmp(d, "old", 3) == 0);
    free(d);
    ck_assert(ocr_read_file(pd_target, &d, &n) == OCR_OK);
    ck_assert(n == 3 && memcmp(d, "old", 3) == 0);
    free(d);
    ck_assert_int_eq(temporaries_in(tmp), 0);

    // And without the fault the files are replaced whole.
    ck_assert(ocr_onnx_export(m, NULL, target, NULL) == OCR_OK);
    ck_assert(ocr_read_file(target, &d, &n) == OCR_OK);
    OcrOnnxModel *om;
    ck_assert(ocr_onnx_parse(&om, (const uint8_t *)d, n, target) == OCR_OK);
    ocr_onnx_free(om);
    free(d);
    ocr_model_free(m);
    remove(target);
    remove(pd_target);
}
END_TEST

int main(void) {
    ocr_backends_init(1);
    Suite *s = suite_create("export");
    TCase *tc = tcase_create("export");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_sha256);
    tcase_add_test(tc, test_v4_fixture_onnx);
    tcase_add_test(tc, test_v4_fixture_pdparams);
    tcase_add_test(tc, test_unfuse);
    tcase_add_test(tc, test_v3_round_trips);
    tcase_add_test(tc, test_multihead);
    tcase_add_test(tc, test_bad_input);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}
