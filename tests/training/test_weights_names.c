// CTC-only weights and MultiHead models (models/weights_names.h, training/checkpoint.h
// ckpt_load_pretrained_names): the choice of the mapping (only a CTC-only file with a MultiHead
// model and the reverse; mixed names never guessed), a tiny PP-OCRv3 CTC network's weights loaded
// into its MultiHead (CTC + NRTR) form (every CTC tensor bit for bit, the NRTR branch as
// initialised, the counts of the report, equal logits in inference, the strict load of
// evaluation), the reverse (the NRTR branch dropped and counted), a shape mismatch refused naming
// the tensor and both shapes (model unchanged), a missing CTC tensor refused when strict and
// counted when not, the dictionary carry-over on the mapped head, and the same through .pdparams.
#include <check.h>
#include <math.h>

#include "core/safetensors.h"
#include "models/head_remap.h"
#include "models/model.h"
#include "models/pdparams_write.h"
#include "models/weights_names.h"
#include "tests/training/training_test_util.h"
#include "training/checkpoint.h"
#include "training/import.h"

static char *g_dir;
static char g_dict[600];

static void setup(void) {
    g_dir = at_tmpdir();
    snprintf(g_dict, sizeof g_dict, "%s/digits.txt", g_dir);
    at_write_text(g_dict, "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n");
}

#define MH "Architecture.Head.head_list"

// The tiny PP-OCRv3 pair: CTC-only (rec_ppocrv3_en) and MultiHead CTC + NRTR (rec_ppocrv3_en_gtc_nrtr),
// the same backbone and SVTR neck. extra: one more override (or NULL).
static OcrModel *tiny(int multi, uint64_t seed, const char *dict, const char *extra) {
    char cfg_path[1024], d[800], sd[64];
    snprintf(cfg_path, sizeof cfg_path, "%s/configs/%s", OCR_SOURCE_DIR,
             multi ? "rec_ppocrv3_en_gtc_nrtr.json" : "rec_ppocrv3_en.json");
    snprintf(d, sizeof d, "Global.character_dict_path=%s", dict ? dict : g_dict);
    snprintf(sd, sizeof sd, "Global.seed=%llu", (unsigned long long)seed);
    const char *ov[] = {"Architecture.Backbone.scale=0.25", "Global.use_space_char=false", "Global.max_text_length=6", d,
                        sd, MH ".1.NRTRHead.nrtr_dim=64", MH ".1.NRTRHead.num_decoder_layers=1", extra, NULL};
    OcrConfig *cfg;
    ck_assert_msg(ocr_config_load(&cfg, cfg_path) == OCR_OK, "%s", ocr_last_error());
    for (int i = 0; ov[i]; i++) {
        if (!multi && strncmp(ov[i], MH, strlen(MH)) == 0) continue;
        ck_assert_msg(ocr_config_apply_override(cfg, ov[i]) == OCR_OK, "%s: %s", ov[i], ocr_last_error());
    }
    OcrModel *m;
    ck_assert_msg(ocr_model_from_config(&m, cfg) == OCR_OK, "%s", ocr_last_error());
    ocr_config_free(cfg);
    return m;
}

// Tensor `name` of m (parameters, then statistics) as raw host bytes (malloc'd), or NULL.
static void *bytes_of(OcrModel *m, const char *name, size_t *n) {
    OcrParamTable *tabs[2] = {ocr_model_params(m), ocr_model_stats(m)};
    for (int k = 0; k < 2; k++) {
        int i = ocr_params_find(tabs[k], name);
        if (i < 0) continue;
        OcrTensor t = ocr_params_tensor(tabs[k], i);
        *n = ocr_tensor_bytes(&t);
        void *b = malloc(*n ? *n : 1);
        memcpy(b, t.data, *n);
        return b;
    }
    return NULL;
}

