// PaddleOCR's distillation configs as they are (tests/training/data: ch_PP-OCRv3_rec_distillation.yml
// as published, ch_PP-OCRv4_rec_distill.yml with its missing &max_text_length anchor added), with
// only the data paths and the dictionary overridden: they validate, become the trained network's
// config (Metric.key Student) with the rest under `Distillation`, and every loss entry becomes the
// terms PaddleOCR's CombinedLoss would run; PP-OCRv3's trains as it is (mutual learning). The
// refusals name the key, before any work: a loss naming a network or a head that does not exist,
// an unknown loss, networks with different dictionaries, a frozen network in the optimizer's
// parameter groups, a frozen scored network, a KL term against a second trained network.
#define _GNU_SOURCE  // memmem
#include <math.h>
#include <string.h>

#include "cli/commands.h"
#include "models/model.h"
#include "training/distill_config.h"
#include "training/run_config.h"
#include "tests/training/training_test_util.h"

static char *g_dir;
static char g_v3[1024], g_v4[1024];
static char g_ov[8][1200];
static int g_nov;

static void setup(void) {
    snprintf(g_v3, sizeof g_v3, "%s/tests/training/data/ppocrv3_rec_distillation.yml", OCR_SOURCE_DIR);
    snprintf(g_v4, sizeof g_v4, "%s/tests/training/data/ppocrv4_rec_distill.yml", OCR_SOURCE_DIR);
    g_dir = at_tmpdir();
    at_make_digits(g_dir, "train", 8, 3, 21);
    at_make_digits(g_dir, "eval", 4, 3, 22);
    int n = 0;
    snprintf(g_ov[n++], sizeof g_ov[0], "Global.character_dict_path=%s/dict.txt", g_dir);
    snprintf(g_ov[n++], sizeof g_ov[0], "Train.dataset.data_dir=%s/train", g_dir);
    snprintf(g_ov[n++], sizeof g_ov[0], "Train.dataset.label_file_list=[%s/train/labels.txt]", g_dir);
    snprintf(g_ov[n++], sizeof g_ov[0], "Eval.dataset.data_dir=%s/eval", g_dir);
    snprintf(g_ov[n++], sizeof g_ov[0], "Eval.dataset.label_file_list=[%s/eval/labels.txt]", g_dir);
    snprintf(g_ov[n++], sizeof g_ov[0], "Global.save_model_dir=%s/out", g_dir);
    g_nov = n;
}

static void teardown(void) {
    ocr_test_remove_tree(g_dir);
    free(g_dir);
}

// The v4 file's data settings that go with its 23 label files and its Eval dictionary.
// Eval's RecResizeImg eval_mode (variable width, PaddleOCR's Eval batch of 1) is refused: this
// trainer's datasets give fixed-shape batches (test_v4_published_teacher_refused).
static const char *V4_DATA[] = {"Train.dataset.ratio_list=[1.0]", "Global.checkpoints=null",
                                "Eval.dataset.transforms.2.RecResizeImg.eval_mode=false", NULL};
// The v4 teacher as published (Conv mixers, prenorm) but for last_stage: with last_stage false
// PaddleOCR's SVTRNet returns its (B, 240, 256) token sequence and the SVTR neck's first Conv2D
// raises on it (PaddleOCR cannot run the published teacher either; test_v4_published_teacher_refused).
// last_stage true feeds the same 192-channel heads PaddleOCR builds (MultiHead's in_channels is
// SVTRNet.out_channels, 192, either way); it adds backbone.last_conv (256 x 192) and nothing else.
static const char *V4_TEACHER[] = {"Architecture.Models.Teacher.Backbone.last_stage=true", NULL};

