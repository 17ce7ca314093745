// ocrtrain train -c CFG [-o Key.path=value ...] [--use_amp true --amp_dtype bfloat16 ...]
//                [--max-steps N]: trains (training/trainer.h), writing checkpoints and metrics.jsonl.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "training/training.h"
#include "core/memory.h"

extern volatile sig_atomic_t train_stop_requested;

// The first SIGINT or SIGTERM finishes the step, writes `latest` and exits with 128 + the
// signal's number (130, 143: the shell's convention); a second one exits at once with that
// code (the checkpoint being written then is left as a temporary, never under its name).
static void on_signal(int sig) {
    if (train_stop_requested) _Exit(128 + train_stop_requested);
    train_stop_requested = sig;
}

int cmd_train(int argc, char **argv) {
    CliConfigArgs ca = {0};
    int64_t max_steps = 0;
    const CliFlag flags[] = {
        {CLI_CONFIG, .dest = &ca, .required = 1,
         .help = "PaddleOCR-style JSON config (Global, Architecture, Optimizer, Train, Eval ...)"},
        {CLI_INT64, "--max-steps", .meta = "N", .dest = &max_steps,
         .help = "stop after N iterations in total (writes save_model_dir/latest; resume with\n"
                 "-o Global.checkpoints=<save_model_dir>/latest)"},
        {0}};
    const CliCommand cmd = {
        "train", flags,
        .epilog = "PaddleOCR's AMP flags set the Global AMP keys: --use_amp true, --scale_loss S, --amp_level O1|O2,\n"
                  "--amp_dtype float16|bfloat16, --use_dynamic_loss_scaling\n"
                  "Writes save_model_dir/{metrics.jsonl, config.json, latest/, best/}.\n"};
    int rc0 = cli_parse(&cmd, argc, argv);
    if (rc0 != CLI_CONTINUE) return rc0;
    OcrConfig *cfg;
    RunConfig rc;
    ocr_status_t st =
        run_config_load(&cfg, &rc, ca.config, (const char *const *)ca.overrides, ca.n_overrides, RUN_NEED_TRAIN);
    if (st != OCR_OK) return cli_fail_status(&cmd, st);
    cli_free(&cmd);
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
           "skipped steps %lld, recomputed %lld, peak memory %s\n",
           (long long)res.history.n_steps, res.config.amp_level, res.config.amp_dtype, res.throughput.train_seconds, res.throughput.samples_per_s,
           res.throughput.median_step_s, res.outcome.final_loss, (long long)res.amp.skipped_steps,
           (long long)res.amp.recomputed_steps,
           ocr_format_bytes(res.memory.stats.peak_total, mem, sizeof mem));
    if (res.outcome.best_acc >= 0)
        printf("best eval accuracy %.4f at step %lld (%s/best)\n", res.outcome.best_acc, (long long)res.outcome.best_iter,
               rc.save_model_dir);
    char forgetting[512];
    train_forgetting_line(&res.outcome, forgetting, sizeof forgetting);
    if (forgetting[0]) printf("%s\n", forgetting);
    printf("checkpoint: %s/latest   metrics: %s/metrics.jsonl\n", rc.save_model_dir, rc.save_model_dir);
    int interrupted = train_stop_requested;
    ocr_config_free(cfg);
    train_result_free(&res);
    return interrupted ? 128 + interrupted : 0;
}