static int same_tensor(OcrModel *a, const char *na, OcrModel *b, const char *nb) {
    size_t la, lb;
    void *x = bytes_of(a, na, &la), *y = bytes_of(b, nb, &lb);
    ck_assert_msg(x && y, "%s / %s absent", na, nb);
    int same = la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

// The MultiHead name of a CTC-only name (neck.X -> head.ctc_encoder.X, head.X -> head.ctc_head.X).
static void multi_of(const char *ctc, char *out, size_t cap) {
    if (strncmp(ctc, "neck.", 5) == 0) snprintf(out, cap, "head.ctc_encoder.%s", ctc + 5);
    else if (strncmp(ctc, "head.", 5) == 0) snprintf(out, cap, "head.ctc_head.%s", ctc + 5);
    else snprintf(out, cap, "%s", ctc);
}

// Every tensor of the CTC model c equals its MultiHead counterpart in mh, bit for bit; returns how
// many were renamed (neck./head.).
static int check_ctc_branch_as(OcrModel *c, OcrModel *mh, int map) {
    OcrParamTable *tabs[2] = {ocr_model_params(c), ocr_model_stats(c)};
    int renamed = 0;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < tabs[k]->count; i++) {
            char mn[512];
            const char *n = tabs[k]->items[i].name;
            if (map) multi_of(n, mn, sizeof mn);
            else snprintf(mn, sizeof mn, "%s", n);
            renamed += strcmp(mn, n) != 0;
            ck_assert_msg(same_tensor(c, n, mh, mn), "%s (%s) differs", n, mn);
        }
    return renamed;
}

static int check_ctc_branch(OcrModel *c, OcrModel *mh) { return check_ctc_branch_as(c, mh, 1); }

// The guidance tensors of mh: each equal to ref's (same init); their count and values.
static int check_guidance(OcrModel *mh, OcrModel *ref, int64_t *values) {
    OcrParamTable *tabs[2] = {ocr_model_params(mh), ocr_model_stats(mh)};
    int n = 0;
    *values = 0;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < tabs[k]->count; i++) {
            const OcrParamInfo *p = &tabs[k]->items[i];
            if (!ocr_weights_names_is_guidance(p->name, NULL)) continue;
            if (ref) ck_assert_msg(same_tensor(mh, p->name, ref, p->name), "guidance %s changed", p->name);
            n++;
            *values += p->numel;
        }
    return n;
}

static int table_total(OcrModel *m) { return ocr_model_params(m)->count + ocr_model_stats(m)->count; }

static float *logits_of(OcrModel *m, int64_t *numel) {
    OcrTensor x;
    ck_assert(ocr_tensor_alloc(&x, OCR_F32, ocr_cpu(), 4, (int64_t[]){2, 32, 64, 3}, OCR_MEM_DATA) == OCR_OK);
    ocr_test_fill_uniform(x.data, ocr_tensor_numel(&x), 31, -1.0f, 1.0f);
    ck_assert_msg(ocr_model_forward(m, &x, 0) == OCR_OK, "%s", ocr_last_error());
    const OcrTensor *l = ocr_model_logits(m);
    *numel = ocr_tensor_numel(l);
    float *f = malloc((size_t)*numel * sizeof *f);
    ocr_tensor_to_f32(l, f);
    ocr_tensor_free(&x);
    return f;
}

// ---- the choice --------------------------------------------------------------------------------------

