#include "cli/cli_common.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "training/training.h"

// Python's True/False (PaddleOCR command lines) become JSON's true/false.
static char *make_assignment(const char *key, const char *value) {
    if (strcmp(value, "True") == 0) value = "true";
    if (strcmp(value, "False") == 0) value = "false";
    if (strcmp(value, "None") == 0) value = "null";
    size_t n = strlen(key) + strlen(value) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s=%s", key, value);
    return s;
}

static int add(CliConfigArgs *a, char *s) {
    if (!s) {
        ocr_set_error(OCR_ERR_OOM, "out of memory");
        return -1;
    }
    if (a->n_overrides >= CLI_MAX_OVERRIDES) {
        free(s);
        ocr_set_error(OCR_ERR_INVALID_ARG, "too many -o overrides (at most %d)", CLI_MAX_OVERRIDES);
        return -1;
    }
    a->overrides[a->n_overrides++] = s;
    return 0;
}

int cli_take_config_arg(CliConfigArgs *a, int argc, char **argv, int i) {
    const char *arg = argv[i];
    if (strcmp(arg, "-c") == 0 || strcmp(arg, "--config") == 0) {
        if (i + 1 >= argc) {
            ocr_set_error(OCR_ERR_INVALID_ARG, "%s needs a file", arg);
            return -1;
        }
        a->config = argv[i + 1];
        return 2;
    }
    if (strcmp(arg, "-o") == 0 || strcmp(arg, "--override") == 0) {
        int k = i + 1;
        while (k < argc && argv[k][0] != '-' && strchr(argv[k], '=')) {
            const char *eq = strchr(argv[k], '=');
            char key[512];
            size_t kl = (size_t)(eq - argv[k]);
            if (kl == 0 || kl >= sizeof key) {
                ocr_set_error(OCR_ERR_INVALID_ARG, "-o %s: expected Key.path=value", argv[k]);
                return -1;
            }
            memcpy(key, argv[k], kl);
            key[kl] = '\0';
            if (add(a, make_assignment(key, eq + 1)) != 0) return -1;
            k++;
        }
        if (k == i + 1) {
            ocr_set_error(OCR_ERR_INVALID_ARG, "-o needs Key.path=value (e.g. -o Global.epoch_num=10)");
            return -1;
        }
        return k - i;
    }
    // PaddleOCR's -p/--profiler_options "key1=value1;...": tools/program.py stores it as the
    // top-level config key profiler_options, which is accepted with a note (no profiler here).
    if (strcmp(arg, "-p") == 0 || strcmp(arg, "--profiler_options") == 0) {
        if (i + 1 >= argc) {
            ocr_set_error(OCR_ERR_INVALID_ARG, "%s needs a value (\"key1=value1;key2=value2\")", arg);
            return -1;
        }
        // Quoted, so that its '=' and ';' stay one string.
        cJSON *str = cJSON_CreateString(argv[i + 1]);
        char *q = str ? cJSON_PrintUnformatted(str) : NULL;
        cJSON_Delete(str);
        int rc = q ? add(a, make_assignment("profiler_options", q)) : -1;
        if (!q) ocr_set_error(OCR_ERR_OOM, "out of memory");
        free(q);
        return rc == 0 ? 2 : -1;
    }
    // --use_amp true, or --use_amp=true
    char flag[64];
    const char *eq = strchr(arg, '=');
    size_t fl = eq ? (size_t)(eq - arg) : strlen(arg);
    if (fl >= sizeof flag) return 0;
    memcpy(flag, arg, fl);
    flag[fl] = '\0';
    const char *key = run_config_shorthand(flag);
    if (!key) return 0;
    if (eq) return add(a, make_assignment(key, eq + 1)) == 0 ? 1 : -1;
    if (i + 1 >= argc) {
        ocr_set_error(OCR_ERR_INVALID_ARG, "%s needs a value", flag);
        return -1;
    }
    return add(a, make_assignment(key, argv[i + 1])) == 0 ? 2 : -1;
}

void cli_config_args_free(CliConfigArgs *a) {
    for (int i = 0; i < a->n_overrides; i++) free(a->overrides[i]);
    a->n_overrides = 0;
}

int cli_exit_code(ocr_status_t st) {
    switch (st) {
    case OCR_OK: return 0;
    case OCR_ERR_CONFIG:
    case OCR_ERR_NOT_FOUND:
    case OCR_ERR_INVALID_ARG:
    case OCR_ERR_FORMAT:
    case OCR_ERR_UNSUPPORTED: return 2;
    default: return 1;
    }
}
