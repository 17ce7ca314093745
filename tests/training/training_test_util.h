// Helpers for the application tests (header-only): a tiny synthetic digits dataset drawn with
// a 5×7 bitmap font (no fonts or corpora needed), a tiny model config around it, and a way
// to run a subcommand in-process and get its exit code.
#ifndef OCR_TESTS_APP_APP_TEST_UTIL_H
#define OCR_TESTS_APP_APP_TEST_UTIL_H

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/rng.h"
#include "data/image.h"
#include "tests/common/test_util.h"

static const unsigned char AT_FONT[10][7] = {
    {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}, {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E},
    {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}, {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E},
    {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}, {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E},
    {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}, {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08},
    {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}, {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C},
};

// A fresh temporary directory, removed when the process that made it exits (tests/common).
static inline char *at_tmpdir(void) { return ocr_test_tmpdir("ocr_app_test_"); }

static inline void at_write_text(const char *path, const char *text) {
    ck_assert_msg(ocr_write_file_atomic(path, text, strlen(text)) == OCR_OK, "%s", ocr_last_error());
}

// n lines of 1..max_len digits in dir/<name>/ (images/*.png, labels.txt), dict in dir/dict.txt.
// Dark digits (scale 3, 15×21) on a light, slightly noisy background; height 32.
static inline void at_make_digits(const char *dir, const char *name, int n, int max_len, uint64_t seed) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s/images", dir, name);
    ck_assert(ocr_make_dirs(p) == OCR_OK);
    snprintf(p, sizeof p, "%s/dict.txt", dir);
    at_write_text(p, "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n");
    size_t cap = (size_t)n * 64 + 64, used = 0;
    char *labels = malloc(cap);
    OcrRng rng = ocr_rng_make(seed, 99);
    for (int i = 0; i < n; i++) {
        int len = (int)ocr_rng_next_int(&rng, 1, max_len);
        char text[16];
        for (int k = 0; k < len; k++) text[k] = (char)('0' + ocr_rng_next_int(&rng, 0, 9));
        text[len] = '\0';
        int x0 = (int)ocr_rng_next_int(&rng, 2, 6), y0 = (int)ocr_rng_next_int(&rng, 3, 8);
        int W = x0 + len * 18 + (int)ocr_rng_next_int(&rng, 2, 8), H = 32;
        OcrImage img;
        ck_assert(ocr_image_alloc(&img, W, H, 1) == OCR_OK);
        int bg = (int)ocr_rng_next_int(&rng, 190, 250), fg = (int)ocr_rng_next_int(&rng, 0, 60);
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) img.pixels[y * W + x] = (uint8_t)(bg - (int)ocr_rng_next_int(&rng, 0, 12));
        for (int k = 0; k < len; k++) {
            const unsigned char *g = AT_FONT[text[k] - '0'];
            for (int r = 0; r < 7; r++)
                for (int c = 0; c < 5; c++)
                    if (g[r] & (0x10 >> c))
                        for (int dy = 0; dy < 3; dy++)
                            for (int dx = 0; dx < 3; dx++) {
                                int x = x0 + k * 18 + c * 3 + dx, y = y0 + r * 3 + dy;
                                if (x < W && y < H) img.pixels[y * W + x] = (uint8_t)fg;
                            }
        }
        snprintf(p, sizeof p, "%s/%s/images/%05d.png", dir, name, i);
        ck_assert_msg(ocr_image_write_png(p, &img) == OCR_OK, "%s", ocr_last_error());
        ocr_image_free(&img);
        used += (size_t)snprintf(labels + used, cap - used, "images/%05d.png\t%s\n", i, text);
    }
    snprintf(p, sizeof p, "%s/%s/labels.txt", dir, name);
    at_write_text(p, labels);
    free(labels);
}

// Global.threads of the test configs: 1, or OCR_TEST_THREADS (the thread matrix of
// tests/build/blas_matrix.sh). Every comparison inside a test uses one config, so the thread
// count is the same on both sides.
static inline int at_threads(void) {
    const char *e = getenv("OCR_TEST_THREADS");
    int n = e ? atoi(e) : 1;
    return n > 0 ? n : 1;
}

