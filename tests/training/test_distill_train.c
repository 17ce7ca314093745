// Distillation training end to end on the digits set (docs/DISTILLATION.md, "Training"): a small
// SVTR_LCNet teacher is trained briefly, then a demo-sized student (MobileNetV1Enhance 0.125,
// reshape neck) is distilled from it through a DistillationModel config with every head_out term
// (DistillCTCLogits, DML, KL, L2 distance) beside its own CTC loss. The loss decreases; the frozen
// teacher's weights are bit for bit the pretrained ones (saved as Teacher.*, the student as
// Student.*); a run resumes from its checkpoint; the student exports alone (ONNX and .pdparams
// without the prefix) and a PaddleOCR-style distillation .pdparams imports as its student.
// Mutual learning resumes bit for bit (the second network's optimizer and AMP state are in the
// checkpoint). Each term's gradient in the step equals its op's own (kernels/ops.h) times the weight, for the
// CTC terms and, on MultiHead NRTR networks, for DKD and the masked KL on the guidance head.
#include <string.h>

#include "cli/commands.h"
#include "core/pickle.h"
#include "core/safetensors.h"
#include "kernels/ctc.h"
#include "kernels/ops.h"
#include "models/pdparams.h"
#include "amp/engine.h"
#include "training/capacity.h"
#include "training/distill.h"
#include "training/run_config.h"
#include "tests/training/training_test_util.h"

static char *g_dir;
static char g_teacher_cfg[1100], g_teacher_ckpt[1100];

#define NECK_TEACHER \
    "{\"name\": \"SequenceEncoder\", \"encoder_type\": \"svtr\", \"dims\": 16, \"depth\": 1, \"hidden_dims\": 32, " \
    "\"num_heads\": 2, \"use_guide\": false, \"drop_rate\": 0.0, \"attn_drop_rate\": 0.0}"

static void setup(void) {
    g_dir = at_tmpdir();
    at_make_digits(g_dir, "train", 32, 3, 31);
    at_make_digits(g_dir, "eval", 8, 3, 32);
    snprintf(g_teacher_cfg, sizeof g_teacher_cfg, "%s/teacher.json", g_dir);
    at_write_config_neck(g_teacher_cfg, g_dir, 64, 8, "\"epoch_num\": 3,", 0.25, NECK_TEACHER);
    snprintf(g_teacher_ckpt, sizeof g_teacher_ckpt, "%s/out/latest", g_dir);
}

static void teardown(void) {
    ocr_test_remove_tree(g_dir);
    free(g_dir);
}

// The teacher: 12 steps of plain training, checkpoint in g_teacher_ckpt.
static void train_teacher(void) {
    char err[8192];
    const char *a[] = {"train", "-c", g_teacher_cfg, "--max-steps", "12", NULL};
    int rc = at_run_capture(cmd_train, a, err, sizeof err);
    ck_assert_msg(rc == 0, "teacher: %s", err);
}

// A distillation config over the teacher config's data: Teacher (its Architecture, frozen,
// pretrained) and Student (demo-sized), with `losses` as the CombinedLoss list (JSON).
static void write_distill_config(const char *path, const char *out_dir, const char *losses, const char *teacher_arch,
                                 const char *student_arch, const char *global_extra) {
    cJSON *root = at_read_json(g_teacher_cfg);
    cJSON *g = cJSON_GetObjectItem(root, "Global");
    cJSON_ReplaceItemInObject(g, "save_model_dir", cJSON_CreateString(out_dir));
    if (global_extra) {
        cJSON *ge = cJSON_Parse(global_extra);
        cJSON *e = ge->child;
        while (e) {
            cJSON *next = e->next;
            cJSON_DeleteItemFromObject(g, e->string);
            cJSON_AddItemToObject(g, e->string, cJSON_Duplicate(e, 1));
            e = next;
        }
        cJSON_Delete(ge);
    }
    cJSON *tarch = teacher_arch ? cJSON_Parse(teacher_arch) : cJSON_DetachItemFromObject(root, "Architecture");
    if (teacher_arch) cJSON_DeleteItemFromObject(root, "Architecture");
    ck_assert(tarch);
    cJSON_AddStringToObject(tarch, "pretrained", g_teacher_ckpt);
    cJSON_AddBoolToObject(tarch, "freeze_params", 1);
    cJSON_AddBoolToObject(tarch, "return_all_feats", 1);
    cJSON *sarch = cJSON_Parse(student_arch);
    ck_assert(sarch);
    cJSON_AddBoolToObject(sarch, "freeze_params", 0);
    cJSON_AddBoolToObject(sarch, "return_all_feats", 1);
    cJSON *arch = cJSON_CreateObject();
    cJSON_AddStringToObject(arch, "model_type", "rec");
    cJSON_AddStringToObject(arch, "name", "DistillationModel");
    cJSON_AddStringToObject(arch, "algorithm", "Distillation");
    cJSON *models = cJSON_AddObjectToObject(arch, "Models");
    cJSON_AddItemToObject(models, "Teacher", tarch);
    cJSON_AddItemToObject(models, "Student", sarch);
    cJSON_AddItemToObject(root, "Architecture", arch);
    cJSON_DeleteItemFromObject(root, "Loss");
    cJSON *loss = cJSON_CreateObject();
    cJSON_AddStringToObject(loss, "name", "CombinedLoss");
    cJSON *list = cJSON_Parse(losses);
    ck_assert_msg(list, "bad losses JSON");
    cJSON_AddItemToObject(loss, "loss_config_list", list);
    cJSON_AddItemToObject(root, "Loss", loss);
    at_distill_student_decode(root);
    char *s = cJSON_Print(root);
    at_write_text(path, s);
    free(s);
    cJSON_Delete(root);
}

#define STUDENT_ARCH                                                                                       \
    "{\"model_type\": \"rec\", \"algorithm\": \"SVTR_LCNet\", \"Transform\": null, \"Backbone\": {\"name\": " \
    "\"MobileNetV1Enhance\", \"scale\": 0.125, \"last_conv_stride\": [1, 2], \"last_pool_type\": \"avg\", "  \
    "\"last_pool_kernel_size\": [2, 2]}, \"Neck\": {\"name\": \"SequenceEncoder\", \"encoder_type\": "       \
    "\"reshape\"}, \"Head\": {\"name\": \"CTCHead\", \"fc_decay\": 1e-05}}"

#define PAIR "\"model_name_pairs\": [[\"Student\", \"Teacher\"]], \"key\": \"head_out\""
#define GT_CTC "{\"DistillationCTCLoss\": {\"weight\": 1.0, \"model_name_list\": [\"Student\"], \"key\": \"head_out\"}}"
#define CTC_TERMS                                                                                              \
    "[" GT_CTC ", {\"DistillCTCLogits\": {\"weight\": 1.0, \"reduction\": \"mean\", " PAIR "}},"               \
    " {\"DistillationDMLLoss\": {\"weight\": 0.5, \"act\": \"softmax\", \"use_log\": true, " PAIR ", "        \
    "\"multi_head\": false, \"name\": \"dml_ctc\"}},"                                                          \
    " {\"DistillationKLDivLoss\": {\"weight\": 0.3, " PAIR ", \"multi_head\": false}},"                        \
    " {\"DistillationDistanceLoss\": {\"weight\": 0.2, \"mode\": \"l2\", " PAIR "}}]"

// The tensor `name` of a safetensors file as f32 bytes (malloc'd), *n elements; NULL when absent.
static float *st_tensor(const char *file, const char *name, int64_t *n) {
    OcrSafetensors *st;
    ck_assert_msg(ocr_safetensors_open(&st, file) == OCR_OK, "%s", ocr_last_error());
    const OcrNamedTensor *t = ocr_safetensors_find(st, name);
    float *v = NULL;
    if (t) {
        OcrTensor src = ocr_tensor_view((void *)t->data, t->dtype, ocr_cpu(), t->ndim, t->shape);
        *n = ocr_tensor_numel(&src);
        v = malloc((size_t)*n * sizeof *v + 1);
        ocr_tensor_to_f32(&src, v);
    }
    ocr_safetensors_close(st);
    return v;
}

