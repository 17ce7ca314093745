// Evaluation scores every line (training/evaluate.h): each line's path (in shape, widened, squeezed)
// and flags (too long for the model, over max_text_length, unknown characters), unreadable
// images and bad label lines counted, in-shape lines bit-identical to the training loader's
// RecResizeImg path; `eval`, `predict` and `capacity` without the training set; `predict` on
// folders and label files.
#include <check.h>
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>

#include "cli/commands.h"
#include "training/evaluate.h"
#include "training/feed.h"
#include "training/inference.h"
#include "training/run_config.h"
#include "data/transforms.h"
#include "tests/training/training_test_util.h"

static char *g_dir;
static char g_cfg[512];

// A gray image w×32 of noise with a dark bar (the content does not matter to the paths).
static void write_image(const char *path, int w) {
    OcrImage img;
    ck_assert(ocr_image_alloc(&img, w, 32, 1) == OCR_OK);
    OcrRng rng = ocr_rng_make((uint64_t)w, 3);
    for (int i = 0; i < w * 32; i++) img.pixels[i] = (uint8_t)(200 + ocr_rng_next_int(&rng, 0, 40));
    for (int y = 10; y < 22; y++)
        for (int x = 2; x < w - 2; x += 5) img.pixels[y * w + x] = 20;
    ck_assert_msg(ocr_image_write_png(path, &img) == OCR_OK, "%s", ocr_last_error());
    ocr_image_free(&img);
}

// The digits eval set (16 lines, some wider than the 64-px eval width) plus lines for every path.
static void setup(void) {
    g_dir = at_tmpdir();
    at_make_digits(g_dir, "eval", 16, 3, 12);
    char p[700];
    snprintf(p, sizeof p, "%s/eval/extra", g_dir);
    ck_assert(ocr_make_dirs(p) == OCR_OK);
    const struct {
        const char *name;
        int w;
    } imgs[] = {{"wide", 200}, {"wide2", 130}, {"narrow", 40}, {"unknown", 50}};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/eval/extra/%s.png", g_dir, imgs[i].name);
        write_image(p, imgs[i].w);
    }
    char *labels;
    size_t n;
    snprintf(p, sizeof p, "%s/eval/labels.txt", g_dir);
    ck_assert(ocr_read_file(p, &labels, &n) == OCR_OK);
    char *all = malloc(n + 1024);
    snprintf(all, n + 1024,
             "%s"
             "extra/wide.png\t0123456789\n"     // widened at 200; 10 > max_text_length 8
             "extra/wide2.png\t12\n"            // widened at 130
             "extra/narrow.png\t1111111111\n"   // in shape; 19 CTC frames > T = 8 at width 64
             "extra/unknown.png\t12a\n"         // 'a' is not in the digits dictionary
             "extra/missing.png\t5\n"           // unreadable
             "a line without a tab\n"           // bad
             "extra/wide2.png\t\n",             // empty label: bad
             labels);
    at_write_text(p, all);
    free(all);
    free(labels);
    snprintf(g_cfg, sizeof g_cfg, "%s/cfg.json", g_dir);
    // No training set at all: eval, predict and capacity must not need it.
    at_write_config(g_cfg, g_dir, 64, 8, "\"epoch_num\": 1,");
}

static void load(OcrConfig **cfg, RunConfig *rc, const char *const *ov, int nov) {
    ck_assert_msg(run_config_load(cfg, rc, g_cfg, ov, nov, RUN_NEED_EVAL) == OCR_OK, "%s", ocr_last_error());
}

