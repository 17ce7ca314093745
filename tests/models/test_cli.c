// The `ocrtrain info` and `ocrtrain import` commands, run as a user runs them (the built
// binary; skips when it has not been built). info --json must give the architecture's
// parameter totals and a layer list, with each layer's compute dtype under the config's AMP
// keys (O1: white ops low precision, black ops f32, grey ops their input's dtype; O2 with
// amp_fp32_layers); bad configs exit 2 with a message; import writes the weights, and rejects
// a damaged file with exit 1 without writing anything.
#include <cjson/cJSON.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fileio.h"
#include "tests/models/model_test_util.h"

static char bin[1024];

static int have_binary(void) {
    snprintf(bin, sizeof bin, "%s/ocrtrain", OCR_BINARY_DIR);
    if (access(bin, X_OK) != 0) {
        printf("SKIP: %s is not built\n", bin);
        return 0;
    }
    return 1;
}

// Runs a command line, captures stdout (and stderr when asked), returns the exit code.
static int run(const char *args, char **out, int with_stderr) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd %s && %s %s%s", OCR_SOURCE_DIR, bin, args, with_stderr ? " 2>&1" : " 2>/dev/null");
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += r;
        if (n + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    buf[n] = '\0';
    int status = pclose(p);
    if (out) *out = buf;
    else free(buf);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

START_TEST(test_info_json) {
    if (!have_binary()) return;
    struct {
        const char *args;
        double params;
    } cases[] = {
        {"info -c configs/rec_ppocrv3_en.json --json", 2215345},
        {"info -c configs/rec_ppocrv4_ch.json --json", 6259405},
        {"info -c configs/rec_ppocrv4_ch.json --json -o Architecture.Backbone.deploy=true", 2688509},
        {"info -c configs/rec_svtr_tiny.json --json", 4806913},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out;
        ck_assert_int_eq(run(cases[i].args, &out, 0), 0);
        cJSON *j = cJSON_Parse(out);
        ck_assert_msg(j, "not JSON: %.200s", out);
        ck_assert(cJSON_GetObjectItem(j, "params_total")->valuedouble == cases[i].params);
        ck_assert(cJSON_GetObjectItem(j, "flops_per_sample")->valuedouble > 1e8);
        const cJSON *layers = cJSON_GetObjectItem(j, "layers");
        ck_assert(cJSON_GetArraySize(layers) > 100);
        double sum = 0;
        for (const cJSON *l = layers->child; l; l = l->next) {
            ck_assert(cJSON_IsString(cJSON_GetObjectItem(l, "name")));
            ck_assert(cJSON_IsString(cJSON_GetObjectItem(l, "type")));
            ck_assert(cJSON_GetArraySize(cJSON_GetObjectItem(l, "output_shape")) >= 3);
            ck_assert_str_eq(cJSON_GetObjectItem(l, "compute_dtype")->valuestring, "float32");
            sum += cJSON_GetObjectItem(l, "params")->valuedouble;
        }
        ck_assert(sum == cases[i].params);  // every parameter belongs to exactly one layer
        // The head's output: (1, T, classes) with T = W/8 for the configs' 320-wide inputs.
        const cJSON *last = cJSON_GetArrayItem(layers, cJSON_GetArraySize(layers) - 1);
        ck_assert_int_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(last, "output_shape"), 1)->valueint, 40);
        cJSON_Delete(j);
        free(out);
    }
    char *out;
    ck_assert_int_eq(run("info -c configs/rec_ppocrv3_en.json", &out, 0), 0);
    ck_assert_msg(strstr(out, "trainable parameters: 2,215,345"), "%.300s", out);
    ck_assert(strstr(out, "backbone.block_list.12._se.conv2"));
    free(out);
}
END_TEST

START_TEST(test_info_errors) {
    if (!have_binary()) return;
    char *out;
    ck_assert_int_eq(run("info -c configs/does_not_exist.json", &out, 1), 2);
    ck_assert_msg(strstr(out, "does_not_exist.json"), "%s", out);
    free(out);
    ck_assert_int_eq(run("info -c configs/rec_ppocrv4_ch.json -o Architecture.Neck.hiden_dims=64", &out, 1), 2);
    ck_assert_msg(strstr(out, "did you mean hidden_dims"), "%s", out);
    free(out);
    ck_assert_int_eq(run("info", &out, 1), 2);
    free(out);
}
END_TEST

