// ocrtrain capacity -c CFG [--memory SIZE] [--json] [--verify [B]] [-o Key.path=value ...]:
// the largest training batch per precision (fp32, fp16-o1, fp16-o2, bf16-o2) for a memory
// budget, with the fixed bytes and the bytes per sample of each (training/capacity.h).
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "training/training.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "core/memory.h"

int cmd_capacity(int argc, char **argv) {
    CliConfigArgs ca = {0};
    int64_t memory = 0;
    int json = 0, verify = 0;
    const CliFlag flags[] = {
        {CLI_CONFIG, .dest = &ca, .required = 1, .help = "the config (JSON or PaddleOCR's .yml); its Train section is planned"},
        {CLI_SIZE, "--memory", .meta = "SIZE", .dest = &memory,
         .help = "the budget (16G, 24GiB, 512M, bytes); required on the CPU (on a GPU: its free memory)"},
        {CLI_BOOL, "--json", .dest = &json,
         .help = "{\"memory_bytes\", \"precisions\": [{\"name\", \"max_batch\", \"bytes_per_sample\", \"fixed_bytes\"}]}"},
        {CLI_INT, "--verify", .meta = "B", .dest = &verify, .optional_value = 1, .implicit = 8,
         .help = "run one real training step per precision at min(max_batch, B) (default 8) and\n"
                 "check that the plan is within 5% of what it allocated"},
        {0}};
    const CliCommand cmd = {.name = "capacity", .flags = flags};
    int rc0 = cli_parse(&cmd, argc, argv);
    if (rc0 != CLI_CONTINUE) return rc0;
    OcrConfig *cfg;
    RunConfig rc;
    ocr_status_t st = run_config_load(&cfg, &rc, ca.config, (const char *const *)ca.overrides, ca.n_overrides,
                                      RUN_NEED_TRAIN_SECTION);
    cli_free(&cmd);
    if (st != OCR_OK) return cli_fail_status(&cmd, st);
    char dev[32];
    st = training_resolve_device(rc.device_name, dev, sizeof dev);
    if (st == OCR_OK && memory == 0) memory = capacity_default_budget(dev);
    if (st == OCR_OK && memory == 0)
        st = ocr_set_error(OCR_ERR_INVALID_ARG, "--memory SIZE is required when planning for the CPU (the device "
                           "here is %s)", dev);
    CapacityRun run;
    if (st == OCR_OK) {
        training_set_threads(rc.threads);
        st = capacity_run(cfg, memory, verify, &run);
    }
    if (st != OCR_OK) {
        ocr_config_free(cfg);
        return cli_fail_status(&cmd, st);
    }
    const CapacityPrecision *cp = run.cp;
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
            if (cp[i].teacher_networks) {
                // The frozen networks (distillation): their own category, in fixed_bytes and
                // bytes_per_sample, not in the by-category figures (the trained network's).
                cJSON *t = cJSON_AddObjectToObject(p, "teacher");
                cJSON_AddNumberToObject(t, "networks", cp[i].teacher_networks);
                cJSON_AddNumberToObject(t, "weights_bytes", (double)cp[i].teacher_weights_bytes);
                cJSON_AddNumberToObject(t, "activations_fixed_bytes", (double)cp[i].teacher_activations_fixed);
                cJSON_AddNumberToObject(t, "activations_bytes_per_sample", (double)cp[i].teacher_activations_per_sample);
            }
            if (cp[i].peer_networks) {
                cJSON *t = cJSON_AddObjectToObject(p, "trained_beside");
                cJSON_AddNumberToObject(t, "networks", cp[i].peer_networks);
                cJSON_AddNumberToObject(t, "fixed_bytes", (double)cp[i].peer_fixed_bytes);
                cJSON_AddNumberToObject(t, "bytes_per_sample", (double)cp[i].peer_per_sample);
            }
            if (run.verified) {
                cJSON *v = cJSON_AddObjectToObject(p, "verified");
                cJSON_AddNumberToObject(v, "batch", run.batch[i]);
                cJSON_AddNumberToObject(v, "planned_bytes", (double)run.planned[i]);
                cJSON_AddNumberToObject(v, "measured_bytes", (double)run.measured[i]);
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
        for (int i = 0; i < CAPACITY_PRECISIONS; i++) {
            char d[32];
            if (cp[i].teacher_networks)
                printf("  %-9s teacher (%d frozen network(s), included above): weights %s, forward activations %s "
                       "+ %s/sample\n",
                       cp[i].name, cp[i].teacher_networks, ocr_format_bytes(cp[i].teacher_weights_bytes, a, sizeof a),
                       ocr_format_bytes(cp[i].teacher_activations_fixed, b, sizeof b),
                       ocr_format_bytes(cp[i].teacher_activations_per_sample, d, sizeof d));
            if (cp[i].peer_networks)
                printf("  %-9s %d network(s) trained beside (included above): %s + %s/sample\n", cp[i].name,
                       cp[i].peer_networks, ocr_format_bytes(cp[i].peer_fixed_bytes, a, sizeof a),
                       ocr_format_bytes(cp[i].peer_per_sample, b, sizeof b));
        }
        for (int i = 0; run.verified && i < CAPACITY_PRECISIONS; i++) {
            int64_t pl = run.planned[i], me = run.measured[i];
            printf("  verify %-8s batch %d: planned %s, a real step allocated %s (%+.1f%%)\n", cp[i].name, run.batch[i],
                   ocr_format_bytes(pl, a, sizeof a), ocr_format_bytes(me, b, sizeof b),
                   me ? 100.0 * ((double)pl - (double)me) / (double)me : 0.0);
        }
    }
    ocr_config_free(cfg);
    if (run.disagree) {
        fprintf(stderr, "ocrtrain capacity: the plan and a real step differ by more than 5%% (a bug; please report "
                        "it with this config)\n");
        return 1;
    }
    return 0;
}