START_TEST(test_distill_trains_teacher_fixed) {
    train_teacher();
    char cfg[1200], out[600], err[16384];
    snprintf(cfg, sizeof cfg, "%s/distill.json", g_dir);
    snprintf(out, sizeof out, "%s/dout", g_dir);
    write_distill_config(cfg, out, CTC_TERMS, NULL, STUDENT_ARCH, "{\"epoch_num\": 10}");
    const char *a[] = {"train", "-c", cfg, "--max-steps", "12", NULL};
    int rc = at_run_capture(cmd_train, a, err, sizeof err);
    ck_assert_msg(rc == 0, "distill: %s", err);
    int n;
    double *losses = at_read_losses(out, &n, NULL);
    ck_assert_int_eq(n, 12);
    for (int i = 0; i < n; i++) ck_assert(isfinite(losses[i]));
    double first = (losses[0] + losses[1] + losses[2]) / 3, last = (losses[9] + losses[10] + losses[11]) / 3;
    ck_assert_msg(last < first, "loss did not decrease: %g -> %g", first, last);
    free(losses);
    // The checkpoint: Student.* and Teacher.*; the teacher's tensors are the pretrained ones bit for bit.
    char ck[1400], tk[1400];
    snprintf(ck, sizeof ck, "%s/latest/model.safetensors", out);
    snprintf(tk, sizeof tk, "%s/model.safetensors", g_teacher_ckpt);
    OcrSafetensors *st;
    ck_assert(ocr_safetensors_open(&st, tk) == OCR_OK);
    int nt = ocr_safetensors_count(st), checked = 0;
    for (int i = 0; i < nt; i++) {
        const OcrNamedTensor *t = ocr_safetensors_at(st, i);
        char name[256];
        snprintf(name, sizeof name, "Teacher.%s", t->name);
        int64_t na = 0, nb = 0;
        float *x = st_tensor(ck, name, &na);
        float *y = st_tensor(tk, t->name, &nb);
        ck_assert_msg(x && y && na == nb, "%s missing or resized", name);
        ck_assert_msg(memcmp(x, y, (size_t)na * sizeof(float)) == 0, "%s changed", name);
        free(x);
        free(y);
        checked++;
    }
    ocr_safetensors_close(st);
    ck_assert_int_gt(checked, 10);
    int64_t ns;
    float *sw = st_tensor(ck, "Student.backbone.conv1._conv.weight", &ns);
    if (!sw) sw = st_tensor(ck, "Student.head.fc.weight", &ns);
    ck_assert_msg(sw != NULL, "no Student.* tensors in %s", ck);
    free(sw);
    // metrics.jsonl carries the distillation part.
    char mp[1400];
    snprintf(mp, sizeof mp, "%s/metrics.jsonl", out);
    char *text;
    size_t size;
    ck_assert(ocr_read_file(mp, &text, &size) == OCR_OK);
    ck_assert(strstr(text, "\"loss_distill\":"));
    free(text);

    // Resume from the distillation checkpoint (Student.* read back, Teacher.* ignored).
    char ov[1500];
    snprintf(ov, sizeof ov, "Global.checkpoints=%s/latest", out);
    const char *r[] = {"train", "-c", cfg, "-o", ov, "--max-steps", "14", NULL};
    rc = at_run_capture(cmd_train, r, err, sizeof err);
    ck_assert_msg(rc == 0, "resume: %s", err);
    losses = at_read_losses(out, &n, NULL);
    ck_assert_int_eq(n, 14);
    free(losses);

    // The AMP comparison of a distillation run (FP32 against fp16 O1 and O2) writes its report.
    char cmp[1400];
    snprintf(cmp, sizeof cmp, "%s/cmp", g_dir);
    const char *cm[] = {"compare", "-c", cfg, "--out", cmp, "--seeds", "1", "--levels", "O1,O2",
                        "--max-steps", "2", "-o", "Global.amp_dtype=float16", NULL};
    rc = at_run_capture(cmd_compare, cm, err, sizeof err);
    ck_assert_msg(rc == 0 || rc == 3 || rc == 4, "compare: exit %d: %s", rc, err);
    char rj[1500];
    snprintf(rj, sizeof rj, "%s/report.json", cmp);
    ck_assert_msg(ocr_read_file(rj, &text, &size) == OCR_OK, "%s", ocr_last_error());
    ck_assert(strstr(text, "fp16-o1") && strstr(text, "fp16-o2"));
    // The memory section shows the teacher's part (its weights in fp16 under O2).
    ck_assert_msg(strstr(text, "\"teacher_memory\"") && strstr(text, "\"float16\""), "%s", text);
    free(text);
    snprintf(rj, sizeof rj, "%s/report.md", cmp);
    ck_assert_msg(ocr_read_file(rj, &text, &size) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(strstr(text, "the frozen distillation network(s) (teacher, float16)"), "%s", text);
    free(text);

    // Evaluation and export of the student alone, from the distillation config and checkpoint.
    char wts[1400], onnx[1400], pd[1400];
    snprintf(wts, sizeof wts, "%s/latest", out);
    const char *ev[] = {"eval", "-c", cfg, "--weights", wts, NULL};
    rc = at_run_capture(cmd_eval, ev, err, sizeof err);
    ck_assert_msg(rc == 0, "eval: %s", err);
    snprintf(onnx, sizeof onnx, "%s/student.onnx", g_dir);
    snprintf(pd, sizeof pd, "%s/student.pdparams", g_dir);
    const char *ex[] = {"export", "-c", cfg, "--weights", wts, "--onnx", onnx, "--pdparams", pd, NULL};
    rc = at_run_capture(cmd_export, ex, err, sizeof err);
    ck_assert_msg(rc == 0, "export: %s", err);
    ck_assert(at_exists(onnx));
    OcrPdparams *p;
    ck_assert_msg(ocr_pdparams_load(&p, pd) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_gt(p->count, 5);
    for (int i = 0; i < p->count; i++) {
        ck_assert_msg(strncmp(p->tensors[i].name, "Student.", 8) && strncmp(p->tensors[i].name, "Teacher.", 8),
                      "prefixed name %s in the student's export", p->tensors[i].name);
    }
    ocr_pdparams_free(p);
    // A PaddleOCR distillation checkpoint (Student.* and Teacher.* in one state dict): the export
    // renamed as PaddleOCR names it, plus a teacher tensor; the student is selected and read back.
    ck_assert_msg(ocr_pdparams_load(&p, pd) == OCR_OK, "%s", ocr_last_error());
    int count = p->count;
    p->tensors = realloc(p->tensors, (size_t)(count + 1) * sizeof *p->tensors);
    for (int i = 0; i < count; i++) {
        char *nn = malloc(strlen(p->tensors[i].name) + 9);
        sprintf(nn, "Student.%s", p->tensors[i].name);
        free(p->tensors[i].name);
        p->tensors[i].name = nn;
    }
    OcrPdTensor extra = p->tensors[0];
    extra.name = strdup("Teacher.backbone.conv1._conv.weight");
    extra.f32 = malloc((size_t)extra.numel * sizeof(float));
    memcpy(extra.f32, p->tensors[0].f32, (size_t)extra.numel * sizeof(float));
    p->tensors[p->count++] = extra;
    ck_assert_int_eq(ocr_pdparams_select_prefix(p, "Student."), count);
    ck_assert_int_eq(p->count, count);
    OcrArch arch;
    char desc[256];
    ck_assert_msg(ocr_pdparams_arch(p, &arch, desc, sizeof desc) == OCR_OK, "%s", ocr_last_error());
    OcrModel *sm;
    ck_assert(ocr_model_create(&sm, &arch) == OCR_OK);
    OcrPdLoadReport rep;
    ck_assert(ocr_pdparams_load_into(sm, p, &rep) == OCR_OK);
    ck_assert_int_eq(rep.missing, 0);
    ocr_pdparams_report_free(&rep);
    // Bit for bit the checkpoint's Student.head.fc.weight.
    int64_t n1;
    float *w1 = st_tensor(ck, "Student.head.fc.weight", &n1);
    ck_assert(w1 != NULL);
    int k = ocr_params_find(ocr_model_params(sm), "head.fc.weight");
    ck_assert_int_ge(k, 0);
    OcrTensor wt = ocr_params_tensor(ocr_model_params(sm), k);
    ck_assert_int_eq(ocr_tensor_numel(&wt), n1);
    ck_assert(memcmp(wt.data, w1, (size_t)n1 * 4) == 0);
    free(w1);
    ocr_model_free(sm);
    ocr_pdparams_free(p);

    // --all-networks: PaddleOCR's DistillationModel state dict, every network under its name,
    // each bit for bit the checkpoint's and each readable as its own network.
    char all[1400];
    snprintf(all, sizeof all, "%s/distillation.pdparams", g_dir);
    const char *ea[] = {"export", "-c", cfg, "--weights", wts, "--pdparams", all, "--all-networks", NULL};
    rc = at_run_capture(cmd_export, ea, err, sizeof err);
    ck_assert_msg(rc == 0, "export --all-networks: %s", err);
    const char *const nets[] = {"Teacher.", "Student."};
    for (int q = 0; q < 2; q++) {
        ck_assert_msg(ocr_pdparams_load(&p, all) == OCR_OK, "%s", ocr_last_error());
        int prefixed = 0;
        for (int i = 0; i < p->count; i++) {
            ck_assert_msg(!strncmp(p->tensors[i].name, "Student.", 8) || !strncmp(p->tensors[i].name, "Teacher.", 8),
                          "%s in a DistillationModel state dict", p->tensors[i].name);
            prefixed += !strncmp(p->tensors[i].name, nets[q], 8);
        }
        if (q == 1) ck_assert_int_eq(prefixed, count);  // the student's own export's tensors, renamed
        ck_assert_int_eq(ocr_pdparams_select_prefix(p, nets[q]), prefixed);
        ck_assert_msg(ocr_pdparams_arch(p, &arch, desc, sizeof desc) == OCR_OK, "%s: %s", nets[q], ocr_last_error());
        ck_assert(ocr_model_create(&sm, &arch) == OCR_OK);
        ck_assert(ocr_pdparams_load_into(sm, p, &rep) == OCR_OK);
        ck_assert_int_eq(rep.missing, 0);
        ocr_pdparams_report_free(&rep);
        char nm[64];
        snprintf(nm, sizeof nm, "%shead.fc.weight", nets[q]);
        w1 = st_tensor(ck, nm, &n1);
        ck_assert_msg(w1 != NULL, "no %s in %s", nm, ck);
        k = ocr_params_find(ocr_model_params(sm), "head.fc.weight");
        ck_assert_int_ge(k, 0);
        wt = ocr_params_tensor(ocr_model_params(sm), k);
        ck_assert_int_eq(ocr_tensor_numel(&wt), n1);
        ck_assert_msg(memcmp(wt.data, w1, (size_t)n1 * 4) == 0, "%s differs from the checkpoint's", nm);
        free(w1);
        ocr_model_free(sm);
        ocr_pdparams_free(p);
    }
    // Only from a distillation config.
    const char *en[] = {"export", "-c", g_teacher_cfg, "--weights", g_teacher_ckpt, "--pdparams", all,
                        "--all-networks", NULL};
    rc = at_run_capture(cmd_export, en, err, sizeof err);
    ck_assert_msg(rc != 0 && strstr(err, "--all-networks needs a distillation config"), "exit %d: %s", rc, err);
}
END_TEST

START_TEST(test_refused_ctc_weight) {
    // A CTCHead student's own CTC loss trains at weight 1.0 only; without it the config is refused.
    train_teacher();
    char cfg[1200], out[600];
    snprintf(cfg, sizeof cfg, "%s/distill.json", g_dir);
    snprintf(out, sizeof out, "%s/dout", g_dir);
    write_distill_config(cfg, out, "[{\"DistillCTCLogits\": {\"weight\": 1.0, " PAIR "}}]", NULL, STUDENT_ARCH, NULL);
    OcrConfig *c;
    RunConfig rc;
    ck_assert_int_eq(run_config_load(&c, &rc, cfg, NULL, 0, RUN_NEED_TRAIN), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "DistillationCTCLoss"), "%s", ocr_last_error());
}
END_TEST

START_TEST(test_teacher_cache_is_exact) {
    // Global.distill_teacher_cache: the same losses to float32 rounding (metrics.jsonl's 7 digits), and
    // refused with an augmenting transform.
    train_teacher();
    double *l[2];
    int n[2];
    for (int c = 0; c < 2; c++) {
        char cfg[1200], out[600], err[16384];
        snprintf(cfg, sizeof cfg, "%s/cache%d.json", g_dir, c);
        snprintf(out, sizeof out, "%s/cout%d", g_dir, c);
        write_distill_config(cfg, out, CTC_TERMS, NULL, STUDENT_ARCH,
                             c ? "{\"epoch_num\": 3, \"distill_teacher_cache\": true}" : "{\"epoch_num\": 3}");
        const char *a[] = {"train", "-c", cfg, NULL};
        int rc = at_run_capture(cmd_train, a, err, sizeof err);
        ck_assert_msg(rc == 0, "cache %d: %s", c, err);
        if (c) ck_assert_msg(strstr(err, "teacher cache") && strstr(err, "64 samples served, 32 computed"), "%s", err);
        l[c] = at_read_losses(out, &n[c], NULL);
    }
    ck_assert_int_eq(n[0], 12);
    ck_assert_int_eq(n[1], n[0]);
    // The first epoch (4 steps of 8) computes every sample in both runs: bitwise equal. Later a
    // sample's cached logits come from another batch than the one it now sits in; a GEMM whose
    // blocking depends on the batch (OpenBLAS's Haswell kernels, oneDNN's AVX2 fp32 matmul) rounds
    // them differently in the last bit (1e-7 relative), which the following Adam steps carry into
    // the student's weights: Adam's step is about lr whatever the gradient's size, so a last-bit
    // change in a near-zero gradient entry moves a weight by up to lr per step (observed: 5e-5
    // relative by step 9 with OpenBLAS, 1.1e-3 at step 10 with oneDNN on Zen 3). A cache serving
    // another sample's logits moves the KL term by whole units (over a tenth of these losses of
    // ~7), ten times the 1e-2 allowed here.
    for (int i = 0; i < n[0]; i++) {
        double tol = i < 4 ? 0.0 : 1e-2 * fabs(l[0][i]);
        ck_assert_msg(fabs(l[0][i] - l[1][i]) <= tol, "step %d: %.9g vs %.9g", i, l[0][i], l[1][i]);
    }
    free(l[0]);
    free(l[1]);
    char cfg[1200];
    snprintf(cfg, sizeof cfg, "%s/cache1.json", g_dir);
    OcrConfig *c;
    RunConfig rc;
    const char *ov[] = {"Train.dataset.transforms.1={RecAug: null}"};
    ck_assert_int_eq(run_config_load(&c, &rc, cfg, ov, 1, RUN_NEED_TRAIN), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "Train.dataset.transforms.1.RecAug") &&
                      strstr(ocr_last_error(), "distill_teacher_cache"),
                  "%s", ocr_last_error());
    const char *ov2[] = {"Train.dataset.ratio_list=[0.5]"};
    ck_assert_int_eq(run_config_load(&c, &rc, cfg, ov2, 1, RUN_NEED_TRAIN), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "Train.dataset.ratio_list.0"), "%s", ocr_last_error());
}
END_TEST