static const char *jstr(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(o, key);
    ck_assert_msg(cJSON_IsString(v), "no string %s", key);
    return v->valuestring;
}

static int is_type(const char *t, const char *const *list) {
    for (int i = 0; list[i]; i++)
        if (strcmp(t, list[i]) == 0) return 1;
    return 0;
}

static const char *const WHITE[] = {"conv2d", "linear", "attention", NULL};
static const char *const BLACK[] = {"softmax", "layernorm", NULL};

static cJSON *info_json(const char *args, double *act_bytes) {
    char *out;
    ck_assert_int_eq(run(args, &out, 0), 0);
    cJSON *j = cJSON_Parse(out);
    ck_assert_msg(j, "not JSON: %.200s", out);
    free(out);
    *act_bytes = cJSON_GetObjectItem(j, "activation_bytes_per_sample_inference")->valuedouble;
    return j;
}

START_TEST(test_info_amp) {
    if (!have_binary()) return;
    double f32_bytes, o1_bytes, o2_bytes;
    cJSON *j = info_json("info -c configs/rec_svtr_tiny.json --json", &f32_bytes);
    ck_assert_str_eq(jstr(cJSON_GetObjectItem(j, "amp"), "level"), "O0");
    cJSON_Delete(j);
    // O1: white → float16, black → float32, grey → the dtype of the op before it.
    j = info_json("info -c configs/rec_svtr_tiny.json --json -o Global.use_amp=true -o Global.amp_level=O1", &o1_bytes);
    ck_assert_str_eq(jstr(cJSON_GetObjectItem(j, "amp"), "level"), "O1");
    ck_assert_str_eq(jstr(cJSON_GetObjectItem(j, "amp"), "dtype"), "float16");
    const char *prev = "float32";
    int white = 0, black = 0, follow16 = 0, follow32 = 0;
    for (const cJSON *l = cJSON_GetObjectItem(j, "layers")->child; l; l = l->next) {
        const char *t = jstr(l, "type"), *d = jstr(l, "compute_dtype"), *want;
        if (is_type(t, WHITE)) {
            want = "float16", white++;
            ck_assert_str_eq(jstr(l, "amp_class"), "white");
        } else if (is_type(t, BLACK)) {
            want = "float32", black++;
            ck_assert_str_eq(jstr(l, "amp_reason"), "black list");
        } else {
            want = prev;
            ck_assert_str_eq(jstr(l, "amp_reason"), "follows input");
            if (strcmp(prev, "float16") == 0) follow16++;
            else follow32++;
        }
        ck_assert_msg(strcmp(d, want) == 0, "%s (%s): %s, expected %s", jstr(l, "name"), t, d, want);
        prev = d;
    }
    ck_assert(white > 10 && black > 5 && follow16 > 5 && follow32 > 0);
    cJSON_Delete(j);
    // O2, bfloat16, the head kept in float32 by name.
    j = info_json("info -c configs/rec_ppocrv3_en.json --json -o Global.use_amp=true -o Global.amp_dtype=bfloat16 "
                  "-o Global.amp_fp32_layers='[\"head.*\"]'",
                  &o2_bytes);
    ck_assert_str_eq(jstr(cJSON_GetObjectItem(j, "amp"), "level"), "O2");
    ck_assert_str_eq(jstr(cJSON_GetObjectItem(j, "amp"), "dtype"), "bfloat16");
    int head = 0;
    for (const cJSON *l = cJSON_GetObjectItem(j, "layers")->child; l; l = l->next) {
        const char *n = jstr(l, "name"), *t = jstr(l, "type"), *d = jstr(l, "compute_dtype");
        if (strncmp(n, "head.", 5) == 0) {
            head++;
            ck_assert_str_eq(d, "float32");
            ck_assert_str_eq(jstr(l, "amp_reason"), "amp_fp32_layers");
        } else {
            ck_assert_msg(strcmp(d, is_type(t, BLACK) ? "float32" : "bfloat16") == 0, "%s: %s", n, d);
        }
    }
    ck_assert_int_ge(head, 1);
    cJSON_Delete(j);
    double v3_f32;
    cJSON_Delete(info_json("info -c configs/rec_ppocrv3_en.json --json", &v3_f32));
    // Low-precision activations take less memory in the plan.
    ck_assert(o2_bytes < 0.75 * v3_f32);
    ck_assert(o1_bytes < f32_bytes);
    // The text table says so too.
    char *out;
    ck_assert_int_eq(run("info -c configs/rec_ppocrv3_en.json -o Global.use_amp=true", &out, 0), 0);
    ck_assert_msg(strstr(out, "precision: AMP O2, float16"), "%.400s", out);
    ck_assert_msg(strstr(out, "head.fc                ") && strstr(out, "float16"), "%.400s", out);
    free(out);
    // AMP config errors are config errors here too.
    ck_assert_int_eq(run("info -c configs/rec_ppocrv3_en.json -o Global.use_amp=true "
                         "-o Global.amp_fp32_layers='[\"nek.*\"]'",
                         &out, 1),
                     2);
    ck_assert_msg(strstr(out, "nek.*") && strstr(out, "matches no layer"), "%s", out);
    free(out);
    ck_assert_int_eq(run("info -c configs/rec_ppocrv3_en.json -o Global.amp_levl=O1", &out, 1), 2);
    ck_assert_msg(strstr(out, "did you mean Global.amp_level"), "%s", out);
    free(out);
}
END_TEST

