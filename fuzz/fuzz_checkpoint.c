// Checkpoints' training state (training/checkpoint.c): ckpt_load_state (state.json) and
// ckpt_load_optimizer (optimizer.safetensors: Adam moments for a two-tensor parameter table
// "w" (2, 3) and "b" (3)). Both read a checkpoint directory, so the input is written into a
// temporary one.
//
// Input: one control byte, then the file. Control bit 0 clear: state.json; set:
// optimizer.safetensors.
// Checked: a state that loads has non-negative counters and NUL-terminated AMP strings; a
// loaded optimizer has its update count and finite-or-not moments fully readable.
#include <string.h>

#include "training/checkpoint.h"
#include "fuzz/fuzz_util.h"

static OcrParamTable table;
static Optimizer opt;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    ocr_params_init_table(&table, OCR_MEM_PARAMS);
    OcrInit init = {OCR_INIT_CONST, 0.5f, 0.0f};
    ocr_params_add(&table, "w", 2, (const int64_t[]){2, 3}, init, OCR_ROLE_WEIGHT);
    ocr_params_add(&table, "b", 1, (const int64_t[]){3}, init, OCR_ROLE_BIAS);
    ocr_params_layout(&table);
    OCR_ASSERT(ocr_params_alloc(&table, 1) == OCR_OK, "%s", ocr_last_error());
    OptimConfig cfg = {.beta1 = 0.9, .beta2 = 0.999, .epsilon = 1e-8, .lr = {.kind = LR_CONST, .learning_rate = 1e-3}};
    OCR_ASSERT(optim_init(&opt, &cfg, &table) == OCR_OK, "%s", ocr_last_error());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *dir = fuzz_temp_dir();
    if (!(data[0] & 1)) {
        fuzz_temp_file("state.json", data + 1, size - 1);
        CkptState s;
        if (ckpt_load_state(dir, &s) == OCR_OK) {
            OCR_ASSERT(s.iter >= 0 && s.epoch >= 0 && s.batch_in_epoch >= 0 && s.updates >= 0 && s.best_iter >= 0,
                       "negative counters loaded");
            OCR_ASSERT(memchr(s.amp_level, 0, sizeof s.amp_level) && memchr(s.amp_dtype, 0, sizeof s.amp_dtype),
                       "unterminated AMP strings");
        } else {
            OCR_ASSERT(strstr(ocr_last_error(), "state.json"), "message without the file: %s", ocr_last_error());
        }
        return 0;
    }
    fuzz_temp_file("optimizer.safetensors", data + 1, size - 1);
    if (ckpt_load_optimizer(dir, &opt, NULL, &table) == OCR_OK) {
        float sum = 0;
        for (int i = 0; i < opt.count; i++)
            for (int64_t k = 0; k < table.items[i].numel; k++)
                sum += ((const float *)opt.m[i].data)[k] + ((const float *)opt.v[i].data)[k];
        volatile float sink = sum;
        (void)sink;
    } else {
        OCR_ASSERT(strstr(ocr_last_error(), "optimizer.safetensors"), "message without the file: %s", ocr_last_error());
    }
    return 0;
}