// ---- each term's gradient against its op -----------------------------------------------------------------

typedef struct {
    OcrConfig *cfg;
    OcrModel *m;
    DistillRun *r;
    OcrTensor images, widths;
    int32_t labels[2 * 8], lengths[2], hwidths[2];
    FeedDeviceBatch b;
} Bench;

static void bench_open(Bench *x, const char *cfg_path) {
    memset(x, 0, sizeof *x);
    RunConfig rc;
    ck_assert_msg(run_config_load(&x->cfg, &rc, cfg_path, NULL, 0, RUN_NEED_TRAIN) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(ocr_model_from_config(&x->m, x->cfg) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(distill_run_create(&x->r, x->cfg, &rc, x->m, ocr_cpu(), NULL) == OCR_OK, "%s", ocr_last_error());
    ck_assert(x->r != NULL);
    const int B = 2, H = 32, W = 64, C = 3;
    ck_assert(ocr_tensor_alloc(&x->images, OCR_U8, ocr_cpu(), 4, (int64_t[]){B, H, W, C}, OCR_MEM_DATA) == OCR_OK);
    ck_assert(ocr_tensor_alloc(&x->widths, OCR_I32, ocr_cpu(), 1, (int64_t[]){B}, OCR_MEM_DATA) == OCR_OK);
    uint8_t *px = x->images.data;
    for (int i = 0; i < B * H * W * C; i++) px[i] = (uint8_t)((i * 37 + (i / 97) * 11) & 255);
    memset(x->labels, 0, sizeof x->labels);
    x->labels[0] = 3, x->labels[1] = 5, x->lengths[0] = 2;
    x->labels[8] = 7, x->labels[9] = 2, x->labels[10] = 9, x->lengths[1] = 3;
    x->hwidths[0] = W, x->hwidths[1] = 48;
    memcpy(x->widths.data, x->hwidths, sizeof x->hwidths);
    x->b.images = x->images;
    x->b.widths = x->widths;
    x->b.count = B;
    x->b.max_len = 8;
    x->b.host_labels = x->labels;
    x->b.host_lengths = x->lengths;
    x->b.host_widths = x->hwidths;
    x->b.labels = ocr_tensor_view(x->labels, OCR_I32, ocr_cpu(), 2, (int64_t[]){B, 8});
    x->b.lengths = ocr_tensor_view(x->lengths, OCR_I32, ocr_cpu(), 1, (int64_t[]){B});
}

static void bench_close(Bench *x) {
    distill_run_free(x->r);
    ocr_model_free(x->m);
    ocr_tensor_free(&x->images);
    ocr_tensor_free(&x->widths);
    ocr_config_free(x->cfg);
}

static double max_abs_diff(const OcrTensor *a, const OcrTensor *b) {
    int64_t n = ocr_tensor_numel(a);
    float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
    ocr_tensor_to_f32(a, x);
    ocr_tensor_to_f32(b, y);
    double m = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - (double)y[i]);
        if (d > m) m = d;
        s += fabs((double)y[i]);
    }
    free(x);
    free(y);
    ck_assert_msg(s > 0, "the reference gradient is all zero");
    return m;
}