// The neck of the test configs: the PP-OCRv3 SVTR neck (tiny), or Im2Seq ("reshape").
#define AT_NECK_SVTR                                                                                     \
    "{\"name\": \"SequenceEncoder\", \"encoder_type\": \"svtr\", \"dims\": 16, \"depth\": 1, \"hidden_dims\": 32, " \
    "\"num_heads\": 2, \"use_guide\": false, \"drop_rate\": 0.0, \"attn_drop_rate\": 0.0}"
#define AT_NECK_RESHAPE "{\"name\": \"SequenceEncoder\", \"encoder_type\": \"reshape\"}"

// A tiny PP-OCRv3-like recognizer over dir/train and dir/eval at 32×W. `extra` is spliced into
// Global (e.g. "\"epoch_num\": 2,").
static inline void at_write_config_neck(const char *path, const char *dir, int width, int batch, const char *extra,
                                        double scale, const char *neck) {
    char *text = malloc(8192);
    snprintf(text, 8192,
             "{\n"
             " \"Global\": {%s \"print_batch_step\": 1000, \"save_model_dir\": \"%s/out\", \"eval_batch_step\": [0, 0],\n"
             "   \"character_dict_path\": \"%s/dict.txt\", \"max_text_length\": 8, \"use_space_char\": false,\n"
             "   \"seed\": 5, \"device\": \"cpu\", \"threads\": %d},\n"
             " \"Optimizer\": {\"name\": \"Adam\", \"beta1\": 0.9, \"beta2\": 0.999,\n"
             "   \"lr\": {\"name\": \"Cosine\", \"learning_rate\": 0.02, \"warmup_epoch\": 0.3},\n"
             "   \"regularizer\": {\"name\": \"L2\", \"factor\": 3e-05}},\n"
             " \"Architecture\": {\"model_type\": \"rec\", \"algorithm\": \"SVTR_LCNet\", \"Transform\": null,\n"
             "   \"Backbone\": {\"name\": \"MobileNetV1Enhance\", \"scale\": %g, \"last_conv_stride\": [1, 2],\n"
             "     \"last_pool_type\": \"avg\", \"last_pool_kernel_size\": [2, 2]},\n"
             "   \"Neck\": %s,\n"
             "   \"Head\": {\"name\": \"CTCHead\", \"fc_decay\": 1e-05}},\n"
             " \"Loss\": {\"name\": \"CTCLoss\"},\n"
             " \"PostProcess\": {\"name\": \"CTCLabelDecode\"},\n"
             " \"Metric\": {\"name\": \"RecMetric\", \"main_indicator\": \"acc\"},\n"
             " \"Train\": {\"dataset\": {\"name\": \"SimpleDataSet\", \"data_dir\": \"%s/train\",\n"
             "     \"label_file_list\": [\"%s/train/labels.txt\"],\n"
             "     \"transforms\": [{\"DecodeImage\": {\"img_mode\": \"BGR\", \"channel_first\": false}},\n"
             "       {\"CTCLabelEncode\": null}, {\"RecResizeImg\": {\"image_shape\": [3, 32, %d]}},\n"
             "       {\"KeepKeys\": {\"keep_keys\": [\"image\", \"label\", \"length\"]}}]},\n"
             "   \"loader\": {\"shuffle\": true, \"batch_size_per_card\": %d, \"drop_last\": true, \"num_workers\": 0}},\n"
             " \"Eval\": {\"dataset\": {\"name\": \"SimpleDataSet\", \"data_dir\": \"%s/eval\",\n"
             "     \"label_file_list\": [\"%s/eval/labels.txt\"],\n"
             "     \"transforms\": [{\"DecodeImage\": {\"img_mode\": \"BGR\", \"channel_first\": false}},\n"
             "       {\"CTCLabelEncode\": null}, {\"RecResizeImg\": {\"image_shape\": [3, 32, %d]}},\n"
             "       {\"KeepKeys\": {\"keep_keys\": [\"image\", \"label\", \"length\"]}}]},\n"
             "   \"loader\": {\"shuffle\": false, \"batch_size_per_card\": 16, \"drop_last\": false, \"num_workers\": 0}}\n"
             "}\n",
             extra ? extra : "", dir, dir, at_threads(), scale, neck, dir, dir, width, batch, dir, dir, width);
    at_write_text(path, text);
    free(text);
}

