// Fine-tuning with another dictionary (training/checkpoint.h ckpt_load_pretrained_dict,
// models/head_remap.h): the class map (occurrence by occurrence, blank to blank), one tensor's
// rebuild (kept entries bit for bit, specials in place, new entries from the init rule), the rule
// table's completeness (two networks differing only in dictionary size differ only in the tensors
// it names: CTC, CTC with mid_channels, MultiHead NRTR and SAR), and
// whole loads of a tiny network: weights with dictionary A and their recorded dictionary into a
// model for dictionary B (kept, new, dropped; every kept row equal to the old one bit for bit,
// every other tensor as loaded, the report's counts and names, the new class never the greedy
// choice before training), MultiHead NRTR and SAR heads, a real mismatch beside the dictionary's, a
// .pdparams with Global.pretrained_dict_path, no known dictionary with another class count (the
// error names the key), a recorded dictionary that fits no head, and a fine-tune through
// `ocrtrain train` whose dictionary adds one character to the checkpoint's.
#include <check.h>
#include <math.h>

#include "cli/commands.h"
#include "models/head_remap.h"
#include "models/model.h"
#include "models/pdparams_write.h"
#include "tests/training/training_test_util.h"
#include "training/checkpoint.h"

static char *g_dir;
static char g_cfg[512];  // the tiny digits config (dictionary dir/dict.txt: 0-9)

static void setup_data(void) { g_dir = at_setup_digits(g_cfg, sizeof g_cfg, "\"epoch_num\": 1,"); }

// ---- helpers ------------------------------------------------------------------------------------------

static void write_dict(const char *name, const char *text, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s", g_dir, name);
    at_write_text(path, text);
}

// A model from a config file with overrides (NULL-terminated).
static OcrModel *model_from(const char *cfg_path, const char *const *ov) {
    OcrConfig *cfg;
    ck_assert_msg(ocr_config_load(&cfg, cfg_path) == OCR_OK, "%s", ocr_last_error());
    for (int i = 0; ov && ov[i]; i++)
        ck_assert_msg(ocr_config_apply_override(cfg, ov[i]) == OCR_OK, "%s: %s", ov[i], ocr_last_error());
    OcrModel *m;
    ck_assert_msg(ocr_model_from_config(&m, cfg) == OCR_OK, "%s", ocr_last_error());
    ocr_config_free(cfg);
    return m;
}

static OcrModel *tiny_model(const char *dict, int space, uint64_t seed) {
    char d[1024], s[64], sd[64];
    snprintf(d, sizeof d, "Global.character_dict_path=%s", dict);
    snprintf(s, sizeof s, "Global.use_space_char=%s", space ? "true" : "false");
    snprintf(sd, sizeof sd, "Global.seed=%llu", (unsigned long long)seed);
    const char *ov[] = {d, s, sd, NULL};
    return model_from(g_cfg, ov);
}

// A tensor of the model (parameters, then statistics) as f32 (malloc'd); *shape filled.
static float *tensor_of(OcrModel *m, const char *name, int64_t shape[OCR_MAX_DIMS], int *ndim) {
    OcrParamTable *tabs[2] = {ocr_model_params(m), ocr_model_stats(m)};
    for (int k = 0; k < 2; k++) {
        int i = ocr_params_find(tabs[k], name);
        if (i < 0) continue;
        const OcrParamInfo *p = &tabs[k]->items[i];
        OcrTensor t = ocr_params_tensor(tabs[k], i);
        float *f = malloc((size_t)p->numel * sizeof *f);
        ocr_tensor_to_f32(&t, f);
        if (shape) memcpy(shape, p->shape, sizeof p->shape);
        if (ndim) *ndim = p->ndim;
        return f;
    }
    ck_abort_msg("no tensor %s", name);
    return NULL;
}