// Runs the step's extra loss once on the bench batch and compares term t's gradient and value
// with its op called directly on the same outputs.
static void check_term(Bench *x, int t) {
    const DistillConfig *dc = distill_run_config(x->r);
    const DistillTerm *term = &dc->terms[t];
    OcrModel *m = x->m;
    ocr_params_zero_grads(ocr_model_params(m));
    if (ocr_model_arch(m)->multihead.kind != OCR_GUIDE_NONE)
        ck_assert(ocr_model_set_guide_batch(m, x->labels, x->lengths, x->hwidths, 2, 8, 64) == OCR_OK);
    ck_assert_msg(ocr_model_forward_u8(m, &x->images, &x->widths, 1) == OCR_OK, "%s", ocr_last_error());
    const OcrTensor *logits = ocr_model_logits(m);
    OcrTensor dl32;
    ck_assert(ocr_tensor_alloc(&dl32, OCR_F32, ocr_cpu(), 3, logits->shape, OCR_MEM_ACTIVATIONS) == OCR_OK);
    ocr_zero_tensor(&dl32);
    OcrTensor *gdl = ocr_model_guide_dlogits(m);
    if (gdl) ocr_zero_tensor(gdl);
    StepCtx s;
    memset(&s, 0, sizeof s);
    s.m = m;
    distill_attach(x->r, &s);
    double loss;
    ck_assert_msg(s.extra.fn(s.extra.user, &s, &x->b, logits, &dl32, 1.0f, &loss) == OCR_OK, "%s", ocr_last_error());
    OcrModel *tm = distill_run_net(x->r, term->b);
    const int guide = term->out == DISTILL_OUT_GUIDE;
    const OcrTensor *mine = guide ? ocr_model_guide_logits(m) : logits;
    const OcrTensor *theirs = guide ? ocr_model_guide_logits(tm) : ocr_model_logits(tm);
    const OcrTensor *got = guide ? gdl : &dl32;
    OcrTensor want, l1;
    ck_assert(ocr_tensor_alloc(&want, OCR_F32, ocr_cpu(), mine->ndim, mine->shape, OCR_MEM_ACTIVATIONS) == OCR_OK);
    ck_assert(ocr_tensor_alloc(&l1, OCR_F32, ocr_cpu(), 1, (int64_t[]){1}, OCR_MEM_ACTIVATIONS) == OCR_OK);
    const float w = (float)term->weight;
    switch (term->kind) {
        case DISTILL_CTC_LOGITS: {
            CtcLogitsKlParams p = {0.5f, 0, w};
            ocr_ctc_logits_kl_forward(&l1, mine, theirs, p);
            ocr_ctc_logits_kl_backward(&want, mine, theirs, p);
            break;
        }
        case DISTILL_DML: {
            DmlLossParams p = {1, w};
            ocr_dml_loss_forward(&l1, mine, theirs, p);
            ocr_dml_loss_backward(&want, NULL, mine, theirs, p);
            break;
        }
        case DISTILL_KL: {
            const OcrTensor *tg = term->masked ? ocr_model_guide_targets(m) : NULL;
            KlDivLossParams p = {1.0f, term->masked ? 0 : -1, w};
            ocr_kl_div_loss_forward(&l1, mine, theirs, tg, p);
            ocr_kl_div_loss_backward(&want, mine, theirs, tg, p);
            break;
        }
        case DISTILL_DISTANCE: {
            DistanceLossParams p = {OCR_DISTANCE_L2, 1.0f, w};
            ocr_distance_loss_forward(&l1, mine, theirs, p);
            ocr_distance_loss_backward(&want, NULL, mine, theirs, p);
            break;
        }
        case DISTILL_DKD: {
            const OcrTensor *tg = ocr_model_guide_targets(m);
            int64_t rows = ocr_tensor_numel(mine) / mine->shape[mine->ndim - 1], C = mine->shape[mine->ndim - 1];
            int64_t nt = ocr_tensor_numel(tg);
            OcrTensor sr = ocr_tensor_view(mine->data, mine->dtype, ocr_cpu(), 2, (int64_t[]){rows, C});
            OcrTensor tr = ocr_tensor_view(theirs->data, theirs->dtype, ocr_cpu(), 2, (int64_t[]){rows, C});
            OcrTensor gr = ocr_tensor_view(want.data, OCR_F32, ocr_cpu(), 2, (int64_t[]){rows, C});
            OcrTensor tv = ocr_tensor_view(tg->data, tg->dtype, ocr_cpu(), 1, &nt);
            DkdLossParams p = {(float)term->temperature, (float)term->alpha, (float)term->beta, -1, w};
            ocr_dkd_loss_forward(&l1, &sr, &tr, &tv, p);
            ocr_dkd_loss_backward(&gr, &sr, &tr, &tv, p);
            break;
        }
        default: ck_abort_msg("term %d is not a distillation term", t);
    }
    double d = max_abs_diff(got, &want);
    ck_assert_msg(d == 0.0, "%s: gradient differs from the op's by %g", term->path, d);
    float v = ((float *)l1.data)[0];
    ck_assert_msg(fabs(loss - term->weight * v) <= 1e-6 * fabs(loss) + 1e-12, "%s: loss %g, the op's %g × %g",
                  term->path, loss, (double)v, term->weight);
    ck_assert(fabs(distill_run_term_value(x->r, t) - loss) <= 1e-12 * fabs(loss) + 1e-15);
    ocr_tensor_free(&want);
    ocr_tensor_free(&l1);
    ocr_tensor_free(&dl32);
}

START_TEST(test_ctc_term_gradients_are_the_ops) {
    train_teacher();
    static const char *const terms[] = {
        "{\"DistillCTCLogits\": {\"weight\": 1.5, " PAIR "}}",
        "{\"DistillationDMLLoss\": {\"weight\": 0.5, \"act\": \"softmax\", \"use_log\": true, " PAIR "}}",
        "{\"DistillationKLDivLoss\": {\"weight\": 0.3, " PAIR "}}",
        "{\"DistillationDistanceLoss\": {\"weight\": 0.2, \"mode\": \"l2\", " PAIR "}}", NULL};
    for (int i = 0; terms[i]; i++) {
        char cfg[1200], list[1024];
        snprintf(cfg, sizeof cfg, "%s/one.json", g_dir);
        snprintf(list, sizeof list, "[" GT_CTC ", %s]", terms[i]);
        write_distill_config(cfg, g_dir, list, NULL, STUDENT_ARCH, NULL);
        Bench x;
        bench_open(&x, cfg);
        check_term(&x, 1);
        bench_close(&x);
    }
}
END_TEST

