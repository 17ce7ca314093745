// ocrtrain synth --style receipt|document|zh --count N --seed S --out DIR [--height H]
//                [--max-width W] [--threads N] [--font-dir DIR]
// Writes a synthetic PaddleOCR dataset (DIR/images/*.png, DIR/labels.txt, DIR/dict.txt);
// see data/synth.h. The output is the same for any thread count.
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "data/synth.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: ocrtrain synth --style receipt|document|zh --count N --seed S --out DIR\n"
            "                      [--height H] [--max-width W] [--threads N] [--font-dir DIR]\n"
            "  --height     output line height in pixels (16..256, default 48)\n"
            "  --max-width  widest image (default 640*H/48)\n"
            "  --threads    worker threads (default: the online CPUs, at most 16); the output does not depend on it\n"
            "  --font-dir   use every .ttf/.otf/.ttc font there instead of the Debian font packages\n"
            "               (default: $OCR_SYNTH_FONT_DIR when set)\n");
}

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || !*s) return 0;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

static int parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s || *s == '-') return 0;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return 0;
    *out = v;
    return 1;
}

int cmd_synth(int argc, char **argv) {
    OcrSynthOptions opt;
    ocr_synth_default_options(&opt);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    opt.threads = cpus < 1 ? 1 : cpus > 16 ? 16 : (int)cpus;
    opt.font_dir = getenv("OCR_SYNTH_FONT_DIR");
    if (opt.font_dir && !opt.font_dir[0]) opt.font_dir = NULL;
    const char *out = NULL;
    int have_count = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t n;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            fprintf(stderr, "ocrtrain synth: %s '%s'\n",
                    a[0] == '-' ? "missing value after" : "unexpected argument", a);
            usage(stderr);
            return 2;
        }
        i++;
        if (strcmp(a, "--style") == 0) {
            if (ocr_synth_style_from_name(v, &opt.style) != OCR_OK) {
                fprintf(stderr, "ocrtrain %s\n", ocr_last_error());
                return 2;
            }
        } else if (strcmp(a, "--count") == 0 || strcmp(a, "-n") == 0) {
            if (!parse_i64(v, 1, OCR_SYNTH_MAX_COUNT, &n)) {
                fprintf(stderr, "ocrtrain synth: --count must be an integer 1..%d, got '%s'\n", OCR_SYNTH_MAX_COUNT, v);
                return 2;
            }
            opt.count = n, have_count = 1;
        } else if (strcmp(a, "--seed") == 0) {
            if (!parse_u64(v, &opt.seed)) {
                fprintf(stderr, "ocrtrain synth: --seed must be a non-negative integer, got '%s'\n", v);
                return 2;
            }
        } else if (strcmp(a, "--out") == 0 || strcmp(a, "-o") == 0) {
            out = v;
        } else if (strcmp(a, "--height") == 0) {
            if (!parse_i64(v, 16, 256, &n)) {
                fprintf(stderr, "ocrtrain synth: --height must be 16..256, got '%s'\n", v);
                return 2;
            }
            opt.height = (int)n;
        } else if (strcmp(a, "--max-width") == 0) {
            if (!parse_i64(v, 0, 8192, &n)) {
                fprintf(stderr, "ocrtrain synth: --max-width must be 0..8192, got '%s'\n", v);
                return 2;
            }
            opt.max_width = (int)n;
        } else if (strcmp(a, "--threads") == 0 || strcmp(a, "-j") == 0) {
            if (!parse_i64(v, 1, 256, &n)) {
                fprintf(stderr, "ocrtrain synth: --threads must be 1..256, got '%s'\n", v);
                return 2;
            }
            opt.threads = (int)n;
        } else if (strcmp(a, "--font-dir") == 0) {
            opt.font_dir = v;
        } else {
            fprintf(stderr, "ocrtrain synth: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!have_count || !out || !out[0]) {
        fprintf(stderr, "ocrtrain synth: --count and --out are required\n");
        usage(stderr);
        return 2;
    }
    OcrSynthStats stats;
    ocr_status_t st = ocr_synth_write(out, &opt, &stats);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain %s\n", ocr_last_error());  // the message starts with "synth: "
        return st == OCR_ERR_INVALID_ARG || st == OCR_ERR_CONFIG ? 2 : 1;
    }
    printf("synth: %" PRId64 " %s lines (seed %" PRIu64 ", height %d) in %s: %" PRId64 " gray + %" PRId64
           " RGB PNGs, %.1f MB, %.2f s, %.0f lines/s with %d thread%s\n",
           stats.lines, ocr_synth_style_name(opt.style), opt.seed, opt.height, out, stats.gray_images,
           stats.rgb_images, (double)stats.png_bytes / 1e6, stats.seconds,
           stats.seconds > 0 ? (double)stats.lines / stats.seconds : 0.0, opt.threads, opt.threads == 1 ? "" : "s");
    printf("  labels: %s/labels.txt  dictionary: %s/dict.txt (train with use_space_char: true)\n", out, out);
    return 0;
}