// Checks model b's per-class tensor `name` against model a's: entry c of b along `axis` equals
// entry from[c] of a bit for bit (from[c] >= 0), or the init rule (mean of a's character entries
// [pre, pre + nchars_a), lowered by ln(1 + added) for a bias) where from[c] < 0.
static void check_class_tensor(OcrModel *a, OcrModel *b, const char *name, const int *from, int pre, int nchars_a,
                               int added) {
    OcrClassTensor ct;
    ck_assert_msg(ocr_head_class_tensor(name, &ct), "%s is not a per-class tensor", name);
    int64_t sa[OCR_MAX_DIMS], sb[OCR_MAX_DIMS];
    int na, nb;
    float *va = tensor_of(a, name, sa, &na), *vb = tensor_of(b, name, sb, &nb);
    ck_assert_int_eq(na, nb);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < ct.axis; d++) outer *= sb[d];
    for (int d = ct.axis + 1; d < nb; d++) inner *= sb[d];
    const int64_t la = sa[ct.axis], lb = sb[ct.axis];
    for (int64_t c = 0; c < lb; c++)
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) {
                float got = vb[(o * lb + c) * inner + i];
                if (from[c] >= 0) {
                    float want = va[(o * la + from[c]) * inner + i];
                    ck_assert_msg(memcmp(&got, &want, sizeof got) == 0, "%s: entry %lld (from %d) [%lld, %lld]: %.9g, "
                                  "the weights' %.9g", name, (long long)c, from[c], (long long)o, (long long)i,
                                  (double)got, (double)want);
                } else {
                    double mean = 0;
                    for (int k = pre; k < pre + nchars_a; k++) mean += va[(o * la + k) * inner + i];
                    mean = mean / nchars_a - (ct.bias ? log(1.0 + added) : 0.0);
                    ck_assert_msg(fabs(got - mean) <= 1e-6 * (1 + fabs(mean)), "%s: new entry %lld: %.9g, the rule gives %.9g",
                                  name, (long long)c, (double)got, mean);
                }
            }
    free(va);
    free(vb);
}

// Every tensor of b that is not per-class equals a's bit for bit.
static void check_rest_equal(OcrModel *a, OcrModel *b) {
    OcrParamTable *ta[2] = {ocr_model_params(a), ocr_model_stats(a)}, *tb[2] = {ocr_model_params(b), ocr_model_stats(b)};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < tb[k]->count; i++) {
            OcrClassTensor ct;
            const OcrParamInfo *p = &tb[k]->items[i];
            if (ocr_head_class_tensor(p->name, &ct)) continue;
            int j = ocr_params_find(ta[k], p->name);
            ck_assert_int_ge(j, 0);
            OcrTensor x = ocr_params_tensor(ta[k], j), y = ocr_params_tensor(tb[k], i);
            ck_assert_msg(memcmp(x.data, y.data, ocr_tensor_bytes(&x)) == 0, "%s differs from the weights'", p->name);
        }
}

// Inference logits of the model on fixed random images (B 2, 32×64), malloc'd; *t, *c their shape.
static float *logits_of(OcrModel *m, int64_t *t, int64_t *c) {
    OcrTensor x;
    ck_assert(ocr_tensor_alloc(&x, OCR_F32, ocr_cpu(), 4, (int64_t[]){2, 32, 64, 3}, OCR_MEM_DATA) == OCR_OK);
    ocr_test_fill_uniform(x.data, ocr_tensor_numel(&x), 31, -1.0f, 1.0f);
    ck_assert_msg(ocr_model_forward(m, &x, 0) == OCR_OK, "%s", ocr_last_error());
    const OcrTensor *l = ocr_model_logits(m);
    *t = l->shape[1];
    *c = l->shape[2];
    float *f = malloc((size_t)ocr_tensor_numel(l) * sizeof *f);
    ocr_tensor_to_f32(l, f);
    ocr_tensor_free(&x);
    return f;
}

static int same_shape_of(const OcrParamInfo *p, const OcrParamInfo *q) {
    if (p->ndim != q->ndim) return 0;
    for (int d = 0; d < p->ndim; d++)
        if (p->shape[d] != q->shape[d]) return 0;
    return 1;
}

// ---- the class map and one tensor ---------------------------------------------------------------------

START_TEST(test_class_map) {
    // Duplicates match occurrence by occurrence (en_dict's " " line and use_space_char's space).
    const char *old[] = {"blank", "a", " ", "b", "c", " "};
    const char *nw[] = {"blank", "b", " ", "a", "\xE2\x82\xAC", " ", " "};
    OcrClassMap map;
    ck_assert(ocr_class_map_build(&map, old, 6, nw, 7) == OCR_OK);
    const int want[] = {0, 3, 2, 1, -1, 5, -1};
    for (int j = 0; j < 7; j++) ck_assert_int_eq(map.src[j], want[j]);
    ck_assert_int_eq(map.kept, 4);
    ck_assert_int_eq(map.added, 2);
    ck_assert_int_eq(map.dropped, 1);  // c
    ck_assert_int_eq(map.moved, 2);    // b, a
    ck_assert(!ocr_class_map_is_identity(&map));
    OcrHeadRemapReport r;
    memset(&r, 0, sizeof r);
    ocr_head_remap_report_fill(&r, &map, old, nw);
    ck_assert_str_eq(r.kept_list, "b <space> a <space>");
    ck_assert_str_eq(r.added_list, "\xE2\x82\xAC <space>");
    ck_assert_str_eq(r.dropped_list, "c");
    ocr_class_map_free(&map);
    ck_assert(ocr_class_map_build(&map, old, 6, old, 6) == OCR_OK);
    ck_assert(ocr_class_map_is_identity(&map));
    ocr_class_map_free(&map);
}
END_TEST