#define MH_ARCH(scale)                                                                                          \
    "{\"model_type\": \"rec\", \"algorithm\": \"SVTR_LCNet\", \"Transform\": null, \"Backbone\": {\"name\": "  \
    "\"MobileNetV1Enhance\", \"scale\": " scale ", \"last_conv_stride\": [1, 2], \"last_pool_type\": \"avg\", " \
    "\"last_pool_kernel_size\": [2, 2]}, \"Head\": {\"name\": \"MultiHead\", \"head_list\": [{\"CTCHead\": "     \
    "{\"Neck\": {\"name\": \"svtr\", \"dims\": 16, \"depth\": 1, \"hidden_dims\": 32, \"use_guide\": true}, "   \
    "\"Head\": {\"fc_decay\": 1e-05}}}, {\"NRTRHead\": {\"nrtr_dim\": 32, \"num_decoder_layers\": 1, "           \
    "\"max_text_length\": 8}}]}}"

START_TEST(test_guide_term_gradients_are_the_ops) {
    // MultiHead NRTR networks: DKD (PP-OCRv4's) and the masked KL read the guidance head. The
    // teacher here is freshly initialised (no pretrained: its outputs are as good as any).
    static const char *const terms[] = {
        "{\"DistillationDKDLoss\": {\"weight\": 0.1, " PAIR ", \"multi_head\": true, \"alpha\": 1.0, \"beta\": 2.0, "
        "\"dis_head\": \"gtc\", \"name\": \"dkd\"}}",
        "{\"DistillationKLDivLoss\": {\"weight\": 0.7, " PAIR ", \"multi_head\": true, \"dis_head\": \"gtc\"}}",
        "{\"DistillCTCLogits\": {\"weight\": 1.0, " PAIR "}}", NULL};
    for (int i = 0; terms[i]; i++) {
        char cfg[1200], list[1024];
        snprintf(cfg, sizeof cfg, "%s/mh.json", g_dir);
        snprintf(list, sizeof list,
                 "[{\"DistillationCTCLoss\": {\"weight\": 1.0, \"model_name_list\": [\"Student\"], \"key\": \"head_out\", "
                 "\"multi_head\": true}}, {\"DistillationNRTRLoss\": {\"weight\": 1.0, \"smoothing\": false, "
                 "\"model_name_list\": [\"Student\"], \"key\": \"head_out\", \"multi_head\": true}}, %s]",
                 terms[i]);
        write_distill_config(cfg, g_dir, list, MH_ARCH("0.25"), MH_ARCH("0.125"), NULL);
        // MultiLabelEncode for the MultiHead networks; no teacher checkpoint for this one.
        char *text;
        size_t n;
        ck_assert(ocr_read_file(cfg, &text, &n) == OCR_OK);
        cJSON *root = cJSON_Parse(text);
        free(text);
        cJSON *tr = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "Architecture"), "Models"), "Teacher");
        cJSON_DeleteItemFromObject(tr, "pretrained");
        const char *splits[] = {"Train", "Eval"};
        for (int k = 0; k < 2; k++) {
            cJSON *ds = cJSON_GetObjectItem(cJSON_GetObjectItem(root, splits[k]), "dataset");
            cJSON_ReplaceItemInObject(
                ds, "transforms",
                cJSON_Parse("[{\"DecodeImage\": {\"img_mode\": \"BGR\", \"channel_first\": false}}, {\"MultiLabelEncode\": "
                            "{\"gtc_encode\": \"NRTRLabelEncode\"}}, {\"RecResizeImg\": {\"image_shape\": [3, 32, 64]}}, "
                            "{\"KeepKeys\": {\"keep_keys\": [\"image\", \"label_ctc\", \"label_gtc\", \"length\", "
                            "\"valid_ratio\"]}}]"));
        }
        cJSON_ReplaceItemInObject(root, "PostProcess",
                                  cJSON_Parse("{\"name\": \"DistillationCTCLabelDecode\", \"model_name\": [\"Student\"], "
                                              "\"key\": \"head_out\", \"multi_head\": true}"));
        char *s = cJSON_Print(root);
        at_write_text(cfg, s);
        free(s);
        cJSON_Delete(root);
        Bench x;
        bench_open(&x, cfg);
        check_term(&x, 2);
        bench_close(&x);
    }
}
END_TEST

// into += src (f32, same shape).
static void add_into(OcrTensor *into, const OcrTensor *src) { ocr_accumulate(into, src); }

// A mutual-learning config (PP-OCRv3's): Student and Teacher both demo-sized and both trained
// (Teacher without pretrained weights), each one's CTC loss, DML on the CTC logits and L2 on the
// backbone maps.
static void write_mutual_learning_config(const char *cfg, const char *out_dir, const char *global_extra) {
    const char *list =
        "[" GT_CTC ", {\"DistillationCTCLoss\": {\"weight\": 1.0, \"model_name_list\": [\"Teacher\"], \"key\": \"head_out\"}},"
        " {\"DistillationDMLLoss\": {\"weight\": 0.5, \"act\": \"softmax\", \"use_log\": true, " PAIR "}},"
        " {\"DistillationDistanceLoss\": {\"weight\": 0.7, \"mode\": \"l2\", \"model_name_pairs\": [[\"Student\", "
        "\"Teacher\"]], \"key\": \"backbone_out\"}}]";
    write_distill_config(cfg, out_dir, list, STUDENT_ARCH, STUDENT_ARCH, global_extra);
    cJSON *root = at_read_json(cfg);
    cJSON *tr = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "Architecture"), "Models"), "Teacher");
    cJSON_DeleteItemFromObject(tr, "pretrained");
    cJSON_ReplaceItemInObject(tr, "freeze_params", cJSON_CreateFalse());
    char *js = cJSON_Print(root);
    at_write_text(cfg, js);
    free(js);
    cJSON_Delete(root);
}

START_TEST(test_mutual_learning_gradients_are_the_ops) {
    // Two trained networks (PP-OCRv3's mutual learning, CTC heads here): DML on the CTC logits and
    // L2 on backbone_out give each network its side of the op's gradient, the second network also
    // its own CTC loss's.
    char cfg[1200];
    snprintf(cfg, sizeof cfg, "%s/ml.json", g_dir);
    write_mutual_learning_config(cfg, g_dir, NULL);
    Bench x;
    bench_open(&x, cfg);
    distill_run_hold_peers(x.r, 1);
    const DistillConfig *dc = distill_run_config(x.r);
    const int S = dc->trained, T = distill_net_index(dc, "Teacher");
    OcrModel *m = x.m, *tm = distill_run_net(x.r, T);
    ck_assert(tm != NULL);
    ck_assert_msg(ocr_model_forward_u8(m, &x.images, &x.widths, 1) == OCR_OK, "%s", ocr_last_error());
    const OcrTensor *logits = ocr_model_logits(m);
    OcrTensor dl32;
    ck_assert(ocr_tensor_alloc(&dl32, OCR_F32, ocr_cpu(), 3, logits->shape, OCR_MEM_ACTIVATIONS) == OCR_OK);
    ocr_zero_tensor(&dl32);
    StepCtx s;
    memset(&s, 0, sizeof s);
    s.m = m;
    s.lr_cur = 1e-3;
    distill_attach(x.r, &s);
    double loss;
    ck_assert_msg(s.extra.fn(s.extra.user, &s, &x.b, logits, &dl32, 1.0f, &loss) == OCR_OK, "%s", ocr_last_error());
    const OcrTensor *tl = distill_run_logits(x.r, T);
    const OcrTensor *sb = ocr_model_backbone_out(m), *tb = ocr_model_backbone_out(tm);
    ck_assert(tl && sb && tb);
    // The student's CTC-logit gradient: DML's first side × 0.5.
    OcrTensor want, tmp, l1;
    ck_assert(ocr_tensor_alloc(&want, OCR_F32, ocr_cpu(), 3, logits->shape, OCR_MEM_ACTIVATIONS) == OCR_OK);
    ck_assert(ocr_tensor_alloc(&tmp, OCR_F32, ocr_cpu(), 3, logits->shape, OCR_MEM_ACTIVATIONS) == OCR_OK);
    ck_assert(ocr_tensor_alloc(&l1, OCR_F32, ocr_cpu(), 1, (int64_t[]){2}, OCR_MEM_ACTIVATIONS) == OCR_OK);
    ocr_dml_loss_backward(&want, NULL, logits, tl, (DmlLossParams){1, 0.5f});
    ck_assert(max_abs_diff(&dl32, &want) == 0.0);
    // The teacher's: its CTC loss's gradient, then DML's second side × 0.5.
    ocr_zero_tensor(&want);
    OcrTensor inf;
    ck_assert(ocr_tensor_alloc(&inf, OCR_I32, ocr_cpu(), 1, (int64_t[]){2}, OCR_MEM_ACTIVATIONS) == OCR_OK);
    CtcParams cp = {OCR_CTC_REDUCTION_PADDLE, 1, 0, 1.0f};
    ocr_ctc_loss_forward(&l1, NULL, &tmp, &inf, tl, &x.b.labels, &x.b.lengths, NULL, cp);
    add_into(&want, &tmp);
    ocr_dml_loss_backward(NULL, &tmp, logits, tl, (DmlLossParams){1, 0.5f});
    add_into(&want, &tmp);
    const OcrTensor *tg = distill_run_grad(x.r, T, DISTILL_OUT_CTC);
    ck_assert(tg != NULL);
    ck_assert_msg(max_abs_diff(tg, &want) == 0.0, "teacher CTC gradient differs by %g", max_abs_diff(tg, &want));
    // Backbone outputs: the distance's two sides × 0.7.
    OcrTensor bw;
    ck_assert(ocr_tensor_alloc(&bw, OCR_F32, ocr_cpu(), sb->ndim, sb->shape, OCR_MEM_ACTIVATIONS) == OCR_OK);
    ocr_distance_loss_backward(&bw, NULL, sb, tb, (DistanceLossParams){OCR_DISTANCE_L2, 1.0f, 0.7f});
    const OcrTensor *sbg = distill_run_grad(x.r, S, DISTILL_OUT_BACKBONE), *tbg = distill_run_grad(x.r, T, DISTILL_OUT_BACKBONE);
    ck_assert(sbg && tbg);
    ck_assert(max_abs_diff(sbg, &bw) == 0.0);
    ocr_distance_loss_backward(NULL, &bw, sb, tb, (DistanceLossParams){OCR_DISTANCE_L2, 1.0f, 0.7f});
    ck_assert(max_abs_diff(tbg, &bw) == 0.0);
    ocr_tensor_free(&bw);
    ocr_tensor_free(&inf);
    ocr_tensor_free(&want);
    ocr_tensor_free(&tmp);
    ocr_tensor_free(&l1);
    ocr_tensor_free(&dl32);
    bench_close(&x);
}
END_TEST

