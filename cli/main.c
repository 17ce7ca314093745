// ocrtrain: the command-line entry point. Each subcommand lives in cli/ as cmd_<name>.c: argument parsing and printing over the training library (training/).
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "training/training.h"
#include "kernels/backend.h"

#ifndef OCR_VERSION
#define OCR_VERSION "0.0.0"
#endif

static void print_usage(FILE *out) {
    fprintf(out,
            "ocrtrain %s: text-recognition training with automatic mixed precision\n"
            "\n"
            "usage: ocrtrain <command> [options]\n"
            "\n"
            "commands:\n"
            "  info     -c CFG [--json]                      model summary: params, FLOPs, layer table\n"
            "  synth    [--style receipt|document|zh] --count N [--seed S] --out DIR\n"
            "  data     -c CFG [--json]                      scan + benchmark the datasets through the loader\n"
            "  pack     -c CFG --out FILE | --lmdb DIR       decoded images in one mmap file, or a PaddleOCR LMDB\n"
            "  train    -c CFG [-o Key.path=value ...]       CFG: JSON or PaddleOCR's .yml\n"
            "  eval     -c CFG --weights W [--baseline B] [--json] [--lines FILE]   every Eval line scored\n"
            "  predict  -c CFG --weights W [--batch N] [--min-width PX] [--json] IMAGE|FOLDER|LABELS...\n"
            "  compare  -c CFG --out DIR [--seeds N] [--candidate CFG2]   FP32 vs AMP (or two configs) at N seeds\n"
            "  sensitivity -c CFG --weights W [--dtype D]    the layers AMP hurts, ranked; a proposal to keep in FP32\n"
            "  capacity -c CFG [--memory SIZE] [--json]      largest batch per precision\n"
            "  import   --onnx FILE | --pdparams FILE --out W.safetensors   PaddleOCR PP-OCRv3/v4/v5/v6 rec weights\n"
            "  export   -c CFG --weights W --onnx F | --pdparams F   for deployment: ONNX, PaddleOCR's state dict\n"
            "\n"
            "options:\n"
            "  -h, --help      this text\n"
            "  --version       version and compiled backends\n"
            "\n"
            "exit codes: 0 success, 1 runtime error, 2 usage or config error, 3 accuracy regression (compare, eval\n"
            "--baseline), 4 inconclusive (the seeds or lines cannot decide; how many would is printed)\n",
            OCR_VERSION);
}

int main(int argc, char **argv) {
    training_tune_runtime(argv);
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        print_usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("ocrtrain %s (backends: %s)\n", OCR_VERSION, ocr_build_backends());
        return 0;
    }
    training_set_version(OCR_VERSION);
    run_config_register_no_effect_keys();  // PaddleOCR keys accepted with a note, for every command
    if (strcmp(cmd, "info") == 0) return cmd_info(argc - 1, argv + 1);
    if (strcmp(cmd, "import") == 0) return cmd_import(argc - 1, argv + 1);
    if (strcmp(cmd, "synth") == 0) return cmd_synth(argc - 1, argv + 1);
    if (strcmp(cmd, "train") == 0) return cmd_train(argc - 1, argv + 1);
    if (strcmp(cmd, "eval") == 0) return cmd_eval(argc - 1, argv + 1);
    if (strcmp(cmd, "predict") == 0) return cmd_predict(argc - 1, argv + 1);
    if (strcmp(cmd, "capacity") == 0) return cmd_capacity(argc - 1, argv + 1);
    if (strcmp(cmd, "compare") == 0) return cmd_compare(argc - 1, argv + 1);
    if (strcmp(cmd, "data") == 0) return cmd_data(argc - 1, argv + 1);
    if (strcmp(cmd, "pack") == 0) return cmd_pack(argc - 1, argv + 1);
    if (strcmp(cmd, "export") == 0) return cmd_export(argc - 1, argv + 1);
    if (strcmp(cmd, "sensitivity") == 0) return cmd_sensitivity(argc - 1, argv + 1);
    fprintf(stderr, "ocrtrain: unknown command '%s' (see ocrtrain --help)\n", cmd);
    return 2;
}