START_TEST(test_import) {
    if (!have_binary()) return;
    char onnx[1024];
    if (!ocr_test_shared_path("models/ppocrv4_rec/ch_PP-OCRv4_rec_infer.onnx", onnx, sizeof onnx)) return;
    char dst[512], bad[512], args[4096];
    snprintf(dst, sizeof dst, "%s/cli_import_%d.safetensors", OCR_BINARY_DIR, (int)getpid());
    snprintf(bad, sizeof bad, "%s/cli_import_%d.onnx", OCR_BINARY_DIR, (int)getpid());
    // A damaged copy (cut in the middle of the weights): exit 1, nothing written.
    char *data;
    size_t size;
    ck_assert(ocr_read_file(onnx, &data, &size) == OCR_OK);
    ck_assert(ocr_write_file_atomic(bad, data, size / 2) == OCR_OK);
    free(data);
    char *out;
    snprintf(args, sizeof args, "import --onnx %s --out %s", bad, dst);
    ck_assert_int_eq(run(args, &out, 1), 1);
    ck_assert_msg(strstr(out, "nothing was written") || strstr(out, "not a readable ONNX model"), "%s", out);
    ck_assert(!ocr_file_exists(dst));
    free(out);
    unlink(bad);
    snprintf(args, sizeof args, "import --onnx %s --out %s", onnx, dst);
    ck_assert_int_eq(run(args, &out, 1), 0);
    ck_assert_msg(strstr(out, "2688509 parameters"), "%s", out);
    free(out);
    OcrModel *m = tm_model("rec_ppocrv4_ch.json", (const char *const[]){"Architecture.Backbone.deploy=true", NULL});
    ck_assert_msg(ocr_model_load_weights(m, dst) == OCR_OK, "%s", ocr_last_error());
    ocr_model_free(m);
    // The training form has other tensors: loading says which one is missing.
    m = tm_model("rec_ppocrv4_ch.json", NULL);
    ck_assert_int_eq(ocr_model_load_weights(m, dst), OCR_ERR_FORMAT);
    ck_assert_msg(strstr(ocr_last_error(), "not part of this model") || strstr(ocr_last_error(), "no tensor"), "%s",
                  ocr_last_error());
    ocr_model_free(m);
    unlink(dst);
    ck_assert_int_eq(run("import --onnx", &out, 1), 2);
    free(out);
}
END_TEST

int main(void) {
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_info_json);
    tcase_add_test(tc, test_info_errors);
    tcase_add_test(tc, test_info_amp);
    tcase_add_test(tc, test_import);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}