// Mutual learning stopped inside an epoch and resumed from `latest` is bit-identical to an
// uninterrupted run, for both networks: the second one's optimizer moments, O2 masters, loss
// scaler and dropout counter are in the checkpoint (companion.Teacher.*) beside its weights.
static void mutual_learning_resume_case(const char *tag, const char *global_extra) {
    char cfg[1200], a[600], b[600], ova[700], ovb[700], ck[700];
    snprintf(cfg, sizeof cfg, "%s/ml_%s.json", g_dir, tag);
    snprintf(a, sizeof a, "%s/ml_%s_a", g_dir, tag);
    snprintf(b, sizeof b, "%s/ml_%s_b", g_dir, tag);
    write_mutual_learning_config(cfg, a, global_extra);
    snprintf(ova, sizeof ova, "Global.save_model_dir=%s", a);
    snprintf(ovb, sizeof ovb, "Global.save_model_dir=%s", b);
    snprintf(ck, sizeof ck, "Global.checkpoints=%s/latest", b);
    char err[8192];
    // 32 lines at batch 8, 3 epochs: 12 steps; the stop after 6 is inside the second epoch.
    const char *straight[] = {"train", "-c", cfg, "-o", ova, NULL};
    const char *stop[] = {"train", "-c", cfg, "--max-steps", "6", "-o", ovb, NULL};
    const char *resume[] = {"train", "-c", cfg, "-o", ovb, ck, NULL};
    ck_assert_msg(at_run_capture(cmd_train, straight, err, sizeof err) == 0, "%s: %s", tag, err);
    ck_assert_msg(at_run_capture(cmd_train, stop, err, sizeof err) == 0, "%s: %s", tag, err);
    ck_assert_msg(at_run_capture(cmd_train, resume, err, sizeof err) == 0, "%s: %s", tag, err);
    ck_assert_msg(!strstr(err, "start afresh"), "%s: %s", tag, err);
    const char *files[] = {"latest/model.safetensors", "latest/optimizer.safetensors",
                           "latest/companion.Teacher.optimizer.safetensors", "latest/companion.Teacher.state.json",
                           NULL};
    for (int i = 0; files[i]; i++) {
        char pa[800], pb[800];
        snprintf(pa, sizeof pa, "%s/%s", a, files[i]);
        snprintf(pb, sizeof pb, "%s/%s", b, files[i]);
        ck_assert_msg(at_exists(pa), "%s: no %s", tag, pa);
        ck_assert_msg(at_same_file(pa, pb), "%s: %s differs between the uninterrupted and the resumed run", tag,
                      files[i]);
    }
    int na, nb;
    double *la = at_read_losses(a, &na, NULL), *lb = at_read_losses(b, &nb, NULL);
    ck_assert_int_eq(na, 12);
    ck_assert_int_eq(na, nb);
    for (int i = 0; i < na; i++) ck_assert_msg(la[i] == lb[i], "%s: loss of step %d differs", tag, i + 1);
    free(la);
    free(lb);
}