START_TEST(test_every_line_is_scored) {
    OcrConfig *cfg;
    RunConfig rc;
    load(&cfg, &rc, NULL, 0);
    OcrDict dict;
    ck_assert(ocr_dict_load(&dict, rc.dict_path, rc.use_space_char) == OCR_OK);
    OcrLoaderConfig lc;
    ck_assert(ocr_loader_config_parse(&lc, cfg, "Eval") == OCR_OK);
    EvalSet set;
    ck_assert_msg(eval_set_read(&set, &lc) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(set.n, 16 + 5);
    ck_assert_int_eq(set.bad_lines, 2);
    OcrModel *m;
    ck_assert(ocr_model_from_config(&m, cfg) == OCR_OK);
    EvalOptions o;
    eval_options_from_loader(&o, &lc, m, (RecMetricOptions){rc.ignore_space, rc.is_filter});
    ck_assert(o.height == 32 && o.width == 64 && o.batch == 16 && !o.fixed_width && o.max_text_length == 8);
    EvalLine *lines = calloc((size_t)set.n, sizeof *lines);
    EvalResult er;
    ck_assert_msg(evaluate_set(m, &set, &dict, &o, &er, lines) == OCR_OK, "%s", ocr_last_error());
    // Expected paths from the image sizes themselves.
    int widened = 0, in_shape = 0;
    for (int64_t i = 0; i < set.n; i++) {
        OcrImage img;
        if (ocr_image_load(&img, set.path[i], OCR_CHANNELS_BGR) != OCR_OK) continue;
        int need = (int)ceil(32.0 * img.width / img.height);
        if (need > 64) {
            widened++;
            ck_assert_int_eq(lines[i].path, EVAL_LINE_WIDENED);
            ck_assert_msg(lines[i].width >= need, "line %lld at width %d, needs %d", (long long)i, lines[i].width,
                          need);
        } else {
            in_shape++;
            ck_assert_int_eq(lines[i].path, EVAL_LINE_IN_SHAPE);
            ck_assert_int_eq(lines[i].width, 64);
        }
        ocr_image_free(&img);
    }
    const EvalPaths *p = &er.paths;
    ck_assert_int_eq(p->lines, 23);
    ck_assert_int_eq(p->scored, 20);
    ck_assert_int_eq(er.samples, 20);
    ck_assert_int_eq(p->in_shape, in_shape);
    ck_assert_int_eq(p->widened, widened);
    ck_assert_int_ge(widened, 2);
    ck_assert_int_eq(p->squeezed, 0);
    ck_assert_int_eq(p->unreadable, 1);
    ck_assert_int_eq(p->bad_lines, 2);
    ck_assert_int_eq(er.skipped, 3);
    ck_assert_int_eq(p->skipped.count[OCR_SKIP_IMAGE_MISSING], 1);
    ck_assert_int_eq(p->skipped.count[OCR_SKIP_NO_DELIMITER], 1);
    ck_assert_int_eq(p->skipped.count[OCR_SKIP_EMPTY_LABEL], 1);
    ck_assert_msg(strstr(p->skipped.example[OCR_SKIP_IMAGE_MISSING], "labels.txt:21"), "%s",
                  p->skipped.example[OCR_SKIP_IMAGE_MISSING]);
    ck_assert_int_eq(p->too_long_for_model, 1);
    ck_assert_int_eq(p->over_max_text_length, 2);
    ck_assert_int_eq(p->unknown_chars, 1);
    // Lines 17..20 of the set: wide, wide2, narrow, unknown; the wide line's batch is its own width.
    ck_assert_int_eq(lines[16].path, EVAL_LINE_WIDENED);
    ck_assert_int_eq(lines[16].width, 200);
    ck_assert(lines[16].flags == EVAL_FLAG_OVER_MAX_TEXT_LENGTH);
    ck_assert(lines[18].flags == (EVAL_FLAG_TOO_LONG_FOR_MODEL | EVAL_FLAG_OVER_MAX_TEXT_LENGTH));
    ck_assert(lines[19].flags == EVAL_FLAG_UNKNOWN_CHARS);
    ck_assert(!lines[18].correct && !lines[19].correct);  // cannot be read exactly
    ck_assert_int_eq(lines[20].path, EVAL_LINE_UNREADABLE);
    ck_assert(!lines[20].scored);
    // The metric is the mean over the scored lines; per-line outcomes add up to it.
    int64_t correct = 0, edits = 0, refs = 0;
    for (int64_t i = 0; i < set.n; i++) {
        correct += lines[i].correct;
        edits += lines[i].edits;
        refs += lines[i].ref_chars;
    }
    ck_assert(fabs(er.acc - (double)correct / (20 + 1e-5)) < 1e-12);
    ck_assert(fabs(er.cer - (double)edits / (double)refs) < 1e-12);
    // The unknown line's reference keeps its 'a' (3 characters), the too-long one all 10.
    ck_assert_int_eq(lines[19].ref_chars, 3);
    ck_assert_int_eq(lines[18].ref_chars, 10);
    eval_lines_free(lines, set.n);

    // A network with one input width (SVTRNet): wide lines are squeezed into it instead.
    o.fixed_width = 1;
    ck_assert(evaluate_set(m, &set, &dict, &o, &er, lines) == OCR_OK);
    ck_assert_int_eq(er.paths.squeezed, widened);
    ck_assert_int_eq(er.paths.widened, 0);
    ck_assert_int_eq(lines[16].width, 64);
    ck_assert_int_eq(er.paths.scored, 20);
    eval_lines_free(lines, set.n);
    free(lines);
    eval_set_free(&set);
    ocr_loader_config_free(&lc);
    ocr_model_free(m);
    ocr_dict_free(&dict);
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_in_shape_lines_match_the_loader) {
    // Batch 1 on both sides, so every sample is computed alone: the predictions must be
    // identical, confidences included, for every line the loader gives in shape.
    const char *ov[] = {"Eval.loader.batch_size_per_card=1"};
    OcrConfig *cfg;
    RunConfig rc;
    load(&cfg, &rc, ov, 1);
    OcrDict dict;
    ck_assert(ocr_dict_load(&dict, rc.dict_path, rc.use_space_char) == OCR_OK);
    OcrModel *m;
    ck_assert(ocr_model_from_config(&m, cfg) == OCR_OK);
    OcrLoaderConfig lc;
    ck_assert(ocr_loader_config_parse(&lc, cfg, "Eval") == OCR_OK);
    EvalSet set;
    ck_assert(eval_set_read(&set, &lc) == OCR_OK);
    EvalOptions o;
    eval_options_from_loader(&o, &lc, m, rec_metric_default_options());
    EvalLine *lines = calloc((size_t)set.n, sizeof *lines);
    EvalResult er;
    ck_assert(evaluate_set(m, &set, &dict, &o, &er, lines) == OCR_OK);
    Feed feed;
    ck_assert_msg(feed_open(&feed, cfg, "Eval", &dict, 0, 0) == OCR_OK, "%s", ocr_last_error());
    const OcrDataset *ds = ocr_loader_dataset(feed.loader);
    // The loader drops the over-long labels and the unreadable image: fewer lines than scored.
    ck_assert_int_lt(feed_num_samples(&feed), er.paths.scored);
    char text[256];
    int compared = 0, nonempty = 0;
    for (;;) {
        FeedBatch b;
        int end;
        ck_assert(feed_next(&feed, &b, &end) == OCR_OK);
        if (end) break;
        ck_assert(infer_forward_batch(m, &b) == OCR_OK);
        OcrSample s;
        ck_assert(ocr_dataset_get(ds, b.index[0], &s) == OCR_OK);
        char where[1200];
        snprintf(where, sizeof where, "%s:%lld", s.label_file, (long long)s.line);
        int64_t li = -1;
        for (int64_t i = 0; i < set.n; i++)
            if (strcmp(set.where[i], where) == 0) li = i;
        ck_assert_msg(li >= 0, "%s not in the eval set", where);
        if (lines[li].path != EVAL_LINE_IN_SHAPE) continue;  // the loader squeezes it; we widen it
        float conf;
        ck_assert(decode_sample(m, &dict, 0, text, sizeof text, &conf) == OCR_OK);
        ck_assert_msg(strcmp(text, lines[li].prediction) == 0, "%s: loader \"%s\", eval \"%s\"", where, text,
                      lines[li].prediction);
        ck_assert_msg(conf == lines[li].confidence, "%s: confidence %.9g vs %.9g", where, conf, lines[li].confidence);
        compared++;
        nonempty += text[0] != '\0';
    }
    ck_assert_int_ge(compared, 8);
    ck_assert_int_ge(nonempty, 1);  // an untrained network's output, but not all blank
    feed_close(&feed);
    eval_lines_free(lines, set.n);
    free(lines);
    eval_set_free(&set);
    ocr_loader_config_free(&lc);
    ocr_model_free(m);
    ocr_dict_free(&dict);
    ocr_config_free(cfg);
}
END_TEST

// Runs a subcommand with stdout into out (cap bytes) and stderr into err.
static int run_out(at_cmd_fn fn, const char *const *args, char *out, size_t cap, char *err, size_t ecap) {
    char path[1024];
    int fd = ocr_test_tmpfile(path, sizeof path, "ocr_app_stdout_");
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    int rc = at_run_capture(fn, args, err, ecap);
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

static void save_random_weights(char *path, size_t cap) {
    OcrConfig *cfg;
    RunConfig rc;
    load(&cfg, &rc, NULL, 0);
    OcrModel *m;
    ck_assert(ocr_model_from_config(&m, cfg) == OCR_OK);
    snprintf(path, cap, "%s/w.safetensors", g_dir);
    ck_assert_msg(ocr_model_save_weights(m, path) == OCR_OK, "%s", ocr_last_error());
    ocr_model_free(m);
    ocr_config_free(cfg);
}

START_TEST(test_commands_without_a_training_set) {
    char w[600], *out = malloc(1 << 16), err[8192];
    save_random_weights(w, sizeof w);
    // The config's Train label file does not exist (no train/ folder): eval needs only Eval.
    const char *e[] = {"eval", "-c", g_cfg, "--weights", w, "--json", NULL};
    int rc = run_out(cmd_eval, e, out, 1 << 16, err, sizeof err);
    ck_assert_msg(rc == 0, "eval exited %d: %s", rc, err);
    cJSON *o = cJSON_Parse(out);
    ck_assert_msg(o != NULL, "%s", out);
    ck_assert_int_eq(cJSON_GetObjectItem(o, "samples")->valueint, 20);
    ck_assert_int_eq(cJSON_GetObjectItem(o, "skipped")->valueint, 3);
    cJSON *l = cJSON_GetObjectItem(o, "lines");
    ck_assert_int_eq(cJSON_GetObjectItem(l, "total")->valueint, 23);
    ck_assert_int_eq(cJSON_GetObjectItem(l, "too_long_for_model")->valueint, 1);
    ck_assert_int_eq(cJSON_GetObjectItem(l, "unreadable")->valueint, 1);
    ck_assert(cJSON_GetObjectItem(l, "widened")->valueint >= 2);
    ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(l, "not_scored"), "image_missing"),
                                         "count")->valueint, 1);
    cJSON_Delete(o);
    // --lines: one TSV line per label line that names an image, with its path and outcome.
    char lp[700];
    snprintf(lp, sizeof lp, "%s/lines.tsv", g_dir);
    const char *e1[] = {"eval", "-c", g_cfg, "--weights", w, "--lines", lp, NULL};
    rc = run_out(cmd_eval, e1, out, 1 << 16, err, sizeof err);
    ck_assert_msg(rc == 0, "eval exited %d: %s", rc, err);
    ck_assert_msg(strstr(out, "lines: 20 scored") || strstr(out, "23 lines: 20 scored"), "%s", out);
    char *tsv;
    size_t tn;
    ck_assert(ocr_read_file(lp, &tsv, &tn) == OCR_OK);
    int rows = 0;
    for (const char *c = tsv; *c; c++) rows += *c == '\n';
    ck_assert_int_eq(rows, 1 + 21);  // header + every line with an image path
    ck_assert_msg(strstr(tsv, "\twidened\t200\t0123456789\t") && strstr(tsv, "over_max_text_length"), "%s", tsv);
    ck_assert_msg(strstr(tsv, "missing.png\tunreadable\t0\t5\t\t-\t"), "%s", tsv);
    ck_assert_msg(strstr(tsv, "too_long_for_model,over_max_text_length"), "%s", tsv);
    free(tsv);
    // capacity plans from the Train section's shapes only.
    const char *c[] = {"capacity", "-c", g_cfg, "--memory", "256M", "--json", NULL};
    rc = run_out(cmd_capacity, c, out, 1 << 16, err, sizeof err);
    ck_assert_msg(rc == 0, "capacity exited %d: %s", rc, err);
    // The stock PaddleOCR config: its ./train_data does not exist here, and only the weights
    // (junk) may be what predict and eval complain about.
    char cfgp[700], junk[700];
    snprintf(cfgp, sizeof cfgp, "%s/configs/rec_ppocrv3_en.json", OCR_SOURCE_DIR);
    snprintf(junk, sizeof junk, "%s/junk.safetensors", g_dir);
    at_write_text(junk, "not weights");
    char evl[800], evd[800], dic[800];
    snprintf(evl, sizeof evl, "Eval.dataset.label_file_list=[\"%s/eval/labels.txt\"]", g_dir);
    snprintf(evd, sizeof evd, "Eval.dataset.data_dir=%s/eval", g_dir);
    // (its dictionary path is relative to the source tree; the tests run in the build tree)
    snprintf(dic, sizeof dic, "Global.character_dict_path=%s/configs/dicts/en_dict.txt", OCR_SOURCE_DIR);
    const char *p1[] = {"predict", "-c", cfgp, "--weights", junk, "-o", dic, "x.png", NULL};
    ck_assert_int_eq(at_run_capture(cmd_predict, p1, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "junk.safetensors") && !strstr(err, "train_list"), "%s", err);
    const char *e2[] = {"eval", "-c", cfgp, "--weights", junk, "-o", dic, evl, evd, NULL};
    ck_assert_int_eq(at_run_capture(cmd_eval, e2, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "junk.safetensors") && !strstr(err, "train_list"), "%s", err);
    // eval does need its own data, and says which file is missing.
    const char *e3[] = {"eval", "-c", cfgp, "--weights", junk, "-o", dic, NULL};
    ck_assert_int_eq(at_run_capture(cmd_eval, e3, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "Eval.dataset.label_file_list") && !strstr(err, "train_list"), "%s", err);
    free(out);
}
END_TEST

