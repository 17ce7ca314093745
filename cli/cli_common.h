// Shared command-line handling of the training commands: -c CFG, -o Key.path=value (several
// assignments may follow one -o, as in PaddleOCR's tools/train.py), PaddleOCR's AMP flags
// (--use_amp true, --scale_loss 1024, --amp_level O2, --amp_dtype bfloat16, ...), PaddleOCR's
// -p/--profiler_options (kept as the config key profiler_options, which has no effect here), and
// the mapping from statuses to exit codes.
#ifndef OCR_CLI_COMMON_H
#define OCR_CLI_COMMON_H

#include "core/error.h"

#define CLI_MAX_OVERRIDES 128

typedef struct {
    const char *config;
    int n_overrides;
    char *overrides[CLI_MAX_OVERRIDES];  // owned "Key.path=value" strings
} CliConfigArgs;

// Consumes argv[i] (and its values) when it is -c/--config, -o or a PaddleOCR shorthand.
// Returns the number of arguments consumed, 0 when argv[i] is not one of these, -1 (message
// set) when a value is missing or malformed.
int cli_take_config_arg(CliConfigArgs *a, int argc, char **argv, int i);
void cli_config_args_free(CliConfigArgs *a);

// 2 for usage/config problems (CONFIG, NOT_FOUND, INVALID_ARG, FORMAT, UNSUPPORTED), 1 for
// runtime failures (IO, OOM, CUDA, INTERNAL).
int cli_exit_code(ocr_status_t st);

#endif