static ocr_status_t load(const char *yml, const char *const *extra, const char *const *extra2, OcrConfig **cfg,
                         RunConfig *rc) {
    const char *ov[48];
    int n = 0;
    for (int i = 0; i < g_nov; i++) ov[n++] = g_ov[i];
    if (yml == g_v4) {
        for (int i = 0; V4_DATA[i]; i++) ov[n++] = V4_DATA[i];
        for (int i = 0; V4_TEACHER[i] && !getenv("DISTILL_TEST_PUBLISHED_TEACHER"); i++) ov[n++] = V4_TEACHER[i];
    }
    for (int i = 0; extra && extra[i]; i++) ov[n++] = extra[i];
    for (int i = 0; extra2 && extra2[i]; i++) ov[n++] = extra2[i];
    return run_config_load(cfg, rc, yml, ov, n, RUN_NEED_TRAIN | RUN_NEED_EVAL);
}

static void expect_refusal(const char *yml, const char *const *extra, const char *const *want) {
    OcrConfig *cfg = NULL;
    RunConfig rc;
    ocr_status_t st = load(yml, extra, NULL, &cfg, &rc);
    ck_assert_msg(st != OCR_OK, "accepted: %s", extra ? extra[0] : "");
    for (int i = 0; want[i]; i++)
        ck_assert_msg(strstr(ocr_last_error(), want[i]), "\"%s\" not in: %s", want[i], ocr_last_error());
}

static int count_kind(const DistillConfig *dc, distill_term_kind_t k) {
    int n = 0;
    for (int i = 0; i < dc->nterms; i++) n += dc->terms[i].kind == k;
    return n;
}

START_TEST(test_v3_config_reads) {
    OcrConfig *cfg;
    RunConfig rc;
    ck_assert_msg(load(g_v3, NULL, NULL, &cfg, &rc) == OCR_OK, "%s", ocr_last_error());
    // The config is the Student's now.
    const char *s;
    ck_assert_int_eq(ocr_config_get_string(cfg, "Architecture.Backbone.name", NULL, &s), OCR_OK);
    ck_assert_str_eq(s, "MobileNetV1Enhance");
    ck_assert_int_eq(ocr_config_get_string(cfg, "Loss.name", NULL, &s), OCR_OK);
    ck_assert_str_eq(s, "MultiLoss");
    ck_assert_int_eq(ocr_config_get_string(cfg, "Loss.loss_config_list.1.SARLoss.ignore_index", "x", &s), OCR_OK);
    ck_assert_int_eq(ocr_config_get_string(cfg, "Metric.name", NULL, &s), OCR_OK);
    ck_assert_str_eq(s, "RecMetric");
    ck_assert_int_eq(rc.ignore_space, 0);  // Metric.ignore_space: False carried over
    ck_assert(ocr_config_has(cfg, "Distillation.Architecture.Models.Teacher"));
    DistillConfig *dc = malloc(sizeof *dc);
    ck_assert_msg(distill_config_read(dc, cfg) == OCR_OK, "%s", ocr_last_error());
    ck_assert(dc->enabled);
    ck_assert_int_eq(dc->nnets, 2);
    ck_assert_str_eq(dc->nets[dc->trained].name, "Student");
    ck_assert_int_eq(dc->nets[0].frozen, 0);
    ck_assert_int_eq(dc->nets[0].arch.multihead.kind, OCR_GUIDE_SAR);
    ck_assert_int_eq(dc->nets[0].arch.num_classes, 12);  // 10 digits + blank + space
    // 2 DML (ctc, sar), 1 distance, CTC and SAR for both networks.
    ck_assert_int_eq(dc->nterms, 7);
    ck_assert_int_eq(count_kind(dc, DISTILL_DML), 2);
    ck_assert_int_eq(count_kind(dc, DISTILL_DISTANCE), 1);
    ck_assert_int_eq(count_kind(dc, DISTILL_GT_CTC), 2);
    ck_assert_int_eq(count_kind(dc, DISTILL_GT_SAR), 2);
    ck_assert_int_eq(dc->terms[0].out, DISTILL_OUT_CTC);
    ck_assert_int_eq(dc->terms[1].out, DISTILL_OUT_GUIDE);
    ck_assert_double_eq(dc->terms[1].weight, 0.5);
    ck_assert_str_eq(dc->terms[1].name, "dml_sar");
    ck_assert_int_eq(dc->terms[2].out, DISTILL_OUT_BACKBONE);
    ck_assert_int_eq(dc->ndecode, 2);
    free(dc);
    // The rewritten config is read again as it is (a run's saved config, compare's clones).
    OcrConfig *c2;
    ck_assert_int_eq(ocr_config_clone(&c2, cfg), OCR_OK);
    RunConfig rc2;
    ck_assert_msg(run_config_read(&rc2, c2, RUN_NEED_TRAIN | RUN_NEED_EVAL) == OCR_OK, "%s", ocr_last_error());
    ocr_config_free(c2);
    ocr_config_free(cfg);
    // `ocrtrain info` lists the student's layers.
    const char *info[] = {"info", "-c", g_v3, "-o", g_ov[0], NULL};
    char err[8192];
    ck_assert_int_eq(at_run_capture(cmd_info, info, err, sizeof err), 0);
}
END_TEST