START_TEST(test_remap_tensor) {
    // SAR's embedding layout (characters first, then three specials), rows of 2: old classes
    // blank a b c (3 characters), new blank c x a.
    const char *old[] = {"blank", "a", "b", "c"};
    const char *nw[] = {"blank", "c", "x", "a"};
    OcrClassMap map;
    ck_assert(ocr_class_map_build(&map, old, 4, nw, 4) == OCR_OK);
    OcrClassTensor emb;
    ck_assert(ocr_head_class_tensor("head.sar_head.decoder.embedding.weight", &emb));
    ck_assert(emb.axis == 0 && emb.pre == 0 && emb.post == 3);
    float w[12], out[12];
    for (int i = 0; i < 12; i++) w[i] = (float)(i + 1), out[i] = -99.0f;
    ck_assert(ocr_head_remap_tensor(&emb, &map, w, 2, (int64_t[]){6, 2}, out, (int64_t[]){6, 2}) == OCR_OK);
    const float want[12] = {5, 6, 3, 4, 1, 2, 7, 8, 9, 10, 11, 12};  // c, mean(a b c), a, specials
    for (int i = 0; i < 12; i++) ck_assert_msg(out[i] == want[i], "%d: %g, want %g", i, (double)out[i], (double)want[i]);
    // The CTC bias (blank first): the new entry is the characters' mean lowered by ln 2.
    OcrClassTensor b;
    ck_assert(ocr_head_class_tensor("head.fc.bias", &b));
    float bo[4] = {10, 1, 2, 3}, bn[4] = {0};
    ck_assert(ocr_head_remap_tensor(&b, &map, bo, 1, (int64_t[]){4}, bn, (int64_t[]){4}) == OCR_OK);
    ck_assert(bn[0] == 10 && bn[1] == 3 && bn[3] == 1);
    ck_assert_msg(fabsf(bn[2] - (float)(2.0 - log(2.0))) < 1e-6f, "%g", (double)bn[2]);
    // A shape the map does not explain is refused, naming the tensor.
    ck_assert_int_eq(ocr_head_remap_tensor(&b, &map, bo, 1, (int64_t[]){5}, bn, (int64_t[]){4}), OCR_ERR_FORMAT);
    ck_assert(strstr(ocr_last_error(), "head.fc.bias"));
    ocr_class_map_free(&map);
}
END_TEST

// ---- whole loads ------------------------------------------------------------------------------------