static inline void at_write_config(const char *path, const char *dir, int width, int batch, const char *extra) {
    at_write_config_neck(path, dir, width, batch, extra, 0.125, AT_NECK_SVTR);
}

// The standard small task of the application tests: a fresh temporary directory with 64 training
// and 16 evaluation lines of up to 3 digits, and cfg_path (cfg_cap bytes) = its config at width
// 64, batch 8, with `extra` in Global (e.g. "\"epoch_num\": 2,"). Returns the directory.
static inline char *at_setup_digits(char *cfg_path, size_t cfg_cap, const char *extra) {
    char *dir = at_tmpdir();
    at_make_digits(dir, "train", 64, 3, 11);
    at_make_digits(dir, "eval", 16, 3, 12);
    snprintf(cfg_path, cfg_cap, "%s/cfg.json", dir);
    at_write_config(cfg_path, dir, 64, 8, extra);
    return dir;
}

// The "loss" of every training line of dir/metrics.jsonl (a null loss, a non-finite one, reads
// as NaN); *n = how many (at most 4096). Every line must be JSON with "iter"; every step line
// must have the standard keys, and none may have `forbidden_key` (when not NULL). Free the result.
static inline double *at_read_losses(const char *dir, int *n, const char *forbidden_key) {
    char p[700];
    snprintf(p, sizeof p, "%s/metrics.jsonl", dir);
    char *text;
    size_t size;
    ck_assert_msg(ocr_read_file(p, &text, &size) == OCR_OK, "%s", ocr_last_error());
    double *v = malloc(4096 * sizeof *v);
    *n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        ck_assert_msg(o != NULL, "metrics.jsonl line is not JSON: %s", line);
        ck_assert(cJSON_HasObjectItem(o, "iter"));
        const cJSON *l = cJSON_GetObjectItem(o, "loss");
        if (l) {
            const char *keys[] = {"epoch", "lr", "loss_scale", "skipped", "samples_per_s", "step_time_s", NULL};
            for (int k = 0; keys[k]; k++) ck_assert_msg(cJSON_HasObjectItem(o, keys[k]), "no %s in %s", keys[k], line);
            ck_assert_msg(!forbidden_key || !cJSON_HasObjectItem(o, forbidden_key), "%s in %s", forbidden_key, line);
            if (*n < 4096) v[(*n)++] = cJSON_IsNumber(l) ? l->valuedouble : NAN;
        }
        cJSON_Delete(o);
    }
    free(text);
    return v;
}

// The JSON document in file `path` (the test fails when it cannot be read or parsed).
static inline cJSON *at_read_json(const char *path) {
    char *text;
    size_t n;
    ck_assert_msg(ocr_read_file(path, &text, &n) == OCR_OK, "%s", ocr_last_error());
    cJSON *root = cJSON_Parse(text);
    free(text);
    ck_assert_msg(root != NULL, "%s is not JSON", path);
    return root;
}

// A distillation config's PostProcess and Metric for a CTC network named Student (PaddleOCR's
// DistillationCTCLabelDecode and DistillationMetric on it), replacing the plain config's.
static inline void at_distill_student_decode(cJSON *root) {
    cJSON_ReplaceItemInObject(root, "PostProcess",
                              cJSON_Parse("{\"name\": \"DistillationCTCLabelDecode\", \"model_name\": [\"Student\"], "
                                          "\"key\": \"head_out\", \"multi_head\": false}"));
    cJSON_ReplaceItemInObject(root, "Metric",
                              cJSON_Parse("{\"name\": \"DistillationMetric\", \"base_metric_name\": \"RecMetric\", "
                                          "\"main_indicator\": \"acc\", \"key\": \"Student\"}"));
}