START_TEST(test_predict_folders_and_label_files) {
    char w[600], *out = malloc(1 << 16), err[8192];
    save_random_weights(w, sizeof w);
    // A folder: every .png below it (recursively), in path order.
    char dir[700], txt[800];
    snprintf(dir, sizeof dir, "%s/eval", g_dir);
    snprintf(txt, sizeof txt, "%s/eval/images/notes.txt", g_dir);
    at_write_text(txt, "not an image\n");
    const char *a[] = {"predict", "-c", g_cfg, "--weights", w, dir, NULL};
    int rc = run_out(cmd_predict, a, out, 1 << 16, err, sizeof err);
    ck_assert_msg(rc == 0, "predict exited %d: %s", rc, err);
    int n = 0;
    char prev[1024] = "";
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        char *tab = strchr(line, '\t');
        ck_assert_msg(tab && strchr(tab + 1, '\t'), "%s", line);
        *tab = '\0';
        ck_assert_msg(strcmp(prev, line) < 0, "%s after %s", line, prev);
        snprintf(prev, sizeof prev, "%s", line);
        n++;
    }
    ck_assert_int_eq(n, 16 + 4);  // images/ (16) and extra/ (4); notes.txt is not read
    // A label file of good lines: path, prediction, label, correct, confidence, then the accuracy.
    char lab[800];
    snprintf(lab, sizeof lab, "%s/good.txt", g_dir);
    at_write_text(lab, "eval/extra/wide.png\t0123456789\neval/extra/narrow.png\t1111111111\n");
    const char *b[] = {"predict", "-c", g_cfg, "--weights", w, lab, NULL};
    rc = run_out(cmd_predict, b, out, 1 << 16, err, sizeof err);
    ck_assert_msg(rc == 0, "predict exited %d: %s", rc, err);
    char *l1 = strtok(out, "\n"), *l2 = strtok(NULL, "\n"), *l3 = strtok(NULL, "\n");
    ck_assert(l1 && l2 && l3 && !strtok(NULL, "\n"));
    int tabs = 0;
    for (char *c = l1; *c; c++) tabs += *c == '\t';
    ck_assert_int_eq(tabs, 4);
    ck_assert_msg(strstr(l1, "extra/wide.png\t") && strstr(l1, "\t0123456789\t"), "%s", l1);
    ck_assert_msg(strncmp(l3, "accuracy ", 9) == 0 && strstr(l3, "of 2 labelled"), "%s", l3);
    // --json, and the label file of the eval set: its missing image and bad lines make exit 1.
    char all[800];
    snprintf(all, sizeof all, "%s/eval/labels.txt", g_dir);
    const char *c[] = {"predict", "-c", g_cfg, "--weights", w, "--json", all, NULL};
    rc = run_out(cmd_predict, c, out, 1 << 16, err, sizeof err);
    ck_assert_int_eq(rc, 1);
    cJSON *o = cJSON_Parse(out);
    ck_assert_msg(o != NULL, "%s", out);
    ck_assert_int_eq(cJSON_GetObjectItem(o, "labelled")->valueint, 20);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(o, "predictions")), 20);
    ck_assert_int_eq(cJSON_GetObjectItem(o, "unreadable")->valueint, 1);
    ck_assert_int_eq(cJSON_GetObjectItem(o, "bad_inputs")->valueint, 2);
    cJSON *p0 = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "predictions"), 0);
    ck_assert(cJSON_HasObjectItem(p0, "label") && cJSON_IsBool(cJSON_GetObjectItem(p0, "correct")));
    cJSON_Delete(o);
    ck_assert_msg(strstr(err, "missing.png"), "%s", err);
    free(out);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("app_eval");
    TCase *tc = tcase_create("eval");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_every_line_is_scored);
    tcase_add_test(tc, test_in_shape_lines_match_the_loader);
    tcase_add_test(tc, test_commands_without_a_training_set);
    tcase_add_test(tc, test_predict_folders_and_label_files);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(suite()); }
