// ocrtrain train -c CFG [-o Key.path=value ...] [--use_amp true --amp_dtype bfloat16 ...]
//                [--max-steps N]
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "training/run_config.h"
#include "training/trainer.h"
#include "core/memory.h"

extern volatile sig_atomic_t train_stop_requested;

// The first SIGINT or SIGTERM finishes the step, writes `latest` and exits with 128 + the
// signal's number (130, 143: the shell's convention); a second one exits at once with that
// code (the checkpoint being written then is left as a temporary, never under its name).
static void on_signal(int sig) {
    if (train_stop_requested) _Exit(128 + train_stop_requested);
    train_stop_requested = sig;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: ocrtrain train -c CFG [-o Key.path=value ...] [--max-steps N]\n"
            "                      [--use_amp true] [--scale_loss S] [--amp_level O1|O2] [--amp_dtype float16|bfloat16]\n"
            "  -c CFG            PaddleOCR-style JSON config (Global, Architecture, Optimizer, Train, Eval ...)\n"
            "  -o K=V [K=V ...]  override config keys (Global.epoch_num=10 Optimizer.lr.learning_rate=5e-4)\n"
            "  --max-steps N     stop after N iterations in total (writes save_model_dir/latest; resume with\n"
            "                    -o Global.checkpoints=<save_model_dir>/latest)\n"
            "  --use_amp, --scale_loss, --amp_level, --amp_dtype, --use_dynamic_loss_scaling: the Global AMP keys\n"
            "Writes save_model_dir/{metrics.jsonl, config.json, latest/, best/}.\n");
}

int cmd_train(int argc, char **argv) {
    CliConfigArgs ca = {0};
    int64_t max_steps = 0;
    for (int i = 1; i < argc;) {
        int n = cli_take_config_arg(&ca, argc, argv, i);
        if (n < 0) {
            fprintf(stderr, "ocrtrain train: %s\n", ocr_last_error());
            cli_config_args_free(&ca);
            return 2;
        }
        if (n > 0) {
            i += n;
            continue;
        }
        if (strcmp(argv[i], "--max-steps") == 0 && i + 1 < argc) {
            char *end;
            max_steps = strtoll(argv[i + 1], &end, 10);
            if (*end || max_steps < 1) {
                fprintf(stderr, "ocrtrain train: --max-steps needs a positive integer, got '%s'\n", argv[i + 1]);
                cli_config_args_free(&ca);
                return 2;
            }
            i += 2;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            cli_config_args_free(&ca);
            return 0;
        } else {
            fprintf(stderr, "ocrtrain train: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            cli_config_args_free(&ca);
            return 2;
        }
    }
    if (!ca.config) {
        fprintf(stderr, "ocrtrain train: a config is required (-c CFG)\n");
        usage(stderr);
        return 2;
    }
    OcrConfig *cfg;
    RunConfig rc;
    ocr_status_t st =
        run_config_load(&cfg, &rc, ca.config, (const char *const *)ca.overrides, ca.n_overrides, RUN_NEED_TRAIN);
    cli_config_args_free(&ca);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain train: %s\n", ocr_last_error());
        return cli_exit_code(st);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;  // a read or write the signal lands in goes on, it does not fail with EINTR
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    TrainOptions opt = {0};
    opt.progress = stderr;
    opt.max_iters = max_steps;
    opt.save_checkpoints = 1;
    TrainResult res;
    st = train_run(cfg, &rc, &opt, &res);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain train: %s\n", ocr_last_error());
        ocr_config_free(cfg);
        train_result_free(&res);
        return cli_exit_code(st);
    }
    char mem[32];
    printf("trained %lld steps (%s %s) in %.1f s: %.1f samples/s, median step %.3f s, final loss %.4f, "
           "skipped steps %lld, peak memory %s\n",
           (long long)res.n_steps, res.amp_level, res.amp_dtype, res.train_seconds, res.samples_per_s,
           res.median_step_s, res.final_loss, (long long)res.skipped_steps,
           ocr_format_bytes(res.memory.peak_total, mem, sizeof mem));
    if (res.best_acc >= 0)
        printf("best eval accuracy %.4f at step %lld (%s/best)\n", res.best_acc, (long long)res.best_iter,
               rc.save_model_dir);
    printf("checkpoint: %s/latest   metrics: %s/metrics.jsonl\n", rc.save_model_dir, rc.save_model_dir);
    int interrupted = train_stop_requested;
    ocr_config_free(cfg);
    train_result_free(&res);
    return interrupted ? 128 + interrupted : 0;
}