START_TEST(test_plan) {
    const char *ctc[] = {"backbone.conv1.weight", "neck.encoder.conv1.weight", "head.fc.weight", "head.fc.bias"};
    const char *multi[] = {"backbone.conv1.weight", "head.ctc_encoder.encoder.conv1.weight", "head.ctc_head.fc.weight",
                           "head.before_gtc.1.fc.weight", "head.gtc_head.embedding.embedding.weight"};
    const char *mixed[] = {"backbone.conv1.weight", "neck.encoder.conv1.weight", "head.ctc_head.fc.weight"};
    const char *nohead[] = {"backbone.conv1.weight"};
    const char *student[] = {"Student.backbone.conv1.weight", "Student.head.fc.weight", "Teacher.head.ctc_head.fc.weight"};
    OcrWeightsNames nm;
    ocr_weights_names_plan(&nm, ctc, 4, multi, 5, "");
    ck_assert_int_eq(nm.mode, OCR_NAMES_CTC_TO_MULTI);
    ck_assert_str_eq(nm.branch, "NRTR");
    ocr_weights_names_plan(&nm, multi, 5, ctc, 4, "");
    ck_assert_int_eq(nm.mode, OCR_NAMES_MULTI_TO_CTC);
    ocr_weights_names_plan(&nm, ctc, 4, ctc, 4, "");
    ck_assert_int_eq(nm.mode, OCR_NAMES_SAME);
    ocr_weights_names_plan(&nm, multi, 5, multi, 5, "");
    ck_assert_int_eq(nm.mode, OCR_NAMES_SAME);
    ocr_weights_names_plan(&nm, mixed, 3, multi, 5, "");  // never guessed
    ck_assert_int_eq(nm.mode, OCR_NAMES_SAME);
    ocr_weights_names_plan(&nm, mixed, 3, ctc, 4, "");
    ck_assert_int_eq(nm.mode, OCR_NAMES_SAME);
    ocr_weights_names_plan(&nm, nohead, 1, multi, 5, "");
    ck_assert_int_eq(nm.mode, OCR_NAMES_SAME);
    ocr_weights_names_plan(&nm, student, 3, multi, 5, "Student.");  // the Teacher's names are not looked at
    ck_assert_int_eq(nm.mode, OCR_NAMES_CTC_TO_MULTI);
    char out[256];
    ck_assert(ocr_weights_names_to_file(&nm, "head.ctc_head.fc.weight", out, sizeof out));
    ck_assert_str_eq(out, "Student.head.fc.weight");
    ck_assert(ocr_weights_names_to_file(&nm, "head.ctc_encoder.encoder.conv1.weight", out, sizeof out));
    ck_assert_str_eq(out, "Student.neck.encoder.conv1.weight");
    ck_assert(!ocr_weights_names_to_file(&nm, "head.gtc_head.embedding.embedding.weight", out, sizeof out));
    ck_assert(ocr_weights_names_to_model(&nm, "Student.head.fc.bias", out, sizeof out));
    ck_assert_str_eq(out, "head.ctc_head.fc.bias");
    ck_assert(!ocr_weights_names_to_model(&nm, "Teacher.head.fc.bias", out, sizeof out));
    ocr_weights_names_plan(&nm, multi, 5, ctc, 4, "");
    ck_assert(!ocr_weights_names_to_model(&nm, "head.before_gtc.1.fc.weight", out, sizeof out));
    ck_assert(ocr_weights_names_to_model(&nm, "head.ctc_encoder.encoder.conv1.weight", out, sizeof out));
    ck_assert_str_eq(out, "neck.encoder.conv1.weight");
    ck_assert(ocr_weights_names_to_file(&nm, "head.fc.weight", out, sizeof out));
    ck_assert_str_eq(out, "head.ctc_head.fc.weight");
}
END_TEST

// ---- loads ---------------------------------------------------------------------------------------------