START_TEST(test_v4_config_reads) {
    OcrConfig *cfg;
    RunConfig rc;
    ck_assert_msg(load(g_v4, NULL, NULL, &cfg, &rc) == OCR_OK, "%s", ocr_last_error());
    const char *s;
    ck_assert_int_eq(ocr_config_get_string(cfg, "Architecture.Backbone.name", NULL, &s), OCR_OK);
    ck_assert_str_eq(s, "PPLCNetV3");
    int smoothing = 1;
    ck_assert_int_eq(ocr_config_get_bool(cfg, "Loss.loss_config_list.1.NRTRLoss.smoothing", 1, &smoothing), OCR_OK);
    ck_assert_int_eq(smoothing, 0);  // DistillationNRTRLoss smoothing: false
    DistillConfig *dc = malloc(sizeof *dc);
    ck_assert_msg(distill_config_read(dc, cfg) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(dc->nnets, 2);
    int t = distill_net_index(dc, "Teacher");
    ck_assert_int_eq(dc->nets[t].frozen, 1);
    ck_assert_int_eq(dc->nets[t].arch.backbone, OCR_BACKBONE_SVTRNET);
    ck_assert_int_eq(dc->nets[t].arch.multihead.kind, OCR_GUIDE_NRTR);
    ck_assert_int_eq(dc->nets[t].arch.multihead.nrtr_dim, 384);
    ck_assert_int_eq(dc->nterms, 4);
    ck_assert_int_eq(dc->terms[0].kind, DISTILL_DKD);
    ck_assert_int_eq(dc->terms[0].out, DISTILL_OUT_GUIDE);
    ck_assert_double_eq_tol(dc->terms[0].weight, 0.1, 1e-12);
    ck_assert_double_eq(dc->terms[0].beta, 2.0);
    ck_assert_double_eq(dc->terms[0].temperature, 1.0);
    ck_assert_int_eq(dc->terms[3].kind, DISTILL_CTC_LOGITS);
    ck_assert_double_eq(dc->terms[3].temperature, 0.5);
    ck_assert_int_eq(dc->terms[3].a, dc->trained);
    free(dc);
    ocr_config_free(cfg);
}
END_TEST

// The trained network's own `pretrained` (Architecture.Models.Student.pretrained) is where it
// starts: it becomes Global.pretrained_model unless that is set, which PaddleOCR loads after the
// sub-networks' and so wins.
START_TEST(test_student_pretrained_is_its_start) {
    char w[1200], own[1300], global[1300];
    snprintf(w, sizeof w, "%s/student_init.safetensors", g_dir);
    at_write_text(w, "");
    snprintf(own, sizeof own, "Architecture.Models.Student.pretrained=%s", w);
    const char *ov[] = {own, "Global.pretrained_model=null", NULL};
    OcrConfig *cfg;
    RunConfig rc;
    ck_assert_msg(load(g_v4, ov, NULL, &cfg, &rc) == OCR_OK, "%s", ocr_last_error());
    const char *s = NULL;
    ck_assert_int_eq(ocr_config_get_string(cfg, "Global.pretrained_model", NULL, &s), OCR_OK);
    ck_assert_msg(s && strcmp(s, w) == 0, "Global.pretrained_model is %s", s ? s : "(null)");
    ocr_config_free(cfg);
    snprintf(global, sizeof global, "Global.pretrained_model=%s/other.safetensors", g_dir);
    char other[1300];
    snprintf(other, sizeof other, "%s/other.safetensors", g_dir);
    at_write_text(other, "");
    const char *ov2[] = {own, global, NULL};
    ck_assert_msg(load(g_v4, ov2, NULL, &cfg, &rc) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(ocr_config_get_string(cfg, "Global.pretrained_model", NULL, &s), OCR_OK);
    ck_assert_msg(s && strcmp(s, other) == 0, "Global.pretrained_model is %s", s ? s : "(null)");
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_v4_published_teacher_refused) {
    // As published, the teacher is refused at last_stage, named where it is written.
    setenv("DISTILL_TEST_PUBLISHED_TEACHER", "1", 1);
    const char *w[] = {"Architecture.Models.Teacher.Backbone.last_stage", "token sequence", "192", "256", NULL};
    expect_refusal(g_v4, NULL, w);
    unsetenv("DISTILL_TEST_PUBLISHED_TEACHER");
    // And Eval's variable-width resize.
    const char *a2[] = {"Eval.dataset.transforms.2.RecResizeImg.eval_mode=true", NULL};
    const char *w2[] = {"Eval.dataset.transforms.2.RecResizeImg.eval_mode", "variable width", NULL};
    expect_refusal(g_v4, a2, w2);
    // A Conv mixer's kernel must keep the token grid.
    const char *a3[] = {"Architecture.Models.Teacher.Backbone.local_mixer=[[5, 5], [4, 5], [5, 5]]", NULL};
    const char *w3[] = {"Architecture.Models.Teacher.Backbone.local_mixer[1]", "odd", NULL};
    expect_refusal(g_v4, a3, w3);
}
END_TEST

// The v4 teacher with PaddleOCR's dictionary (6,625 classes) against PaddleOCR's names and counts
// (tests/training/data/ppocrv4_distill_teacher_last_stage_names.txt, written by
// tools/ppocrv4_distill_teacher_param_counts.py from PaddleOCR's source structure): every tensor
// with as many elements, nothing else. PaddleOCR's published teacher (last_stage false) has
// 20,110,297 trainable parameters, backbone 4,372,992; ours adds backbone.last_conv.weight.
START_TEST(test_v4_teacher_counts_and_names) {
    char dict[1200];
    snprintf(dict, sizeof dict, "Global.character_dict_path=%s/configs/dicts/ppocr_keys_v1.txt", OCR_SOURCE_DIR);
    const char *a[] = {dict, NULL};
    OcrConfig *cfg;
    RunConfig rc;
    ck_assert_msg(load(g_v4, a, NULL, &cfg, &rc) == OCR_OK, "%s", ocr_last_error());
    DistillConfig *dc = malloc(sizeof *dc);
    ck_assert_msg(distill_config_read(dc, cfg) == OCR_OK, "%s", ocr_last_error());
    const OcrArch *ta = &dc->nets[distill_net_index(dc, "Teacher")].arch;
    ck_assert_int_eq(ta->num_classes, 6625);
    ck_assert(ta->svtr.prenorm && ta->svtr.last_stage);
    for (int i = 0; i < 12; i++) ck_assert_int_eq(ta->svtr.conv[i], i < 6);
    OcrModel *m;
    ck_assert_msg(ocr_model_create(&m, ta) == OCR_OK, "%s", ocr_last_error());
    OcrParamTable *p = ocr_model_params(m), *st = ocr_model_stats(m);
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/training/data/ppocrv4_distill_teacher_last_stage_names.txt", OCR_SOURCE_DIR);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    int seen_p = 0, seen_s = 0;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char name[256], shape[64], kind[16];
        ck_assert_int_eq(sscanf(line, "%255[^\t]\t%63[^\t]\t%15s", name, shape, kind), 3);
        int64_t numel = 1;
        for (char *tok = strtok(shape, "x"); tok; tok = strtok(NULL, "x")) numel *= atoll(tok);
        int stat = strcmp(kind, "stat") == 0;
        OcrParamTable *t = stat ? st : p;
        int i = ocr_params_find(t, name);
        ck_assert_msg(i >= 0, "PaddleOCR's %s %s is missing", stat ? "statistic" : "parameter", name);
        ck_assert_msg(t->items[i].numel == numel, "%s has %lld elements, PaddleOCR %lld", name,
                      (long long)t->items[i].numel, (long long)numel);
        stat ? seen_s++ : seen_p++;
    }
    fclose(f);
    ck_assert_int_eq(seen_p, p->count);
    ck_assert_int_eq(seen_s, st->count);
    ck_assert_int_eq(ocr_model_param_count(m), 20159449);
    int64_t bb = 0;
    for (int i = 0; i < p->count; i++)
        if (strncmp(p->items[i].name, "backbone.", 9) == 0) bb += p->items[i].numel;
    ck_assert_int_eq(bb, 4372992 + 256 * 192);
    // The ConvMixer: (OC, KH, KW, C/groups) = (64, 5, 5, 32) in stage 1 (2 heads).
    const OcrParamInfo *w = &p->items[ocr_params_find(p, "backbone.blocks1.0.mixer.local_mixer.weight")];
    ck_assert(w->shape[0] == 64 && w->shape[1] == 5 && w->shape[2] == 5 && w->shape[3] == 32);
    ck_assert_int_lt(ocr_params_find(p, "backbone.norm.weight"), 0);  // prenorm: no final norm
    ocr_model_free(m);
    free(dc);
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_v4_trains_as_published) {
    // PP-OCRv4's distillation with the published teacher (but last_stage, see V4_TEACHER), untrained:
    // DKD on the NRTR heads and the CTC-logit KL from the frozen SVTR teacher, the student's CTC and
    // NRTR losses; only the data, the dictionary and the batch change.
    char err[16384], out[600];
    const char *a[] = {"train", "-c", g_v4, "-o", g_ov[0], g_ov[1], g_ov[2], g_ov[3], g_ov[4], g_ov[5],
                       V4_DATA[0], V4_DATA[1], V4_DATA[2], V4_TEACHER[0], "Train.loader.num_workers=1",
                       "Train.loader.batch_size_per_card=2", "--max-steps", "2", NULL};
    int rc = at_run_capture(cmd_train, a, err, sizeof err);
    ck_assert_msg(rc == 0, "train -c ch_PP-OCRv4_rec_distill.yml: %s", err);
    snprintf(out, sizeof out, "%.560s/out", g_dir);
    int n;
    double *losses = at_read_losses(out, &n, NULL);
    ck_assert_int_eq(n, 2);
    for (int i = 0; i < n; i++) ck_assert(isfinite(losses[i]));
    free(losses);
    char mp[700];
    snprintf(mp, sizeof mp, "%s/metrics.jsonl", out);
    char *text;
    size_t size;
    ck_assert(ocr_read_file(mp, &text, &size) == OCR_OK);
    ck_assert_msg(strstr(text, "\"loss_distill\":") && strstr(text, "\"loss_gtc\":"), "%s", text);
    free(text);
}
END_TEST

START_TEST(test_refusals_name_the_key) {
    // A loss naming a network that does not exist.
    const char *a1[] = {"Loss.loss_config_list.0.DistillationDMLLoss.model_name_pairs=[[Student, Teacher2]]", NULL};
    const char *w1[] = {"Loss.loss_config_list.0.DistillationDMLLoss.model_name_pairs.0.1", "Teacher2", NULL};
    expect_refusal(g_v3, a1, w1);
    const char *a1b[] = {"Loss.loss_config_list.3.DistillationCTCLoss.model_name_list=[Student, Student2]", NULL};
    const char *w1b[] = {"model_name_list.1", "Student2", NULL};
    expect_refusal(g_v3, a1b, w1b);
    // A loss naming a head that does not exist (v4's networks have ctc and gtc, no sar).
    const char *a2[] = {"Loss.loss_config_list.0.DistillationDKDLoss.dis_head=sar", NULL};
    const char *w2[] = {"Loss.loss_config_list.0.DistillationDKDLoss.dis_head", "\"sar\"", NULL};
    expect_refusal(g_v4, a2, w2);
    const char *a2b[] = {"Loss.loss_config_list.4={DistillationNRTRLoss: {weight: 1.0, model_name_list: [Student], "
                         "key: head_out, multi_head: true}}", NULL};
    const char *w2b[] = {"Loss.loss_config_list.4.DistillationNRTRLoss names the head \"gtc\"", NULL};
    expect_refusal(g_v3, a2b, w2b);
    // An unknown loss.
    const char *a3[] = {"Loss.loss_config_list.1={DistillationFooLoss: {weight: 1.0}}", NULL};
    const char *w3[] = {"Loss.loss_config_list.1", "unknown loss DistillationFooLoss", NULL};
    expect_refusal(g_v4, a3, w3);
    // A frozen network in the optimizer's parameter groups.
    const char *a4[] = {"Optimizer.lr_mult={\"Teacher.backbone.*\": 0.1}", NULL};
    const char *w4[] = {"Optimizer.lr_mult", "Teacher", "frozen", NULL};
    expect_refusal(g_v4, a4, w4);
    const char *a4b[] = {"Global.freeze_params=[\"Teacher.head.*\"]", NULL};
    const char *w4b[] = {"Global.freeze_params", "Teacher", NULL};
    expect_refusal(g_v4, a4b, w4b);
    // The scored network frozen.
    const char *a5[] = {"Metric.key=Teacher", NULL};
    const char *w5[] = {"Metric.key", "Teacher", "freeze_params", NULL};
    expect_refusal(g_v4, a5, w5);
    // A sub-network's own key, named where it is written.
    const char *a6[] = {"Architecture.Models.Teacher.Backbone.scale=0.5", NULL};
    const char *w6[] = {"Architecture.Models.Teacher.Backbone", "scale", NULL};
    expect_refusal(g_v4, a6, w6);
    const char *a7[] = {"Architecture.Models.Student.Backbone.name=ResNet", NULL};
    const char *w7[] = {"Architecture.Models.Student.Backbone.name", NULL};
    expect_refusal(g_v4, a7, w7);
    // multi_head off on a MultiHead network.
    const char *a8[] = {"Loss.loss_config_list.1.DistillationCTCLoss.multi_head=false", NULL};
    const char *w8[] = {"Loss.loss_config_list.1.DistillationCTCLoss.multi_head", NULL};
    expect_refusal(g_v4, a8, w8);
}
END_TEST

START_TEST(test_dictionaries_must_match) {
    // A teacher checkpoint that records another dictionary (model.dict.txt, as ckpt_save writes it).
    char ck[1100], p[1200], ov[1300];
    snprintf(ck, sizeof ck, "%s/teacher_ckpt", g_dir);
    ck_assert(ocr_make_dirs(ck) == OCR_OK);
    snprintf(p, sizeof p, "%s/model.dict.txt", ck);
    at_write_text(p, "a\nb\nc\n");
    snprintf(ov, sizeof ov, "Architecture.Models.Teacher.pretrained=%s", ck);
    const char *a[] = {ov, NULL};
    const char *w[] = {"Architecture.Models.Teacher.pretrained", "dictionary", NULL};
    expect_refusal(g_v4, a, w);
    // The same dictionary passes this check.
    char dict[1200];
    snprintf(dict, sizeof dict, "%s/dict.txt", g_dir);
    char *text;
    size_t n;
    ck_assert(ocr_read_file(dict, &text, &n) == OCR_OK);
    at_write_text(p, text);
    free(text);
    OcrConfig *cfg;
    RunConfig rc;
    ck_assert_msg(load(g_v4, a, NULL, &cfg, &rc) == OCR_OK, "%s", ocr_last_error());
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_v3_trains_as_published) {
    // PP-OCRv3's mutual learning: Student and Teacher both train (DML on the CTC and SAR heads,
    // L2 on backbone_out, each network's own CTC and SAR losses); only the data, the dictionary
    // and the batch change.
    char err[16384], out[600];
    const char *a[] = {"train", "-c", g_v3, "-o", g_ov[0], g_ov[1], g_ov[2], g_ov[3], g_ov[4], g_ov[5],
                       "Train.loader.num_workers=1", "Train.loader.batch_size_per_card=2", "--max-steps", "2", NULL};
    int rc = at_run_capture(cmd_train, a, err, sizeof err);
    ck_assert_msg(rc == 0, "train -c ch_PP-OCRv3_rec_distillation.yml: %s", err);
    ck_assert_msg(strstr(err, "1 network(s) trained beside the scored one"), "%s", err);
    snprintf(out, sizeof out, "%.560s/out", g_dir);
    int n;
    double *losses = at_read_losses(out, &n, NULL);
    ck_assert_int_eq(n, 2);
    free(losses);
    char mp[700], ck[700];
    snprintf(mp, sizeof mp, "%s/metrics.jsonl", out);
    char *text;
    size_t size;
    ck_assert(ocr_read_file(mp, &text, &size) == OCR_OK);
    ck_assert(strstr(text, "\"loss_distill\":") && strstr(text, "\"loss_gtc\":"));
    free(text);
    snprintf(ck, sizeof ck, "%s/latest/model.safetensors", out);
    ck_assert(ocr_read_file(ck, &text, &size) == OCR_OK);
    ck_assert(memmem(text, size, "Student.head.sar_head.", 22) && memmem(text, size, "Teacher.head.sar_head.", 22));
    free(text);
    // KL against a second network that trains too is refused (PaddleOCR would train both through it).
    const char *b[] = {"train", "-c", g_v3, "-o", g_ov[0], g_ov[1], g_ov[2], g_ov[3], g_ov[4], g_ov[5],
                       "Loss.loss_config_list.0={DistillationKLDivLoss: {weight: 1.0, model_name_pairs: "
                       "[[Student, Teacher]], key: head_out, multi_head: true, dis_head: ctc}}",
                       "Global.save_model_dir=/nonexistent/never_written", "--max-steps", "1", NULL};
    rc = at_run_capture(cmd_train, b, err, sizeof err);
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(strstr(err, "Loss.loss_config_list.0.DistillationKLDivLoss") && strstr(err, "trains too"), "%s", err);
}
END_TEST

static Suite *distill_config_suite(void) {
    Suite *s = suite_create("distill_config");
    TCase *tc = tcase_create("distill_config");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_v3_config_reads);
    tcase_add_test(tc, test_v4_config_reads);
    tcase_add_test(tc, test_student_pretrained_is_its_start);
    tcase_add_test(tc, test_v4_published_teacher_refused);
    tcase_add_test(tc, test_v4_teacher_counts_and_names);
    tcase_add_test(tc, test_v4_trains_as_published);
    tcase_add_test(tc, test_refusals_name_the_key);
    tcase_add_test(tc, test_dictionaries_must_match);
    tcase_add_test(tc, test_v3_trains_as_published);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(distill_config_suite()); }