// Runs a subcommand in-process with a NULL-terminated argument list (argv[0] = the command).
typedef int (*at_cmd_fn)(int, char **);
static inline int at_run(at_cmd_fn fn, const char *const *args) {
    int n = 0;
    while (args[n]) n++;
    char **argv = calloc((size_t)n + 1, sizeof *argv);
    for (int i = 0; i < n; i++) argv[i] = strdup(args[i]);
    fflush(stdout);
    int rc = fn(n, argv);
    fflush(stdout);
    for (int i = 0; i < n; i++) free(argv[i]);
    free(argv);
    return rc;
}

static inline int at_exists(const char *path) {
    struct stat s;
    return stat(path, &s) == 0;
}

// Whole-file byte equality.
static inline int at_same_file(const char *a, const char *b) {
    char *x, *y;
    size_t nx, ny;
    if (ocr_read_file(a, &x, &nx) != OCR_OK) return 0;
    if (ocr_read_file(b, &y, &ny) != OCR_OK) {
        free(x);
        return 0;
    }
    int same = nx == ny && memcmp(x, y, nx) == 0;
    free(x);
    free(y);
    return same;
}

// at_run with stderr captured into err (NUL-terminated, truncated to cap).
static inline int at_run_capture(at_cmd_fn fn, const char *const *args, char *err, size_t cap) {
    char path[1024];
    int fd = ocr_test_tmpfile(path, sizeof path, "ocr_app_stderr_");
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    int rc = at_run(fn, args);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, err, cap - 1);
    err[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return rc;
}

// ---- subcommands in a child process (kill and signal tests) -------------------------------------
// A child runs fn(args) exactly as `ocrtrain` would (cli/main.c only dispatches) with stdout and
// stderr appended to `log` and, when env_name is not NULL, env_name=env_value set. The test
// process itself never trains, so no OpenMP thread pool exists when it forks.
static inline pid_t at_spawn(at_cmd_fn fn, const char *const *args, const char *log, const char *env_name,
                             const char *env_value) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        if (env_name) setenv(env_name, env_value, 1);
        int rc = at_run(fn, args);
        fflush(NULL);
        _exit(rc);  // not exit(): the parent's atexit handlers (temporary directories) are its own
    }
    return pid;
}

// Non-blocking wait: 1 and *status when the child has ended, else 0.
static inline int at_child_done(pid_t pid, int *status) {
    pid_t r = waitpid(pid, status, WNOHANG);
    ck_assert_int_ge(r, 0);
    return r == pid;
}

static inline void at_sleep_ms(double ms) {
    if (ms <= 0) return;
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - 1000.0 * (time_t)(ms / 1000)) * 1e6)};
    nanosleep(&ts, NULL);
}

static inline double at_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// The training steps recorded in dir/metrics.jsonl so far: the largest "iter" of a step line
// (a step line's "iter" counts the iterations done; 0 when none). Tolerates a torn last line (a killed writer), which it does not count.
static inline int64_t at_steps_recorded(const char *dir) {
    char p[700];
    snprintf(p, sizeof p, "%s/metrics.jsonl", dir);
    char *text;
    size_t size;
    if (ocr_read_file(p, &text, &size) != OCR_OK) return 0;
    int64_t n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        const cJSON *it = o ? cJSON_GetObjectItem(o, "iter") : NULL;
        if (it && cJSON_IsNumber(it) && cJSON_HasObjectItem(o, "loss") && (int64_t)it->valuedouble > n)
            n = (int64_t)it->valuedouble;
        cJSON_Delete(o);
    }
    free(text);
    return n;
}

// Prints a child's log (after a failure).
static inline void at_print_log(const char *log) {
    char *text;
    size_t size;
    if (ocr_read_file(log, &text, &size) != OCR_OK) return;
    printf("---- %s ----\n%s\n---- end ----\n", log, size > 6000 ? text + size - 6000 : text);
    free(text);
}
#endif