START_TEST(test_ctc_into_multihead) {
    OcrModel *c = tiny(0, 1, NULL, NULL), *mh = tiny(1, 2, NULL, NULL), *ref = tiny(1, 2, NULL, NULL);
    char w[700];
    snprintf(w, sizeof w, "%s/ctc.safetensors", g_dir);
    ck_assert(ocr_model_save_weights(c, w) == OCR_OK);
    OcrLoadReport r;
    OcrWeightsNames nm;
    ck_assert_msg(ckpt_load_pretrained_names(mh, w, NULL, 1, &r, &nm) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(nm.mode, OCR_NAMES_CTC_TO_MULTI);
    ck_assert_msg(ocr_load_report_complete(&r), "%d missing (%s), %d mismatched, %d unexpected", r.missing,
                  r.first_missing, r.mismatched, r.unexpected);
    ck_assert_int_eq(r.loaded, table_total(c));
    int renamed = check_ctc_branch(c, mh);
    ck_assert_int_gt(renamed, 0);
    ck_assert_int_eq(nm.renamed, renamed);
    int64_t values;
    int fresh = check_guidance(mh, ref, &values);
    ck_assert_int_gt(fresh, 0);
    ck_assert_int_eq(nm.fresh, fresh);
    ck_assert_int_eq(nm.fresh_values, values);
    ck_assert_int_eq(fresh + r.loaded, table_total(mh));
    ck_assert_str_eq(nm.branch, "NRTR");
    char d[1024];
    ck_assert(strstr(ocr_weights_names_describe(&nm, d, sizeof d), "NRTR guidance branch"));
    // Inference: the MultiHead model computes what the CTC model does.
    int64_t n1, n2;
    float *l1 = logits_of(c, &n1), *l2 = logits_of(mh, &n2);
    ck_assert_int_eq(n1, n2);
    for (int64_t i = 0; i < n1; i++) ck_assert_msg(l1[i] == l2[i], "logit %lld: %g vs %g", (long long)i, (double)l1[i], (double)l2[i]);
    free(l1);
    free(l2);
    // The strict load of evaluation (infer_model_load) maps too.
    OcrModel *ev = tiny(1, 3, NULL, NULL), *evref = tiny(1, 3, NULL, NULL);
    OcrWeightsNames en;
    ck_assert_msg(ocr_model_load_weights_mapped(ev, w, &en) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(en.mode, OCR_NAMES_CTC_TO_MULTI);
    ck_assert_int_eq(en.fresh, fresh);
    check_ctc_branch(c, ev);
    check_guidance(ev, evref, &values);
    // Plain files still load by plain names.
    OcrModel *c2 = tiny(0, 5, NULL, NULL);
    ck_assert_msg(ocr_model_load_weights_mapped(c2, w, &en) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(en.mode, OCR_NAMES_SAME);
    check_ctc_branch_as(c, c2, 0);
    ocr_model_free(c);
    ocr_model_free(c2);
    ocr_model_free(mh);
    ocr_model_free(ref);
    ocr_model_free(ev);
    ocr_model_free(evref);
}
END_TEST

START_TEST(test_multihead_into_ctc) {
    OcrModel *mh = tiny(1, 4, NULL, NULL), *c = tiny(0, 6, NULL, NULL);
    char w[700];
    snprintf(w, sizeof w, "%s/mh.safetensors", g_dir);
    ck_assert(ocr_model_save_weights(mh, w) == OCR_OK);
    OcrLoadReport r;
    OcrWeightsNames nm;
    ck_assert_msg(ckpt_load_pretrained_names(c, w, NULL, 1, &r, &nm) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(nm.mode, OCR_NAMES_MULTI_TO_CTC);
    ck_assert(ocr_load_report_complete(&r));
    ck_assert_int_eq(r.loaded, table_total(c));
    int renamed = check_ctc_branch(c, mh);
    ck_assert_int_eq(nm.renamed, renamed);
    int64_t values;
    int guidance = check_guidance(mh, NULL, &values);
    ck_assert_int_eq(nm.dropped, guidance);
    ck_assert_int_eq(nm.dropped_values, values);
    char d[1024];
    ck_assert(strstr(ocr_weights_names_describe(&nm, d, sizeof d), "dropped"));
    // Evaluation's strict load: the same.
    OcrModel *c2 = tiny(0, 7, NULL, NULL);
    ck_assert_msg(ocr_model_load_weights_mapped(c2, w, &nm) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(nm.dropped, guidance);
    check_ctc_branch(c2, mh);
    ocr_model_free(mh);
    ocr_model_free(c);
    ocr_model_free(c2);
}
END_TEST

START_TEST(test_shape_mismatch) {
    // The CTC network with another SVTR hidden size: its neck tensors do not fit.
    OcrModel *c = tiny(0, 1, NULL, "Architecture.Neck.hidden_dims=96"), *mh = tiny(1, 2, NULL, NULL),
             *ref = tiny(1, 2, NULL, NULL);
    char w[700];
    snprintf(w, sizeof w, "%s/ctc96.safetensors", g_dir);
    ck_assert(ocr_model_save_weights(c, w) == OCR_OK);
    OcrLoadReport r;
    ck_assert_int_eq(ckpt_load_pretrained_names(mh, w, NULL, 1, &r, NULL), OCR_ERR_FORMAT);
    const char *e = ocr_last_error();
    ck_assert_msg(strstr(e, "head.ctc_encoder.encoder.") && strstr(e, "in the file") && strstr(e, "in the model") &&
                      strstr(e, "96"), "%s", e);
    // Nothing changed on refusal.
    OcrParamTable *t = ocr_model_params(mh);
    for (int i = 0; i < t->count; i++) ck_assert(same_tensor(mh, t->items[i].name, ref, t->items[i].name));
    // The strict load of evaluation names the file's tensor, the model's and both shapes.
    ck_assert_int_eq(ocr_model_load_weights_mapped(mh, w, NULL), OCR_ERR_FORMAT);
    e = ocr_last_error();
    ck_assert_msg(strstr(e, "has shape (") && strstr(e, "expects (") && strstr(e, "neck.encoder.") &&
                      strstr(e, "head.ctc_encoder.encoder."), "%s", e);
    for (int i = 0; i < t->count; i++) ck_assert(same_tensor(mh, t->items[i].name, ref, t->items[i].name));
    ocr_model_free(c);
    ocr_model_free(mh);
    ocr_model_free(ref);
}
END_TEST

START_TEST(test_missing_ctc_tensor) {
    // The CTC weights without head.fc.bias.
    OcrModel *c = tiny(0, 1, NULL, NULL), *mh = tiny(1, 2, NULL, NULL);
    OcrParamTable *tabs[2] = {ocr_model_params(c), ocr_model_stats(c)};
    int n = table_total(c), k = 0;
    OcrNamedTensor *ts = calloc((size_t)n, sizeof *ts);
    for (int q = 0; q < 2; q++)
        for (int i = 0; i < tabs[q]->count; i++) {
            const OcrParamInfo *p = &tabs[q]->items[i];
            if (strcmp(p->name, "head.fc.bias") == 0) continue;
            OcrTensor v = ocr_params_tensor(tabs[q], i);
            ts[k] = (OcrNamedTensor){.name = p->name, .dtype = p->dtype, .ndim = p->ndim, .data = v.data};
            memcpy(ts[k].shape, p->shape, sizeof ts[k].shape);
            k++;
        }
    ck_assert_int_eq(k, n - 1);
    char w[700];
    snprintf(w, sizeof w, "%s/nobias.safetensors", g_dir);
    ck_assert(ocr_safetensors_write(w, ts, k, NULL, 0) == OCR_OK);
    free(ts);
    OcrLoadReport r;
    OcrWeightsNames nm;
    ck_assert_int_eq(ckpt_load_pretrained_names(mh, w, NULL, 1, &r, &nm), OCR_ERR_FORMAT);
    ck_assert_msg(strstr(ocr_last_error(), "head.ctc_head.fc.bias"), "%s", ocr_last_error());
    ck_assert_int_eq(ocr_model_load_weights_mapped(mh, w, NULL), OCR_ERR_FORMAT);
    ck_assert_msg(strstr(ocr_last_error(), "head.fc.bias"), "%s", ocr_last_error());
    // Not strict: the rest loads, one missing, the guidance branch fresh.
    ck_assert_msg(ckpt_load_pretrained_names(mh, w, NULL, 0, &r, &nm) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(r.missing, 1);
    ck_assert_str_eq(r.first_missing, "head.ctc_head.fc.bias");
    ck_assert_int_eq(r.loaded, n - 1);
    ck_assert_int_gt(nm.fresh, 0);
    ocr_model_free(c);
    ocr_model_free(mh);
}
END_TEST

START_TEST(test_dictionary_on_mapped_head) {
    // CTC weights for 0-9 with their recorded dictionary, into a MultiHead model for x,9..1.
    char db[600], w[700], side[700];
    snprintf(db, sizeof db, "%s/b.txt", g_dir);
    at_write_text(db, "x\n9\n8\n7\n6\n5\n4\n3\n2\n1\n");
    OcrModel *c = tiny(0, 1, NULL, NULL), *mh = tiny(1, 2, db, NULL), *ref = tiny(1, 2, db, NULL);
    snprintf(w, sizeof w, "%s/ctcd.safetensors", g_dir);
    snprintf(side, sizeof side, "%s/ctcd.dict.txt", g_dir);
    ck_assert(ocr_model_save_weights(c, w) == OCR_OK);
    at_write_text(side, "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n");
    OcrLoadReport r;
    OcrWeightsNames nm;
    ck_assert_msg(ckpt_load_pretrained_names(mh, w, NULL, 1, &r, &nm) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(nm.mode, OCR_NAMES_CTC_TO_MULTI);
    ck_assert(r.dict.applied);
    ck_assert_int_eq(r.dict.tensors, 2);  // head.ctc_head.fc weight and bias; NRTR's are not in the file
    ck_assert(r.dict.kept == 9 && r.dict.added == 1 && r.dict.dropped == 1);
    // Classifier columns: new class k >= 2 is digit 11 - k, whose old id is 12 - k; blank stays.
    size_t la, lb;
    float *wa = bytes_of(c, "head.fc.weight", &la), *wb = bytes_of(mh, "head.ctc_head.fc.weight", &lb);
    ck_assert_int_eq(la, lb);
    int64_t in = (int64_t)(la / sizeof(float)) / 11;
    for (int64_t i = 0; i < in; i++) {
        ck_assert(wb[i * 11] == wa[i * 11]);
        for (int k = 2; k <= 10; k++) ck_assert(wb[i * 11 + k] == wa[i * 11 + 12 - k]);
    }
    free(wa);
    free(wb);
    int64_t values;
    check_guidance(mh, ref, &values);  // NRTR (its per-class tensors too) as initialised
    unlink(side);
    ocr_model_free(c);
    ocr_model_free(mh);
    ocr_model_free(ref);
}
END_TEST

START_TEST(test_pdparams_both_ways) {
    OcrModel *c = tiny(0, 1, NULL, NULL), *mh = tiny(1, 2, NULL, NULL), *ref = tiny(1, 2, NULL, NULL);
    char pd[700];
    OcrPdWriteInfo info;
    snprintf(pd, sizeof pd, "%s/ctc.pdparams", g_dir);
    ck_assert_msg(ocr_pdparams_write(c, pd, &info) == OCR_OK, "%s", ocr_last_error());
    OcrLoadReport r;
    OcrWeightsNames nm;
    ck_assert_msg(ckpt_load_pretrained_names(mh, pd, NULL, 1, &r, &nm) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(nm.mode, OCR_NAMES_CTC_TO_MULTI);
    ck_assert(ocr_load_report_complete(&r));
    check_ctc_branch(c, mh);
    int64_t values;
    int fresh = check_guidance(mh, ref, &values);
    ck_assert_int_eq(nm.fresh, fresh);
    ck_assert_int_eq(nm.fresh_values, values);
    // MultiHead .pdparams into the CTC network: the NRTR branch dropped and counted.
    OcrModel *mh2 = tiny(1, 9, NULL, NULL), *c2 = tiny(0, 3, NULL, NULL);
    snprintf(pd, sizeof pd, "%s/mh.pdparams", g_dir);
    ck_assert_msg(ocr_pdparams_write(mh2, pd, &info) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(ckpt_load_pretrained_names(c2, pd, NULL, 1, &r, &nm) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(nm.mode, OCR_NAMES_MULTI_TO_CTC);
    ck_assert(ocr_load_report_complete(&r));
    check_ctc_branch(c2, mh2);
    ck_assert_int_eq(nm.dropped, check_guidance(mh2, NULL, &values));
    ck_assert_int_eq(nm.dropped_values, values);
    ocr_model_free(c);
    ocr_model_free(mh);
    ocr_model_free(ref);
    ocr_model_free(mh2);
    ocr_model_free(c2);
}
END_TEST

// PaddleOCR 3.x's training-form checkpoint (MultiHead, NRTR included) through `ocrtrain import
// --pdparams FILE -c CFG`: PP-OCRv6 tiny's config (its Conv1D guide layer written as Paddle's
// (OC, C/g, K)), a small dictionary so the file written at test time stays small. Every tensor
// lands bit for bit; a CTC-only checkpoint into the MultiHead config is refused, nothing written.
static OcrConfig *v6_tiny_cfg(int ctc) {
    char path[1024], d[800];
    snprintf(path, sizeof path, "%s/configs/%s", OCR_SOURCE_DIR, ctc ? "rec_ppocrv6_tiny_ctc.json" : "rec_ppocrv6_tiny.json");
    OcrConfig *cfg;
    ck_assert_msg(ocr_config_load(&cfg, path) == OCR_OK, "%s", ocr_last_error());
    snprintf(d, sizeof d, "Global.character_dict_path=%s", g_dict);
    const char *ov[] = {d, "Global.max_text_length=6", MH ".1.NRTRHead.nrtr_dim=64", MH ".1.NRTRHead.num_decoder_layers=1",
                        "Global.seed=5", NULL};
    for (int i = 0; ov[i]; i++) {
        if (ctc && strncmp(ov[i], MH, strlen(MH)) == 0) continue;
        ck_assert_msg(ocr_config_apply_override(cfg, ov[i]) == OCR_OK, "%s: %s", ov[i], ocr_last_error());
    }
    return cfg;
}

START_TEST(test_import_pdparams_config) {
    OcrConfig *cfg = v6_tiny_cfg(0);
    OcrModel *src;
    ck_assert_msg(ocr_model_from_config(&src, cfg) == OCR_OK, "%s", ocr_last_error());
    // Non-trivial statistics, so a swapped or skipped tensor shows.
    OcrParamTable *st = ocr_model_stats(src);
    for (int i = 0; i < st->count; i++) {
        OcrTensor t = ocr_params_tensor(st, i);
        float *f = t.data;
        for (int64_t k = 0; k < st->items[i].numel; k++) f[k] = 0.5f + 0.001f * (float)((k * 7 + i) % 97);
    }
    char pd[700], out[700], side[700];
    snprintf(pd, sizeof pd, "%s/v6tiny_train.pdparams", g_dir);
    snprintf(out, sizeof out, "%s/v6tiny.safetensors", g_dir);
    snprintf(side, sizeof side, "%s/v6tiny.dict.txt", g_dir);
    OcrPdWriteInfo info;
    ck_assert_msg(ocr_pdparams_write(src, pd, &info) == OCR_OK, "%s", ocr_last_error());
    ImportPdparams r;
    ck_assert_msg(import_pdparams_config(&r, pd, cfg, "rec_ppocrv6_tiny.json", out) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(r.rep.loaded, table_total(src));
    ck_assert_int_eq(r.rep.missing + r.rep.unexpected + r.rep.guidance + r.rep.shape_mismatch, 0);
    ck_assert_str_eq(r.dict_path, side);
    import_pdparams_free(&r);
    char *text;
    size_t size;
    ck_assert(ocr_read_file(side, &text, &size) == OCR_OK);
    ck_assert_str_eq(text, "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n");
    free(text);
    // Every tensor, the guide layer's Conv1Ds and the NRTR branch included, equal bit for bit.
    OcrModel *back;
    ck_assert(ocr_model_from_config(&back, cfg) == OCR_OK);
    ck_assert_msg(ocr_model_load_weights(back, out) == OCR_OK, "%s", ocr_last_error());
    OcrParamTable *tabs[2] = {ocr_model_params(src), ocr_model_stats(src)};
    int nrtr = 0;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < tabs[k]->count; i++) {
            const char *n = tabs[k]->items[i].name;
            ck_assert_msg(same_tensor(src, n, back, n), "%s differs after the import", n);
            nrtr += ocr_weights_names_is_guidance(n, NULL);
        }
    ck_assert_int_gt(nrtr, 0);
    ck_assert_int_ge(ocr_params_find(ocr_model_params(src), "head.ctc_head.guide_layer.0.weight"), 0);
    // A CTC-only checkpoint (no NRTR) is not this config's: refused, nothing written.
    OcrConfig *ccfg = v6_tiny_cfg(1);
    OcrModel *ctc;
    ck_assert_msg(ocr_model_from_config(&ctc, ccfg) == OCR_OK, "%s", ocr_last_error());
    snprintf(pd, sizeof pd, "%s/v6tiny_ctc.pdparams", g_dir);
    ck_assert(ocr_pdparams_write(ctc, pd, &info) == OCR_OK);
    snprintf(out, sizeof out, "%s/refused.safetensors", g_dir);
    ck_assert_int_eq(import_pdparams_config(&r, pd, cfg, "rec_ppocrv6_tiny.json", out), OCR_ERR_FORMAT);
    ck_assert_msg(strstr(ocr_last_error(), "not in the file") && strstr(ocr_last_error(), "head.gtc_head."), "%s",
                  ocr_last_error());
    import_pdparams_free(&r);
    ck_assert(!ocr_file_exists(out));
    // The CTC-only checkpoint into its own config still imports (guide layer Conv1Ds included).
    ck_assert_msg(import_pdparams_config(&r, pd, ccfg, "rec_ppocrv6_tiny_ctc.json", out) == OCR_OK, "%s",
                  ocr_last_error());
    ck_assert_int_eq(r.rep.loaded, table_total(ctc));
    import_pdparams_free(&r);
    ocr_model_free(src);
    ocr_model_free(back);
    ocr_model_free(ctc);
    ocr_config_free(cfg);
    ocr_config_free(ccfg);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("weights_names");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_plan);
    tcase_add_test(tc, test_ctc_into_multihead);
    tcase_add_test(tc, test_multihead_into_ctc);
    tcase_add_test(tc, test_shape_mismatch);
    tcase_add_test(tc, test_missing_ctc_tensor);
    tcase_add_test(tc, test_dictionary_on_mapped_head);
    tcase_add_test(tc, test_pdparams_both_ways);
    tcase_add_test(tc, test_import_pdparams_config);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(suite()); }
