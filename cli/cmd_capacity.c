// ocrtrain capacity -c CFG [--memory SIZE] [--json] [--verify [B]] [-o Key.path=value ...]:
// the largest training batch per precision (fp32, fp16-o1, fp16-o2, bf16-o2) for a memory
// budget, with the fixed bytes and the bytes per sample of each (training/capacity.h).
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "training/capacity.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "training/run_config.h"
#include "training/trainer.h"
#include "core/memory.h"
#include "kernels/backend.h"

static void usage(FILE *f) {
    fprintf(f, "usage: ocrtrain capacity -c CFG --memory SIZE [--json] [--verify [B]] [-o Key.path=value ...]\n"
               "  --memory SIZE  the budget (16G, 24GiB, 512M, bytes); required on the CPU (on a GPU: its free memory)\n"
               "  --json         {\"memory_bytes\", \"precisions\": [{\"name\", \"max_batch\", \"bytes_per_sample\", "
               "\"fixed_bytes\"}]}\n"
               "  --verify [B]   run one real training step per precision at min(max_batch, B) (default 8) and\n"
               "                 check that the plan is within 5%% of what it allocated\n");
}

int cmd_capacity(int argc, char **argv) {
    CliConfigArgs ca = {0};
    int64_t memory = 0;
    int json = 0, verify = 0;
    for (int i = 1; i < argc;) {
        int n = cli_take_config_arg(&ca, argc, argv, i);
        if (n < 0) {
            fprintf(stderr, "ocrtrain capacity: %s\n", ocr_last_error());
            cli_config_args_free(&ca);
            return 2;
        }
        if (n > 0) {
            i += n;
        } else if (strcmp(argv[i], "--memory") == 0 && i + 1 < argc) {
            if (!parse_memory_size(argv[i + 1], &memory)) {
                fprintf(stderr, "ocrtrain capacity: --memory: cannot read '%s' (examples: 16G, 512MiB, 1000000)\n",
                        argv[i + 1]);
                cli_config_args_free(&ca);
                return 2;
            }
            i += 2;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
            i++;
        } else if (strcmp(argv[i], "--verify") == 0) {
            verify = 8;
            i++;
            if (i < argc && argv[i][0] >= '0' && argv[i][0] <= '9') {
                verify = atoi(argv[i]);
                if (verify < 1) verify = 1;
                i++;
            }
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            cli_config_args_free(&ca);
            return 0;
        } else {
            fprintf(stderr, "ocrtrain capacity: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            cli_config_args_free(&ca);
            return 2;
        }
    }
    if (!ca.config) {
        fprintf(stderr, "ocrtrain capacity: a config is required (-c CFG)\n");
        usage(stderr);
        cli_config_args_free(&ca);
        return 2;
    }
    OcrConfig *cfg;
    RunConfig rc;
    ocr_status_t st =
        run_config_load(&cfg, &rc, ca.config, (const char *const *)ca.overrides, ca.n_overrides,
                        RUN_NEED_TRAIN_SECTION);
    cli_config_args_free(&ca);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain capacity: %s\n", ocr_last_error());
        return cli_exit_code(st);
    }
    char dev[32];
    st = training_resolve_device(rc.device_name, dev, sizeof dev);
#ifdef OCR_HAVE_CUDA
    if (st == OCR_OK && memory == 0 && strncmp(dev, "cuda", 4) == 0) {
        // On a GPU the budget defaults to the device's free memory now.
        ocr_device_t d;
        OcrDeviceInfo ci;
        if (ocr_device_parse(dev, &d) == OCR_OK && ocr_backend_device_info(d, &ci) == OCR_OK)
            memory = (int64_t)ci.free_memory;
    }
#endif
    if (st == OCR_OK && memory == 0)
        st = ocr_set_error(OCR_ERR_INVALID_ARG, "--memory SIZE is required when planning for the CPU (the device "
                           "here is %s)", dev);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain capacity: %s\n", ocr_last_error());
        ocr_config_free(cfg);
        return cli_exit_code(st);
    }
    training_set_threads(rc.threads);
    CapacityPrecision cp[CAPACITY_PRECISIONS];
    for (int i = 0; i < CAPACITY_PRECISIONS && st == OCR_OK; i++)
        st = capacity_plan(cfg, capacity_precision_name(i), memory, &cp[i]);
    int disagree = 0;
    int64_t measured[CAPACITY_PRECISIONS] = {0};
    int vbatch[CAPACITY_PRECISIONS] = {0};
    for (int i = 0; verify && i < CAPACITY_PRECISIONS && st == OCR_OK; i++) {
        int64_t b = cp[i].max_batch < verify ? cp[i].max_batch : verify;
        if (b < 1) b = 1;
        OcrMemStats ms;
        st = capacity_measure(cfg, cp[i].name, (int)b, &ms);
        vbatch[i] = (int)b;
        measured[i] = ms.peak_total;
        double planned = (double)capacity_bytes(&cp[i], b);
        if (st == OCR_OK && (planned > 1.05 * (double)ms.peak_total || planned < 0.95 * (double)ms.peak_total))
            disagree = 1;
    }
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain capacity: %s\n", ocr_last_error());
        ocr_config_free(cfg);
        return cli_exit_code(st);
    }
    char a[32], b[32], c[32];
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "memory_bytes", (double)memory);
        cJSON_AddStringToObject(o, "device", dev);
        cJSON *shape = cJSON_AddArrayToObject(o, "input_shape");  // [C, H, W]
        cJSON_AddItemToArray(shape, cJSON_CreateNumber(cp[0].channels));
        cJSON_AddItemToArray(shape, cJSON_CreateNumber(cp[0].height));
        cJSON_AddItemToArray(shape, cJSON_CreateNumber(cp[0].width));
        cJSON *arr = cJSON_AddArrayToObject(o, "precisions");
        for (int i = 0; i < CAPACITY_PRECISIONS; i++) {
            cJSON *p = cJSON_CreateObject();
            cJSON_AddStringToObject(p, "name", cp[i].name);
            cJSON_AddNumberToObject(p, "max_batch", (double)cp[i].max_batch);
            cJSON_AddNumberToObject(p, "bytes_per_sample", (double)cp[i].bytes_per_sample);
            cJSON_AddNumberToObject(p, "fixed_bytes", (double)cp[i].fixed_bytes);
            cJSON *fb = cJSON_AddObjectToObject(p, "fixed_by_category");
            cJSON *sb = cJSON_AddObjectToObject(p, "per_sample_by_category");
            for (int k = 0; k < OCR_MEM_CATEGORY_COUNT; k++) {
                cJSON_AddNumberToObject(fb, ocr_mem_category_name((ocr_mem_category_t)k),
                                        (double)cp[i].fixed_by_category[k]);
                cJSON_AddNumberToObject(sb, ocr_mem_category_name((ocr_mem_category_t)k),
                                        (double)cp[i].per_sample_by_category[k]);
            }
            if (verify) {
                cJSON *v = cJSON_AddObjectToObject(p, "verified");
                cJSON_AddNumberToObject(v, "batch", vbatch[i]);
                cJSON_AddNumberToObject(v, "planned_bytes", (double)capacity_bytes(&cp[i], vbatch[i]));
                cJSON_AddNumberToObject(v, "measured_bytes", (double)measured[i]);
            }
            cJSON_AddItemToArray(arr, p);
        }
        char *s = cJSON_Print(o);
        printf("%s\n", s ? s : "{}");
        free(s);
        cJSON_Delete(o);
    } else {
        printf("training memory of %s at its Train input size %dx%dx%d (budget %s, device %s):\n", ca.config,
               cp[0].channels, cp[0].height, cp[0].width, ocr_format_bytes(memory, a, sizeof a), dev);
        printf("  %-9s %10s %16s %14s\n", "precision", "max batch", "bytes/sample", "fixed");
        for (int i = 0; i < CAPACITY_PRECISIONS; i++)
            printf("  %-9s %10lld %16s %14s\n", cp[i].name, (long long)cp[i].max_batch,
                   ocr_format_bytes(cp[i].bytes_per_sample, b, sizeof b), ocr_format_bytes(cp[i].fixed_bytes, c, sizeof c));
        for (int i = 0; verify && i < CAPACITY_PRECISIONS; i++) {
            int64_t pl = capacity_bytes(&cp[i], vbatch[i]);
            printf("  verify %-8s batch %d: planned %s, a real step allocated %s (%+.1f%%)\n", cp[i].name, vbatch[i],
                   ocr_format_bytes(pl, a, sizeof a), ocr_format_bytes(measured[i], b, sizeof b),
                   measured[i] ? 100.0 * ((double)pl - (double)measured[i]) / (double)measured[i] : 0.0);
        }
    }
    ocr_config_free(cfg);
    if (disagree) {
        fprintf(stderr, "ocrtrain capacity: the plan and a real step differ by more than 5%% (a bug; please report "
                        "it with this config)\n");
        return 1;
    }
    return 0;
}