// Weights of the tiny network with dictionary A = 0-9 and its recorded dictionary (the sidecar
// name `ocrtrain import` writes), loaded strictly into the network for B = 9 8 x 7 6 5 4 2 1 0
// (3 dropped, x new, the rest reordered).
START_TEST(test_safetensors_recorded_dict) {
    char da[700], db[700], w[700], side[700];
    write_dict("a.txt", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n", da, sizeof da);
    write_dict("b.txt", "9\n8\nx\n7\n6\n5\n4\n2\n1\n0\n", db, sizeof db);
    OcrModel *a = tiny_model(da, 0, 5), *b = tiny_model(db, 0, 6);
    snprintf(w, sizeof w, "%s/a.safetensors", g_dir);
    snprintf(side, sizeof side, "%s/a.dict.txt", g_dir);
    ck_assert_msg(ocr_model_save_weights(a, w) == OCR_OK, "%s", ocr_last_error());
    at_write_text(side, "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n");
    OcrLoadReport r;
    ck_assert_msg(ckpt_load_pretrained_dict(b, w, NULL, 1, &r) == OCR_OK, "%s", ocr_last_error());
    ck_assert(ocr_load_report_complete(&r));
    ck_assert_int_eq(r.loaded, ocr_model_params(b)->count + ocr_model_stats(b)->count);
    ck_assert(r.dict.applied);
    ck_assert_int_eq(r.dict.old_classes, 11);
    ck_assert_int_eq(r.dict.new_classes, 11);
    ck_assert_int_eq(r.dict.kept, 9);
    ck_assert_int_eq(r.dict.added, 1);
    ck_assert_int_eq(r.dict.dropped, 1);
    ck_assert_int_eq(r.dict.tensors, 2);
    ck_assert_str_eq(r.dict.added_list, "x");
    ck_assert_str_eq(r.dict.dropped_list, "3");
    ck_assert_str_eq(r.dict.kept_list, "9 8 7 6 5 4 2 1 0");
    ck_assert_str_eq(r.dict.dict_source, side);
    char d[2400];
    ocr_head_remap_describe(&r.dict, d, sizeof d);
    ck_assert_msg(strstr(d, "9 characters kept") && strstr(d, "1 new") && strstr(d, "1 dropped") &&
                      strstr(d, "new (1): x") && strstr(d, "dropped (1): 3"),
                  "%s", d);
    // CTC: blank 0; b's class c is a's class of the same digit; x (b's 3) is new.
    const int from[11] = {0, 10, 9, -1, 8, 7, 6, 5, 3, 2, 1};
    check_class_tensor(a, b, "head.fc.weight", from, 1, 10, 1);
    check_class_tensor(a, b, "head.fc.bias", from, 1, 10, 1);
    check_rest_equal(a, b);
    ocr_model_free(b);
    // Another class count (one character more): the strict load that refused before loads.
    char dc[700];
    write_dict("c.txt", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n\xE2\x82\xAC\n", dc, sizeof dc);
    OcrModel *c = tiny_model(dc, 0, 7);
    ck_assert_msg(ckpt_load_pretrained_dict(c, w, NULL, 1, &r) == OCR_OK, "%s", ocr_last_error());
    ck_assert(ocr_load_report_complete(&r) && r.dict.applied);
    ck_assert(r.dict.kept == 10 && r.dict.added == 1 && r.dict.dropped == 0 && r.dict.moved == 0);
    ck_assert_str_eq(r.dict.added_list, "\xE2\x82\xAC");
    const int from_c[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, -1};
    check_class_tensor(a, c, "head.fc.weight", from_c, 1, 10, 1);
    check_class_tensor(a, c, "head.fc.bias", from_c, 1, 10, 1);
    check_rest_equal(a, c);
    // The init rule's point: the new class is never the best one at any frame, so greedy decoding
    // is the weights' own until training moves it (its logit is the characters' mean − ln 2).
    int64_t ta, ca, tc, cc;
    float *la = logits_of(a, &ta, &ca), *lc = logits_of(c, &tc, &cc);
    ck_assert(ta == tc && ca == 11 && cc == 12);
    for (int64_t f = 0; f < 2 * ta; f++) {
        int besta = 0, bestc = 0;
        for (int k = 1; k < 11; k++) besta = la[f * ca + k] > la[f * ca + besta] ? k : besta;
        for (int k = 1; k < 12; k++) bestc = lc[f * cc + k] > lc[f * cc + bestc] ? k : bestc;
        ck_assert_msg(besta == bestc, "frame %lld: class %d before, %d after", (long long)f, besta, bestc);
        double mean = 0;
        for (int k = 1; k < 11; k++) mean += lc[f * cc + k];
        mean = mean / 10 - log(2.0);
        ck_assert_msg(fabs(lc[f * cc + 11] - mean) < 1e-4, "frame %lld: new logit %g, the rule %g", (long long)f,
                      (double)lc[f * cc + 11], mean);
    }
    free(la);
    free(lc);
    ocr_model_free(c);
    // The same dictionary: nothing to rebuild, nothing reported.
    OcrModel *a2 = tiny_model(da, 0, 8);
    ck_assert(ckpt_load_pretrained_dict(a2, w, NULL, 1, &r) == OCR_OK);
    ck_assert(ocr_load_report_complete(&r) && !r.dict.applied);
    check_rest_equal(a, a2);
    ocr_model_free(a2);
    ocr_model_free(a);
}
END_TEST

// No dictionary known and another class count: strict refuses naming Global.pretrained_dict_path
// and leaves the model as it was; not strict warns and the head keeps its initial values. A
// recorded dictionary whose line count fits no head is refused with both counts.
START_TEST(test_unknown_or_wrong_dict) {
    char da[700], dc[700], w[700], side[700];
    write_dict("u_a.txt", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n", da, sizeof da);
    write_dict("u_c.txt", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\nx\n", dc, sizeof dc);
    OcrModel *a = tiny_model(da, 0, 5), *c = tiny_model(dc, 0, 9);
    snprintf(w, sizeof w, "%s/u.safetensors", g_dir);
    ck_assert(ocr_model_save_weights(a, w) == OCR_OK);
    const OcrParamTable *t = ocr_model_params(c);
    void *before = malloc(t->bytes);
    memcpy(before, t->data, t->bytes);
    OcrLoadReport r;
    ck_assert_int_eq(ckpt_load_pretrained_dict(c, w, NULL, 1, &r), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "Global.pretrained_dict_path") && strstr(ocr_last_error(), "11") &&
                      strstr(ocr_last_error(), "12"),
                  "%s", ocr_last_error());
    ck_assert_msg(memcmp(before, t->data, t->bytes) == 0, "a refused load changed the model");
    ck_assert_int_eq(ckpt_load_pretrained_dict(c, w, NULL, 0, &r), OCR_OK);
    ck_assert(!r.dict.applied && r.mismatched == 2);
    // Named, it loads.
    ck_assert_msg(ckpt_load_pretrained_dict(c, w, da, 1, &r) == OCR_OK, "%s", ocr_last_error());
    ck_assert(r.dict.applied && r.dict.added == 1 && ocr_load_report_complete(&r));
    ck_assert_str_eq(r.dict.dict_source, da);
    // A recorded dictionary of 12 lines for a head of 11 classes (11 or 12 would need 10 or 11 lines).
    snprintf(side, sizeof side, "%s/u.dict.txt", g_dir);
    at_write_text(side, "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\nx\ny\n");
    ck_assert_int_eq(ckpt_load_pretrained_dict(c, w, NULL, 1, &r), OCR_ERR_FORMAT);
    ck_assert_msg(strstr(ocr_last_error(), side) && strstr(ocr_last_error(), "12 lines") &&
                      strstr(ocr_last_error(), "11 classes"),
                  "%s", ocr_last_error());
    unlink(side);
    free(before);
    ocr_model_free(a);
    ocr_model_free(c);
}
END_TEST

// A .pdparams (PaddleOCR's layout, written by models/pdparams_write.h) has no recorded dictionary:
// Global.pretrained_dict_path names it. use_space_char on both sides: the space class is kept.
START_TEST(test_pdparams_with_dict_key) {
    char da[700], db[700], pd[700];
    write_dict("p_a.txt", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n", da, sizeof da);
    write_dict("p_b.txt", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\nx\n", db, sizeof db);
    OcrModel *a = tiny_model(da, 1, 5), *b = tiny_model(db, 1, 6);
    snprintf(pd, sizeof pd, "%s/pa.pdparams", g_dir);  // no pa.dict.txt beside it
    OcrPdWriteInfo info;
    ck_assert_msg(ocr_pdparams_write(a, pd, &info) == OCR_OK, "%s", ocr_last_error());
    OcrLoadReport r;
    ck_assert_int_eq(ckpt_load_pretrained_dict(b, pd, NULL, 1, &r), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "Global.pretrained_dict_path"), "%s", ocr_last_error());
    ck_assert_msg(ckpt_load_pretrained_dict(b, pd, da, 1, &r) == OCR_OK, "%s", ocr_last_error());
    ck_assert(ocr_load_report_complete(&r) && r.dict.applied);
    ck_assert(r.dict.old_classes == 12 && r.dict.new_classes == 13);
    ck_assert(r.dict.kept == 11 && r.dict.added == 1 && r.dict.dropped == 0);
    ck_assert_str_eq(r.dict.kept_list, "0 1 2 3 4 5 6 7 8 9 <space>");
    ck_assert_str_eq(r.dict.added_list, "x");
    // a: blank 0-9 space; b: blank 0-9 x space.
    const int from[13] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, -1, 11};
    check_class_tensor(a, b, "head.fc.weight", from, 1, 11, 1);
    check_class_tensor(a, b, "head.fc.bias", from, 1, 11, 1);
    check_rest_equal(a, b);
    ocr_model_free(a);
    ocr_model_free(b);
}
END_TEST

// MultiHead networks: the CTC branch's classifier and the guidance branch's embedding and output
// projection (NRTR: 4 specials first, one after; SAR: 3 specials after the characters, 2 on the
// prediction) carried over alike, through safetensors and through .pdparams.
static void multihead_case(const char *cfg_name, const char *const *small, const char *const *names, const int *pre,
                           const int *post, int n_names) {
    char da[700], db[700], cfg[1024], w[700], side[700], pd[700];
    write_dict("m_a.txt", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n", da, sizeof da);
    write_dict("m_b.txt", "x\n9\n8\n7\n6\n5\n4\n3\n2\n1\n", db, sizeof db);  // 0 dropped, x new, reversed
    snprintf(cfg, sizeof cfg, "%s/configs/%s", OCR_SOURCE_DIR, cfg_name);
    const char *ov[16];
    int n = 0;
    char dov[800];
    for (; small[n]; n++) ov[n] = small[n];
    snprintf(dov, sizeof dov, "Global.character_dict_path=%s", da);
    ov[n] = dov;
    ov[n + 1] = NULL;
    OcrModel *a = model_from(cfg, ov);
    snprintf(dov, sizeof dov, "Global.character_dict_path=%s", db);
    ov[n + 1] = "Global.seed=77";
    ov[n + 2] = NULL;
    OcrModel *b = model_from(cfg, ov), *b2 = model_from(cfg, ov);
    snprintf(w, sizeof w, "%s/mh.safetensors", g_dir);
    snprintf(side, sizeof side, "%s/mh.dict.txt", g_dir);
    ck_assert(ocr_model_save_weights(a, w) == OCR_OK);
    at_write_text(side, "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n");
    OcrLoadReport r;
    ck_assert_msg(ckpt_load_pretrained_dict(b, w, NULL, 1, &r) == OCR_OK, "%s", ocr_last_error());
    ck_assert(ocr_load_report_complete(&r) && r.dict.applied);
    ck_assert_int_eq(r.dict.tensors, n_names);
    ck_assert(r.dict.kept == 9 && r.dict.added == 1 && r.dict.dropped == 1);
    snprintf(pd, sizeof pd, "%s/mh.pdparams", g_dir);
    OcrPdWriteInfo info;
    ck_assert_msg(ocr_pdparams_write(a, pd, &info) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(ckpt_load_pretrained_dict(b2, pd, da, 1, &r) == OCR_OK, "%s", ocr_last_error());
    ck_assert(ocr_load_report_complete(&r) && r.dict.applied && r.dict.tensors == n_names);
    // CTC ids: b's 1 is x (new), b's k ≥ 2 is digit 11 − k, a's id of digit d is d + 1.
    int cls_from[11];
    cls_from[0] = 0;
    cls_from[1] = -1;
    for (int k = 2; k <= 10; k++) cls_from[k] = 12 - k;
    for (int q = 0; q < n_names; q++) {
        int from[64];
        for (int c = 0; c < pre[q]; c++) from[c] = c;
        for (int k = 1; k <= 10; k++) from[pre[q] + k - 1] = cls_from[k] < 0 ? -1 : pre[q] + cls_from[k] - 1;
        for (int c = 0; c < post[q]; c++) from[pre[q] + 10 + c] = pre[q] + 10 + c;
        check_class_tensor(a, b, names[q], from, pre[q], 10, 1);
        check_class_tensor(a, b2, names[q], from, pre[q], 10, 1);
    }
    check_rest_equal(a, b);
    check_rest_equal(a, b2);
    unlink(side);
    ocr_model_free(a);
    ocr_model_free(b);
    ocr_model_free(b2);
}

#define MH "Architecture.Head.head_list"

START_TEST(test_multihead_nrtr) {
    const char *small[] = {"Global.max_text_length=6", MH ".1.NRTRHead.nrtr_dim=64", MH ".1.NRTRHead.num_decoder_layers=1",
                           "Architecture.Backbone.scale=0.25", "Global.use_space_char=false", NULL};
    const char *names[] = {"head.ctc_head.fc.weight", "head.ctc_head.fc.bias", "head.gtc_head.embedding.embedding.weight",
                           "head.gtc_head.tgt_word_prj.weight"};
    const int pre[] = {1, 1, 4, 4}, post[] = {0, 0, 1, 1};
    multihead_case("rec_ppocrv3_en_gtc_nrtr.json", small, names, pre, post, 4);
}
END_TEST

START_TEST(test_multihead_sar) {
    const char *small[] = {"Global.max_text_length=6", "Architecture.Backbone.scale=0.25", "Global.use_space_char=false",
                           MH ".1.SARHead.enc_dim=64", MH ".1.SARHead.d_k=64", NULL};
    const char *names[] = {"head.ctc_head.fc.weight", "head.ctc_head.fc.bias", "head.sar_head.decoder.embedding.weight",
                           "head.sar_head.decoder.prediction.weight", "head.sar_head.decoder.prediction.bias"};
    const int pre[] = {1, 1, 0, 0, 0}, post[] = {0, 0, 3, 2, 2};
    multihead_case("rec_ppocrv3_en_gtc_sar.json", small, names, pre, post, 5);
}
END_TEST

// A real mismatch beside the dictionary's: NRTR of another width. The CTC classifier is rebuilt
// by character; the guidance tensors of another width stay mismatches, and the report's first
// mismatch names one of them, not the rebuilt classifier that comes first in the table.
START_TEST(test_other_mismatch_still_reported) {
    char da[700], db[700], cfg[1024], w[700], side[700], dov[800];
    write_dict("o_a.txt", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n", da, sizeof da);
    write_dict("o_b.txt", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\nx\n", db, sizeof db);
    snprintf(cfg, sizeof cfg, "%s/configs/rec_ppocrv3_en_gtc_nrtr.json", OCR_SOURCE_DIR);
    snprintf(dov, sizeof dov, "Global.character_dict_path=%s", da);
    const char *ova[] = {"Global.max_text_length=6", MH ".1.NRTRHead.nrtr_dim=64", MH ".1.NRTRHead.num_decoder_layers=1",
                         "Architecture.Backbone.scale=0.25", "Global.use_space_char=false", dov, NULL};
    OcrModel *a = model_from(cfg, ova);
    char dovb[800];
    snprintf(dovb, sizeof dovb, "Global.character_dict_path=%s", db);
    const char *ovb[] = {"Global.max_text_length=6", MH ".1.NRTRHead.nrtr_dim=32", MH ".1.NRTRHead.num_decoder_layers=1",
                         "Architecture.Backbone.scale=0.25", "Global.use_space_char=false", dovb, NULL};
    OcrModel *b = model_from(cfg, ovb);
    snprintf(w, sizeof w, "%s/other.safetensors", g_dir);
    snprintf(side, sizeof side, "%s/other.dict.txt", g_dir);
    ck_assert(ocr_model_save_weights(a, w) == OCR_OK);
    at_write_text(side, "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n");
    OcrLoadReport r;
    ck_assert_int_eq(ckpt_load_pretrained_dict(b, w, NULL, 1, &r), OCR_ERR_FORMAT);
    ck_assert_msg(strstr(ocr_last_error(), "head.gtc_head.") || strstr(ocr_last_error(), "head.before_gtc."), "%s",
                  ocr_last_error());
    ck_assert_msg(ckpt_load_pretrained_dict(b, w, NULL, 0, &r) == OCR_OK, "%s", ocr_last_error());
    ck_assert(r.dict.applied && r.dict.tensors == 2 && r.dict.added == 1);
    ck_assert_int_gt(r.mismatched, 0);
    ck_assert_msg(!strstr(r.first_mismatched, "ctc_head.fc"), "%s", r.first_mismatched);
    const int from[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, -1};
    check_class_tensor(a, b, "head.ctc_head.fc.weight", from, 1, 10, 1);
    check_class_tensor(a, b, "head.ctc_head.fc.bias", from, 1, 10, 1);
    unlink(side);
    ocr_model_free(a);
    ocr_model_free(b);
}
END_TEST

// The rule table is complete: two networks that differ only in their dictionary's size differ
// only in tensors ocr_head_class_tensor knows (a head added without its lines here fails this).
static void check_complete(const char *cfg_path, const char *const *small) {
    char da[700], db[700], dov[800];
    write_dict("k_a.txt", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n", da, sizeof da);
    write_dict("k_b.txt", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\nx\ny\n", db, sizeof db);
    const char *ov[16];
    int n = 0;
    for (; small && small[n]; n++) ov[n] = small[n];
    ov[n + 1] = NULL;
    ov[n] = dov;
    snprintf(dov, sizeof dov, "Global.character_dict_path=%s", da);
    OcrModel *a = model_from(cfg_path, ov);
    snprintf(dov, sizeof dov, "Global.character_dict_path=%s", db);
    OcrModel *b = model_from(cfg_path, ov);
    OcrParamTable *ta[2] = {ocr_model_params(a), ocr_model_stats(a)}, *tb[2] = {ocr_model_params(b), ocr_model_stats(b)};
    int per_class = 0;
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(ta[k]->count, tb[k]->count);
        for (int i = 0; i < tb[k]->count; i++) {
            const OcrParamInfo *p = &tb[k]->items[i], *q = &ta[k]->items[i];
            ck_assert_str_eq(p->name, q->name);
            OcrClassTensor ct;
            int known = ocr_head_class_tensor(p->name, &ct);
            ck_assert_msg(known == !same_shape_of(p, q), "%s: %s per-class rule, but its shape %s with the dictionary",
                          p->name, known ? "a" : "no", same_shape_of(p, q) ? "does not change" : "changes");
            if (known) {
                ck_assert_int_eq(ocr_class_tensor_classes(&ct, q->shape[ct.axis]), ocr_model_arch(a)->num_classes);
                ck_assert_int_eq(ocr_class_tensor_classes(&ct, p->shape[ct.axis]), ocr_model_arch(b)->num_classes);
                per_class++;
            }
        }
    }
    ck_assert_int_ge(per_class, 2);
    ocr_model_free(a);
    ocr_model_free(b);
}

START_TEST(test_rules_complete) {
    check_complete(g_cfg, NULL);
    const char *mid[] = {"Architecture.Head.mid_channels=8", NULL};
    check_complete(g_cfg, mid);
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "%s/configs/rec_ppocrv3_en_gtc_nrtr.json", OCR_SOURCE_DIR);
    const char *nrtr[] = {"Global.max_text_length=6", MH ".1.NRTRHead.nrtr_dim=64", MH ".1.NRTRHead.num_decoder_layers=1",
                          "Architecture.Backbone.scale=0.25", NULL};
    check_complete(cfg, nrtr);
    snprintf(cfg, sizeof cfg, "%s/configs/rec_ppocrv3_en_gtc_sar.json", OCR_SOURCE_DIR);
    const char *sar[] = {"Global.max_text_length=6", "Architecture.Backbone.scale=0.25", MH ".1.SARHead.enc_dim=64",
                         MH ".1.SARHead.d_k=64", NULL};
    check_complete(cfg, sar);
}
END_TEST

// ---- through `ocrtrain train` -------------------------------------------------------------------------

// A run's checkpoint records its dictionary; fine-tuning from it with the dictionary plus one
// character loads strictly, says what it kept and added, and trains.
START_TEST(test_train_finetune_adds_a_char) {
    char out[700], ov[800], ft[700], ov2[800], pre[800], dict2[700], dov[800], rec[800], err[16384];
    snprintf(out, sizeof out, "%s/run_a", g_dir);
    snprintf(ov, sizeof ov, "Global.save_model_dir=%s", out);
    const char *a[] = {"train", "-c", g_cfg, "--max-steps", "2", "-o", ov, NULL};
    ck_assert_int_eq(at_run(cmd_train, a), 0);
    snprintf(rec, sizeof rec, "%s/latest/model.dict.txt", out);
    char dict1[700];
    snprintf(dict1, sizeof dict1, "%s/dict.txt", g_dir);
    ck_assert_msg(at_same_file(rec, dict1), "%s does not hold the run's dictionary", rec);
    write_dict("dict_plus.txt", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n\xE2\x82\xAC\n", dict2, sizeof dict2);
    snprintf(ft, sizeof ft, "%s/run_ft", g_dir);
    snprintf(ov2, sizeof ov2, "Global.save_model_dir=%s", ft);
    snprintf(pre, sizeof pre, "Global.pretrained_model=%s/latest", out);
    snprintf(dov, sizeof dov, "Global.character_dict_path=%s", dict2);
    const char *b[] = {"train", "-c", g_cfg, "--max-steps", "1", "-o", ov2, pre, dov, NULL};
    int rc = at_run_capture(cmd_train, b, err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    ck_assert_msg(strstr(err, "10 characters kept") && strstr(err, "1 new") && strstr(err, "new (1): \xE2\x82\xAC") &&
                      strstr(err, "all of the model's"),
                  "%s", err);
    snprintf(rec, sizeof rec, "%s/latest/model.dict.txt", ft);
    ck_assert_msg(at_same_file(rec, dict2), "%s does not hold the fine-tune's dictionary", rec);
    // Global.pretrained_dict_path must exist.
    const char *c[] = {"train", "-c", g_cfg, "--max-steps", "1", "-o", ov2, pre, dov,
                       "Global.pretrained_dict_path=/nonexistent/dict.txt", NULL};
    ck_assert_int_eq(at_run_capture(cmd_train, c, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "Global.pretrained_dict_path"), "%s", err);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("training_head_remap");
    TCase *tc = tcase_create("head_remap");
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, setup_data, NULL);
    tcase_add_test(tc, test_class_map);
    tcase_add_test(tc, test_remap_tensor);
    tcase_add_test(tc, test_rules_complete);
    tcase_add_test(tc, test_safetensors_recorded_dict);
    tcase_add_test(tc, test_unknown_or_wrong_dict);
    tcase_add_test(tc, test_pdparams_with_dict_key);
    tcase_add_test(tc, test_multihead_nrtr);
    tcase_add_test(tc, test_multihead_sar);
    tcase_add_test(tc, test_other_mismatch_still_reported);
    tcase_add_test(tc, test_train_finetune_adds_a_char);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(suite()); }