START_TEST(test_mutual_learning_resume_is_bit_identical) {
    mutual_learning_resume_case("fp32", NULL);
    // A checkpoint without the second network's state (written before it was kept) still
    // resumes: its moments and scale start afresh, with a warning naming it.
    char cfg[1200], c[600], ovc[700], ck[700], p[800], err[8192];
    snprintf(cfg, sizeof cfg, "%s/ml_fp32.json", g_dir);
    snprintf(c, sizeof c, "%s/ml_old", g_dir);
    snprintf(ovc, sizeof ovc, "Global.save_model_dir=%s", c);
    snprintf(ck, sizeof ck, "Global.checkpoints=%s/latest", c);
    const char *stop[] = {"train", "-c", cfg, "--max-steps", "6", "-o", ovc, NULL};
    ck_assert_msg(at_run_capture(cmd_train, stop, err, sizeof err) == 0, "%s", err);
    const char *gone[] = {"optimizer.safetensors", "state.json", NULL};
    for (int i = 0; gone[i]; i++) {
        snprintf(p, sizeof p, "%s/latest/companion.Teacher.%s", c, gone[i]);
        ck_assert_msg(unlink(p) == 0, "no %s", p);
    }
    const char *resume[] = {"train", "-c", cfg, "--max-steps", "8", "-o", ovc, ck, NULL};
    ck_assert_msg(at_run_capture(cmd_train, resume, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(strstr(err, "no training state for Teacher") && strstr(err, "start afresh"), "%s", err);
    // FP16-O2 with a dynamic scale: masters, the scaler's state and skipped steps carry over
    // (a trained peer needs amp_overflow skip).
    mutual_learning_resume_case("fp16_o2", "{\"use_amp\": true, \"amp_level\": \"O2\", \"amp_dtype\": \"float16\", "
                                "\"scale_loss\": 65536, \"use_dynamic_loss_scaling\": true, \"incr_every_n_steps\": 3, "
                                "\"amp_overflow\": \"skip\"}");
}
END_TEST

// Optimizer.clip_norm clips the second trained network's gradients too (each tensor by its own
// norm): after two steps at a clip far below Adam's epsilon its weights are not the unclipped
// run's. (The first step's rate is warm-up's zero, and the second network's update in the second
// step comes before the first network's, so the trained network's own clipping cannot reach it
// yet: without the second network's clipping the two runs hold the same Teacher.* bits.) Optimizer.clip_norm_global is refused with mutual learning, naming the key.
START_TEST(test_mutual_learning_clipping) {
    char cfg[1200], a[600], b[600], ova[700], ovb[700], err[8192];
    snprintf(cfg, sizeof cfg, "%s/ml_clip.json", g_dir);
    snprintf(a, sizeof a, "%s/ml_clip_a", g_dir);
    snprintf(b, sizeof b, "%s/ml_clip_b", g_dir);
    write_mutual_learning_config(cfg, a, NULL);
    snprintf(ova, sizeof ova, "Global.save_model_dir=%s", a);
    snprintf(ovb, sizeof ovb, "Global.save_model_dir=%s", b);
    const char *plain[] = {"train", "-c", cfg, "--max-steps", "2", "-o", ova, NULL};
    const char *clipped[] = {"train", "-c", cfg, "--max-steps", "2", "-o", ovb, "Optimizer.clip_norm=1e-9", NULL};
    ck_assert_msg(at_run_capture(cmd_train, plain, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(at_run_capture(cmd_train, clipped, err, sizeof err) == 0, "%s", err);
    char wa[800], wb[800];
    snprintf(wa, sizeof wa, "%s/latest/model.safetensors", a);
    snprintf(wb, sizeof wb, "%s/latest/model.safetensors", b);
    const char *const names[] = {"Teacher.head.fc.weight", "Student.head.fc.weight"};
    for (int k = 0; k < 2; k++) {
        int64_t na, nb;
        float *x = st_tensor(wa, names[k], &na), *y = st_tensor(wb, names[k], &nb);
        ck_assert_msg(x && y && na == nb, "%s", names[k]);
        double d = 0;
        for (int64_t i = 0; i < na; i++) d = fmax(d, fabs((double)x[i] - (double)y[i]));
        // Unclipped, Adam moves each element by about the learning rate; clipped, by lr·g/eps
        // with |g| <= 1e-9: a tenth of it at most.
        ck_assert_msg(d > 1e-6, "%s: the clipped and unclipped runs' weights differ by at most %g", names[k], d);
        free(x);
        free(y);
    }
    const char *global[] = {"train", "-c", cfg, "--max-steps", "1", "-o", ovb, "Optimizer.clip_norm_global=1.0", NULL};
    ck_assert_int_ne(at_run_capture(cmd_train, global, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "Optimizer.clip_norm_global") && strstr(err, "mutual learning"), "%s", err);
}
END_TEST

// ---- the teacher in low precision (AMP) -------------------------------------------------------------------

// Under AMP O1/O2 the frozen teacher's forward runs in the AMP dtype (its convolutions and linears;
// the black-listed op types stay f32, O2 keeps BN parameters f32) while the distillation ops, op type distill_loss (black),
// read f32: a bf16 teacher output is widened before the op (exact). On the bench batch each term's
// value with the bf16 teacher is within bf16 tolerance of the FP32 teacher's, and every term's op
// read f32 inputs; whole O1/O2 steps' losses are within bf16 tolerance of FP32's.
START_TEST(test_amp_teacher_low_precision) {
    train_teacher();
    static const char *const globals[3] = {
        "{\"use_amp\": false}", "{\"use_amp\": true, \"amp_level\": \"O1\", \"amp_dtype\": \"bfloat16\"}",
        "{\"use_amp\": true, \"amp_level\": \"O2\", \"amp_dtype\": \"bfloat16\"}"};
    double val[3][8];
    int nterms = 0;
    for (int k = 0; k < 3; k++) {
        char cfg[1200];
        snprintf(cfg, sizeof cfg, "%s/amp%d.json", g_dir, k);
        write_distill_config(cfg, g_dir, CTC_TERMS, NULL, STUDENT_ARCH, globals[k]);
        Bench x;
        bench_open(&x, cfg);
        const DistillConfig *dc = distill_run_config(x.r);
        int t = distill_net_index(dc, "Teacher");
        OcrModel *tm = distill_run_net(x.r, t);
        // The teacher's compute-heavy ops in bf16 under AMP, f32 otherwise.
        ck_assert_int_eq(distill_run_net_dtype(x.r, t), k ? OCR_BF16 : OCR_F32);
        const OcrOpTable *ops = ocr_model_ops(tm);
        int convs = 0;
        for (int i = 0; i < ops->count; i++) {
            if (strcmp(ops->items[i].type, "conv2d") == 0) {
                ck_assert_int_eq(ops->items[i].compute_dtype, k ? OCR_BF16 : OCR_F32);
                convs++;
            }
        }
        ck_assert_int_gt(convs, 10);
        // O2: the teacher's conv weights are stored in bf16 (no f32 masters kept for it).
        if (k == 2) {
            OcrParamTable *tp = ocr_model_params(tm);
            ck_assert_int_eq(tp->items[ocr_params_find(tp, "backbone.conv1._conv.weight")].dtype, OCR_BF16);
            ck_assert_int_eq(tp->items[ocr_params_find(tp, "backbone.conv1._batch_norm.weight")].dtype, OCR_F32);
        }
        // One extra-loss pass with the run's AMP policy (the student itself in FP32 here).
        AmpConfig ac;
        ck_assert(amp_config_from_config(&ac, x.cfg) == OCR_OK);
        AmpEngine e;
        amp_engine_init(&e, &ac);
        ck_assert_msg(ocr_model_forward_u8(x.m, &x.images, &x.widths, 1) == OCR_OK, "%s", ocr_last_error());
        const OcrTensor *logits = ocr_model_logits(x.m);
        OcrTensor dl32;
        ck_assert(ocr_tensor_alloc(&dl32, OCR_F32, ocr_cpu(), 3, logits->shape, OCR_MEM_ACTIVATIONS) == OCR_OK);
        ocr_zero_tensor(&dl32);
        StepCtx s;
        memset(&s, 0, sizeof s);
        s.m = x.m;
        s.amp = &e;
        distill_attach(x.r, &s);
        double loss;
        ck_assert_msg(s.extra.fn(s.extra.user, &s, &x.b, logits, &dl32, 1.0f, &loss) == OCR_OK, "%s", ocr_last_error());
        if (k) ck_assert_int_eq(ocr_model_logits(tm)->dtype, OCR_BF16);  // the teacher's own output
        nterms = dc->nterms;
        ck_assert_int_le(nterms, 8);
        for (int i = 0; i < nterms; i++) {
            val[k][i] = NAN;
            if (!distill_run_term_active(x.r, i) || dc->terms[i].kind >= DISTILL_GT_CTC) continue;
            ocr_dtype_t da, db;
            ck_assert(distill_run_term_dtypes(x.r, i, &da, &db));
            ck_assert_msg(da == OCR_F32 && db == OCR_F32, "%s: the op read %s and %s", dc->terms[i].path,
                          ocr_dtype_name(da), ocr_dtype_name(db));
            val[k][i] = distill_run_term_value(x.r, i);
        }
        amp_engine_free(&e);
        ocr_tensor_free(&dl32);
        bench_close(&x);
    }
    int compared = 0;
    for (int k = 1; k < 3; k++)
        for (int i = 0; i < nterms; i++) {
            if (isnan(val[0][i])) continue;
            // bf16 keeps 8 significant bits (relative rounding 2^-9 = 2e-3 per value); through the
            // teacher's layers the logits move by about that, and a term's value by as much
            // (observed at most 1.3e-3 relative): the bound is 1e-2 relative, plus 1e-4 near zero.
            double d = fabs(val[k][i] - val[0][i]), tol = 1e-2 * fabs(val[0][i]) + 1e-4;
            printf("amp teacher O%d term %d: %.6g vs FP32 %.6g (rel %.2e)\n", k, i, val[k][i], val[0][i],
                   d / fabs(val[0][i]));
            ck_assert_msg(d <= tol, "O%d term %d: %.9g vs FP32 %.9g", k, i, val[k][i], val[0][i]);
            ck_assert_msg(val[k][i] != val[0][i], "O%d term %d: the teacher did not run in bf16", k, i);
            compared++;
        }
    ck_assert_int_ge(compared, 8);
    // Whole steps (the student in bf16 too): the first step's losses (before any update) agree
    // within bf16 tolerance, and the log says the teacher's dtype.
    double first[3], dist[3];
    for (int k = 0; k < 3; k++) {
        char cfg[1200], out[600], err[16384];
        snprintf(cfg, sizeof cfg, "%s/ampstep%d.json", g_dir, k);
        snprintf(out, sizeof out, "%s/ampout%d", g_dir, k);
        write_distill_config(cfg, out, CTC_TERMS, NULL, STUDENT_ARCH, globals[k]);
        const char *a[] = {"train", "-c", cfg, "--max-steps", "2", NULL};
        int rc = at_run_capture(cmd_train, a, err, sizeof err);
        ck_assert_msg(rc == 0, "amp %d: %s", k, err);
        ck_assert_msg(strstr(err, k ? "forward passes (bfloat16)" : "forward passes (float32)"), "%s", err);
        int n;
        double *l = at_read_losses(out, &n, NULL);
        ck_assert_int_eq(n, 2);
        first[k] = l[0];
        free(l);
        char mp[700], *text;
        size_t size;
        snprintf(mp, sizeof mp, "%s/metrics.jsonl", out);
        ck_assert(ocr_read_file(mp, &text, &size) == OCR_OK);
        const char *q = strstr(text, "\"loss_distill\":");
        ck_assert(q);
        dist[k] = atof(q + 15);
        free(text);
    }
    for (int k = 1; k < 3; k++) {
        printf("amp step O%d: loss %.6g (FP32 %.6g), loss_distill %.6g (FP32 %.6g)\n", k, first[k], first[0], dist[k],
               dist[0]);
        ck_assert_msg(fabs(first[k] - first[0]) <= 1e-2 * fabs(first[0]), "O%d loss %.9g vs %.9g", k, first[k], first[0]);
        ck_assert_msg(fabs(dist[k] - dist[0]) <= 1e-2 * fabs(dist[0]) + 1e-4, "O%d distill %.9g vs %.9g", k, dist[k],
                      dist[0]);
    }
    // Global.distill_teacher_fp32 keeps the teacher in FP32 under AMP.
    char cfg[1200];
    snprintf(cfg, sizeof cfg, "%s/ampfp32.json", g_dir);
    write_distill_config(cfg, g_dir, CTC_TERMS, NULL, STUDENT_ARCH,
                         "{\"use_amp\": true, \"amp_level\": \"O2\", \"amp_dtype\": \"bfloat16\", "
                         "\"distill_teacher_fp32\": true}");
    Bench x;
    bench_open(&x, cfg);
    ck_assert_int_eq(distill_run_net_dtype(x.r, distill_net_index(distill_run_config(x.r), "Teacher")), OCR_F32);
    bench_close(&x);
}
END_TEST

// A subcommand with its stdout captured into out (NUL-terminated, truncated to cap).
static int run_stdout(at_cmd_fn fn, const char *const *args, char *out, size_t cap) {
    char path[1024];
    int fd = ocr_test_tmpfile(path, sizeof path, "ocr_app_stdout_");
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    int rc = at_run(fn, args);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, out, cap - 1);
    out[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return rc;
}

// ---- the teacher in the capacity planner ---------------------------------------------------------------------

// `ocrtrain capacity` on a distillation config counts the frozen teacher: its weights (and O1 cast
// cache) and its forward's activation arena, as their own figures inside the totals; a real
// distillation step's params and activations peaks are what the plan says; the CLI prints them.
START_TEST(test_capacity_counts_teacher) {
    train_teacher();
    char cfg[1200];
    snprintf(cfg, sizeof cfg, "%s/cap.json", g_dir);
    write_distill_config(cfg, g_dir, CTC_TERMS, NULL, STUDENT_ARCH, NULL);
    OcrConfig *c;
    RunConfig rc;
    ck_assert_msg(run_config_load(&c, &rc, cfg, NULL, 0, RUN_NEED_TRAIN_SECTION) == OCR_OK, "%s", ocr_last_error());
    // The teacher's own weights and statistics, as built.
    OcrModel *tm;
    char tcfg_ov[1200];
    snprintf(tcfg_ov, sizeof tcfg_ov, "%s", g_teacher_cfg);
    OcrConfig *tc;
    RunConfig trc;
    ck_assert(run_config_load(&tc, &trc, tcfg_ov, NULL, 0, RUN_NEED_TRAIN_SECTION) == OCR_OK);
    ck_assert(ocr_model_from_config(&tm, tc) == OCR_OK);
    const int64_t tw = (int64_t)ocr_model_params(tm)->bytes + (int64_t)ocr_model_stats(tm)->bytes;
    ocr_model_free(tm);
    ocr_config_free(tc);
    const char *prec[2] = {"fp32", "bf16-o2"};
    CapacityPrecision cp[2];
    for (int k = 0; k < 2; k++) {
        ck_assert_msg(capacity_plan(c, prec[k], (int64_t)1 << 30, &cp[k]) == OCR_OK, "%s", ocr_last_error());
        ck_assert_int_eq(cp[k].teacher_networks, 1);
        ck_assert_int_eq(cp[k].peer_networks, 0);
        ck_assert(cp[k].teacher_activations_per_sample > 0);
        int64_t fixed = cp[k].teacher_weights_bytes + cp[k].teacher_activations_fixed, per = cp[k].teacher_activations_per_sample;
        for (int i = 0; i < OCR_MEM_CATEGORY_COUNT; i++) fixed += cp[k].fixed_by_category[i], per += cp[k].per_sample_by_category[i];
        ck_assert_int_eq(fixed, cp[k].fixed_bytes);
        ck_assert_int_eq(per, cp[k].bytes_per_sample);
        // A real step (student and teacher) allocates what the plan says, within 5 %.
        OcrMemStats ms;
        ck_assert_msg(capacity_measure(c, prec[k], 8, &ms) == OCR_OK, "%s", ocr_last_error());
        double planned = (double)capacity_bytes(&cp[k], 8), peak = (double)ms.peak_total;
        for (int i = 0; getenv("DISTILL_CAP_DEBUG") && i < OCR_MEM_CATEGORY_COUNT; i++)
            fprintf(stderr, "  %s: planned %lld + 8 x %lld, measured peak %lld\n", ocr_mem_category_name(i),
                    (long long)cp[k].fixed_by_category[i], (long long)cp[k].per_sample_by_category[i],
                    (long long)ms.peak[i]);
        fprintf(stderr, "capacity %s: teacher weights %lld, activations %lld + %lld/sample; planned %.0f, measured %.0f\n",
               prec[k], (long long)cp[k].teacher_weights_bytes, (long long)cp[k].teacher_activations_fixed,
               (long long)cp[k].teacher_activations_per_sample, planned, peak);
        // The teacher's parts, category by category (op scratch is extrapolated from probes, the
        // planner's own estimate, loose at this tiny size): the params peak is the student's tables
        // and the teacher's weights exactly; the activations peak the two arenas (within 1 %).
        ck_assert_int_eq(ms.peak[OCR_MEM_PARAMS], cp[k].fixed_by_category[OCR_MEM_PARAMS] + cp[k].teacher_weights_bytes);
        double act = (double)(cp[k].fixed_by_category[OCR_MEM_ACTIVATIONS] + cp[k].teacher_activations_fixed +
                              8 * (cp[k].per_sample_by_category[OCR_MEM_ACTIVATIONS] + cp[k].teacher_activations_per_sample));
        ck_assert_msg(fabs(act - (double)ms.peak[OCR_MEM_ACTIVATIONS]) <= 0.01 * act, "%s: activations planned %.0f, "
                      "measured %lld", prec[k], act, (long long)ms.peak[OCR_MEM_ACTIVATIONS]);
        ck_assert_msg(fabs(planned - peak) <= 0.15 * peak, "%s: planned %.0f, measured %.0f", prec[k], planned, peak);
    }
    // FP32: the teacher's weights are its tables; bf16 O2: its conv/linear weights in bf16.
    ck_assert_int_eq(cp[0].teacher_weights_bytes, tw);
    ck_assert(cp[1].teacher_weights_bytes < cp[0].teacher_weights_bytes * 3 / 4);
    ck_assert(cp[1].teacher_activations_per_sample < cp[0].teacher_activations_per_sample);
    ocr_config_free(c);
    // The CLI says it (text and JSON).
    char out[32768];
    const char *a[] = {"capacity", "-c", cfg, "--memory", "1G", NULL};
    int r = run_stdout(cmd_capacity, a, out, sizeof out);
    ck_assert_msg(r == 0, "%s", out);
    ck_assert_msg(strstr(out, "teacher (1 frozen network(s), included above): weights"), "%s", out);
    const char *aj[] = {"capacity", "-c", cfg, "--memory", "1G", "--json", NULL};
    r = run_stdout(cmd_capacity, aj, out, sizeof out);
    ck_assert_msg(r == 0, "%s", out);
    ck_assert_msg(strstr(out, "\"teacher\"") && strstr(out, "\"activations_bytes_per_sample\""), "%s", out);
}
END_TEST

static Suite *distill_train_suite(void) {
    Suite *s = suite_create("distill_train");
    TCase *tc = tcase_create("distill_train");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_distill_trains_teacher_fixed);
    tcase_add_test(tc, test_refused_ctc_weight);
    tcase_add_test(tc, test_teacher_cache_is_exact);
    tcase_add_test(tc, test_ctc_term_gradients_are_the_ops);
    tcase_add_test(tc, test_guide_term_gradients_are_the_ops);
    tcase_add_test(tc, test_mutual_learning_gradients_are_the_ops);
    tcase_add_test(tc, test_mutual_learning_resume_is_bit_identical);
    tcase_add_test(tc, test_mutual_learning_clipping);
    tcase_add_test(tc, test_amp_teacher_low_precision);
    tcase_add_test(tc, test_capacity_counts_teacher);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(distill_train_suite()); }
